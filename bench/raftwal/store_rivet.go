// This file is copied into hashicorp/raft-wal's bench/ directory by run.sh;
// it is not part of any module of this repository (the build tag keeps the
// go command from compiling it here).

//go:build raftwalbench

package main

import (
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/rivetkv/rivet/raftstore"
)

// openRivet opens rivet's raftstore in the harness's directory under the
// name raft-boltdb uses there ("raft.db", which the harness deletes before
// a run), with raftstore's defaults: every StoreLogs and DeleteRange
// durable when it returns, as with the other two stores.
func openRivet(o opts) (raft.LogStore, error) {
	return raftstore.New(raftstore.Options{Path: filepath.Join(o.dir, "raft.db")})
}

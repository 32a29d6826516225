// Package raftstore is a log store and stable store for
// github.com/hashicorp/raft over rivet: the drop-in for raft-boltdb v2
// (github.com/hashicorp/raft-boltdb/v2) that Consul, Nomad and Vault use
// over bbolt.
//
//	store, err := raftstore.New(raftstore.Options{Path: "raft.db"})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	r, err := raft.NewRaft(conf, fsm, store, store, snapshots, transport)
//
// A Store is both a raft.LogStore and a raft.StableStore, in one file. The
// file's layout is raft-boltdb's: entries in a "logs" bucket under their
// index as an 8-byte big-endian key, encoded with raft-boltdb's msgpack
// encoding, and the stable store's keys in a "conf" bucket; so a
// raft-boltdb file copied bucket for bucket into a rivet file (what
// `rivet import` does) opens as a Store with its log and terms intact.
//
// Every write (StoreLogs, DeleteRange, Set) is one rivet write transaction,
// durable when it returns under the default Durability (Full); pass other
// rivet options, such as Durability or a lock Timeout, in
// Options.RivetOptions.
package raftstore

//go:build !linux && !darwin && !windows

package vfs

import "os"

// syncFile uses fsync (os.File.Sync) for both kinds on the remaining
// platforms; none of them has a cheaper primitive rivet could rely on.
func syncFile(f *os.File, kind SyncKind) error { return f.Sync() }

// startWriteback is not supported here (Writebacker): the flush does all
// the writing.
func startWriteback(*os.File, int64, int64) error { return errWritebackUnsupported }

// waitWriteback is not supported here (WritebackWaiter): dirty data is the
// kernel's and the flush's to write.
func waitWriteback(*os.File, int64, int64) error { return errWritebackUnsupported }

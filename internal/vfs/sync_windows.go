//go:build windows

package vfs

import "os"

// syncFile uses FlushFileBuffers (os.File.Sync) for both kinds: Windows has
// no ordering-only flush, and FlushFileBuffers also flushes the drive cache.
func syncFile(f *os.File, kind SyncKind) error { return f.Sync() }

// startWriteback is not supported here (Writebacker): the flush does all
// the writing.
func startWriteback(*os.File, int64, int64) error { return errWritebackUnsupported }

// waitWriteback is not supported here (WritebackWaiter): dirty data is the
// kernel's and the flush's to write.
func waitWriteback(*os.File, int64, int64) error { return errWritebackUnsupported }

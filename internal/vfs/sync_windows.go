//go:build windows

package vfs

import "os"

// syncFile uses FlushFileBuffers (os.File.Sync) for both kinds: Windows has
// no ordering-only flush, and FlushFileBuffers also flushes the drive cache.
func syncFile(f *os.File, kind SyncKind) error { return f.Sync() }

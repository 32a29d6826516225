package vfs

import "path/filepath"

// SyncParentDir flushes the directory that holds path, best effort, once
// a new file was created there: a file whose name a crash loses never held
// a committed state (a database being created) or was a copy nobody was
// told of yet (a backup, a clone). The error is dropped because the file
// itself is already durable and nothing the caller could do would make
// the name more so.
func SyncParentDir(fs FS, path string) {
	_ = fs.SyncDir(filepath.Dir(path))
}

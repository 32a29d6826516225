//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || windows)

package vfs

import "os"

// lockFile is unsupported here: the remaining platforms either lack flock or
// (AIX, z/OS) only offer fcntl locks, which do not conflict between two opens
// in one process and are dropped when any descriptor of the file is closed.
func lockFile(f *os.File, exclusive bool) error {
	return &os.PathError{Op: "lock", Path: f.Name(), Err: errUnsupported}
}

func unlockFile(f *os.File) error {
	return &os.PathError{Op: "unlock", Path: f.Name(), Err: errUnsupported}
}

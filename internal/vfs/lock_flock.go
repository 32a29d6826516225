//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes a flock lock without waiting.
//
// flock rather than fcntl (POSIX) locks: flock locks belong to the open file
// description, so two opens of the same file in one process conflict, and
// closing some other descriptor of the file does not drop the lock (both are
// what fcntl locks get wrong for an embedded database).
func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	var locked bool
	err := control(f, "flock", func(fd uintptr) error {
		for {
			err := unix.Flock(int(fd), how)
			switch err {
			case unix.EINTR:
				continue
			case unix.EWOULDBLOCK:
				locked = true
			}
			return err
		}
	})
	if locked {
		return ErrLocked
	}
	return err
}

// unlockFile releases the flock lock.
func unlockFile(f *os.File) error {
	return control(f, "flock", func(fd uintptr) error {
		for {
			err := unix.Flock(int(fd), unix.LOCK_UN)
			if err != unix.EINTR {
				return err
			}
		}
	})
}

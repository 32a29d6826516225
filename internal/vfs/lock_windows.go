//go:build windows

package vfs

import (
	"os"

	"golang.org/x/sys/windows"
)

// The lock covers one byte far past any offset rivet reads or writes.
// Windows byte-range locks are mandatory: a locked range refuses ReadFile and
// WriteFile through other handles (and, for a shared lock, writes through
// every handle), so locking the file's real bytes would break readers and the
// lock holder itself. A range nobody does I/O in only serves as the lock.
const (
	lockOffsetLow  = 0xFFFFFFFF
	lockOffsetHigh = 0x7FFFFFFF
)

// lockFile takes a LockFileEx lock without waiting. Locks belong to the
// handle, so two opens of the same file in one process conflict.
func lockFile(f *os.File, exclusive bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	var locked bool
	err := control(f, "LockFileEx", func(fd uintptr) error {
		ol := windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
		err := windows.LockFileEx(windows.Handle(fd), flags, 0, 1, 0, &ol)
		if err == windows.ERROR_LOCK_VIOLATION {
			locked = true
		}
		return err
	})
	if locked {
		return ErrLocked
	}
	return err
}

// unlockFile releases the lock lockFile took.
func unlockFile(f *os.File) error {
	return control(f, "UnlockFileEx", func(fd uintptr) error {
		ol := windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
		return windows.UnlockFileEx(windows.Handle(fd), 0, 1, 0, &ol)
	})
}

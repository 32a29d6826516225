//go:build linux

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFile flushes with fdatasync for both kinds: Linux has no cheaper
// ordering-only primitive, and fdatasync still flushes the size change a
// Truncate or an extending write made (it is needed to read the data back).
func syncFile(f *os.File, kind SyncKind) error {
	return control(f, "fdatasync", func(fd uintptr) error {
		for {
			// EINTR means the call did not run to completion, so retrying is
			// not retrying a failed flush.
			err := unix.Fdatasync(int(fd))
			if err != unix.EINTR {
				return err
			}
		}
	})
}

// startWriteback asks the kernel to start writing [off, off+n) back
// without waiting (sync_file_range, SYNC_FILE_RANGE_WRITE). It makes
// nothing durable: fdatasync still writes and waits for every page, but
// finds fewer left to write. The call may block briefly while the device
// queue is full; it does not wait for the writes.
func startWriteback(f *os.File, off, n int64) error {
	return control(f, "sync_file_range", func(fd uintptr) error {
		return unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
}

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

// waitWriteback writes the dirty pages of [off, off+n) back and waits for
// them (sync_file_range with WAIT_BEFORE, WRITE and WAIT_AFTER); n == 0
// means to the end of the file. Unlike fdatasync it flushes neither the
// device's cache nor the file's metadata: it bounds dirty data, it makes
// nothing durable.
func waitWriteback(f *os.File, off, n int64) error {
	return control(f, "sync_file_range", func(fd uintptr) error {
		return unix.SyncFileRange(int(fd), off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}

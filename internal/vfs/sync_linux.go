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

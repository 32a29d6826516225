//go:build unix

package vfs

import (
	"errors"
	"os"
	"syscall"
)

// syncDir fsyncs the directory dir. A file system that cannot flush a
// directory (fsync returns EINVAL or ENOTSUP on some FUSE and network
// file systems) is as durable as it makes renames anyway: nil.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

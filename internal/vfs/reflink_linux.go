package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// reflink clones src into a new file dst with the FICLONE ioctl (btrfs,
// XFS with reflink, bcachefs, overlayfs on one of those, NFS 4.2 servers
// that support it). The file system locks both inodes and writes back src's
// dirty pages before it shares the extents, so the clone is src as of one
// instant, unflushed writes included.
func reflink(src *osFile, dst string, perm os.FileMode) (string, error) {
	d, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	var ioctlErr error
	err = control(src.f, "ficlone", func(sfd uintptr) error {
		return control(d, "ficlone", func(dfd uintptr) error {
			for {
				ioctlErr = unix.IoctlFileClone(int(dfd), int(sfd))
				if ioctlErr != unix.EINTR {
					return nil
				}
			}
		})
	})
	if err == nil && ioctlErr == nil {
		err = d.Sync()
	}
	if cerr := d.Close(); err == nil && ioctlErr == nil {
		err = cerr
	}
	if err == nil && ioctlErr == nil {
		return "FICLONE", nil
	}
	_ = os.Remove(dst)
	if err != nil {
		return "", err
	}
	// Every refusal of the ioctl itself means this pair of files cannot
	// be cloned here: EOPNOTSUPP/ENOTTY (ext4, tmpfs), EXDEV (two file
	// systems), EINVAL (a file system without reflink enabled, or
	// unaligned sizes). A caller falls back to copying, which reports a
	// real I/O or space problem itself.
	return "", noReflink("the file system cannot clone (FICLONE: "+errnoText(ioctlErr)+")", ioctlErr)
}

// errnoText is the errno's symbolic name and text ("EXDEV, invalid
// cross-device link"): the name is what one looks up.
func errnoText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name + ", " + err.Error()
		}
	}
	return err.Error()
}

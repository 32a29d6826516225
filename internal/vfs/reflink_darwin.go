package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// reflink clones src into a new file dst with fclonefileat (APFS). The
// clone is made from the blocks on disk, so src is flushed first: writes
// still in the unified buffer cache would otherwise be missing from it.
// clonefile copies src's mode; dst then gets perm.
func reflink(src *osFile, dst string, perm os.FileMode) (string, error) {
	if err := syncFile(src.f, SyncData); err != nil {
		return "", err
	}
	var cloneErr error
	err := control(src.f, "clonefile", func(fd uintptr) error {
		for {
			cloneErr = unix.Fclonefileat(int(fd), unix.AT_FDCWD, dst, unix.CLONE_NOFOLLOW|unix.CLONE_NOOWNERCOPY)
			if cloneErr != unix.EINTR {
				return nil
			}
		}
	})
	if err != nil {
		return "", err
	}
	switch {
	case cloneErr == nil:
	case errors.Is(cloneErr, unix.EEXIST):
		return "", &os.PathError{Op: "clonefile", Path: dst, Err: cloneErr}
	case errors.Is(cloneErr, unix.ENOTSUP), errors.Is(cloneErr, unix.EXDEV), errors.Is(cloneErr, unix.EINVAL):
		return "", noReflink("the file system cannot clone (clonefile: "+cloneErr.Error()+")", cloneErr)
	default:
		return "", &os.PathError{Op: "clonefile", Path: dst, Err: cloneErr}
	}
	if err := os.Chmod(dst, perm); err != nil {
		_ = os.Remove(dst)
		return "", err
	}
	d, err := os.Open(dst)
	if err == nil {
		err = syncFile(d, SyncData)
		_ = d.Close()
	}
	if err != nil {
		_ = os.Remove(dst)
		return "", err
	}
	return "clonefile", nil
}

//go:build darwin

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFile flushes on macOS and iOS, where plain fsync only hands the data to
// the drive, which may keep it in its volatile cache.
//
// SyncData uses F_FULLFSYNC, which also flushes the drive cache. SyncBarrier
// uses F_BARRIERFSYNC, which orders the writes before it ahead of later ones
// without waiting for the cache flush. A file system that does not support a
// primitive (network and some FUSE file systems) answers ENOTSUP or EINVAL;
// only then do we fall back to the next weaker one. Any other error, EIO in
// particular, is returned: a failed flush is never retried.
func syncFile(f *os.File, kind SyncKind) error {
	return control(f, "fsync", func(fd uintptr) error {
		if kind == SyncBarrier {
			err := fcntlRetry(fd, unix.F_BARRIERFSYNC)
			if !unsupported(err) {
				return err
			}
		}
		err := fcntlRetry(fd, unix.F_FULLFSYNC)
		if !unsupported(err) {
			return err
		}
		for {
			err := unix.Fsync(int(fd))
			if err != unix.EINTR {
				return err
			}
		}
	})
}

// fcntlRetry issues a flushing fcntl, retrying only when it was interrupted
// before it ran.
func fcntlRetry(fd uintptr, cmd int) error {
	for {
		_, err := unix.FcntlInt(fd, cmd, 0)
		if err != unix.EINTR {
			return err
		}
	}
}

// unsupported reports whether err says the file system lacks the primitive.
func unsupported(err error) bool {
	return err == unix.ENOTSUP || err == unix.EOPNOTSUPP || err == unix.EINVAL || err == unix.ENOTTY
}

// startWriteback is not supported here (Writebacker): the flush does all
// the writing.
func startWriteback(*os.File, int64, int64) error { return errWritebackUnsupported }

// waitWriteback is not supported here (WritebackWaiter): dirty data is the
// kernel's and the flush's to write.
func waitWriteback(*os.File, int64, int64) error { return errWritebackUnsupported }

package vfs

import (
	"errors"
	"fmt"
	"os"
)

// Reflink creates the file dst (with permission perm; it must not exist)
// sharing src's blocks through the file system's copy-on-write clone, and
// returns the name of the call that did it ("FICLONE" on Linux, "clonefile"
// on macOS). It takes time independent of the file's size and copies no
// data: the two files share their extents until either is written.
//
// The clone holds src's bytes as they are at the instant of the call,
// including writes not yet flushed (the file system orders the clone after
// every write(2) that returned before it, and before every write that
// starts after). Callers that need a particular state in the clone must
// stop writing to src while Reflink runs.
//
// Errors: when dst exists, an error matching fs.ErrExist, and nothing is
// touched. When the platform, the file system or src cannot clone (src is
// not an operating-system file, the two paths are on different file
// systems, ext4 or tmpfs, ...), an error matching errors.ErrUnsupported
// that says why, and dst does not exist afterwards. Any other error is the
// file system's and dst does not exist afterwards either.
//
// The clone is flushed (fsync) before Reflink returns; making its
// directory entry durable is the caller's part.
func Reflink(src File, dst string, perm os.FileMode) (string, error) {
	f, ok := src.(*osFile)
	if !ok {
		return "", noReflink(fmt.Sprintf("the file is not an operating-system file (%T)", src), nil)
	}
	return reflink(f, dst, perm)
}

// noReflinkError is every "cannot clone" error: it matches
// errors.ErrUnsupported and says why in words fit for a user ("the file
// system cannot clone (FICLONE: EXDEV, ...)").
type noReflinkError struct {
	msg string
	err error
}

func noReflink(msg string, err error) error { return &noReflinkError{msg: msg, err: err} }

func (e *noReflinkError) Error() string        { return e.msg }
func (e *noReflinkError) Unwrap() error        { return e.err }
func (e *noReflinkError) Is(target error) bool { return target == errors.ErrUnsupported }

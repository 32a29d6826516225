package image

import (
	"errors"
	"os"

	"github.com/rivetkv/rivet/internal/vfs"
)

// Reflink makes dst (with permission mode; it must not exist) a
// copy-on-write clone of src where the file system can, flushes dst's
// directory, and returns the name of the call that cloned. When the
// platform or file system cannot clone, it returns fallback saying why
// (fit for CloneResult.Fallback) and no error, and dst does not exist; err
// is for a problem a copy would meet too (dst exists, no permission).
//
// The clone holds src's bytes at the instant of the call: a caller that
// needs a particular state in it stops src's writer while Reflink runs, or
// treats the clone as a crash image.
func Reflink(src vfs.File, dst string, mode os.FileMode) (call, fallback string, err error) {
	call, err = vfs.Reflink(src, dst, mode)
	if errors.Is(err, errors.ErrUnsupported) {
		return "", err.Error(), nil
	}
	if err != nil {
		return "", "", err
	}
	vfs.SyncParentDir(vfs.OS(), dst)
	return call, "", nil
}

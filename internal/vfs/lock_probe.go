package vfs

import (
	"errors"
	"os"
)

// HeldForWriting reports whether another open holds path's lock for
// writing, by trying for a shared lock once instead of waiting for it.
func HeldForWriting(fs FS, path string) (bool, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	switch err := f.TryLock(false); {
	case errors.Is(err, ErrLocked):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, f.Unlock()
}

//go:build !linux && !darwin

package vfs

import (
	"os"
	"runtime"
)

// reflink is not offered here (Windows' block cloning needs ReFS and a
// different call; the BSDs have none): callers copy instead.
func reflink(*osFile, string, os.FileMode) (string, error) {
	return "", noReflink("rivet cannot clone files on "+runtime.GOOS, nil)
}

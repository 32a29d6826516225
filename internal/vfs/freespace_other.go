//go:build !linux && !darwin && !windows

package vfs

import "errors"

// freeSpace is not asked of the remaining platforms' file systems.
func freeSpace(string) (int64, error) { return 0, errors.ErrUnsupported }

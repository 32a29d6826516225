//go:build !linux

package vfs

// resident is unknown off Linux: x/sys/unix has no mincore wrapper, and
// callers treat no answer as "not in memory".
func resident(b []byte, off int64) (bool, error) { return false, errUnsupported }

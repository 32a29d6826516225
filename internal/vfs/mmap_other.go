//go:build !unix && !windows

package vfs

import "os"

// mapFile is unsupported on platforms without mmap (js, wasip1, plan9).
func mapFile(f *os.File, length int64) (Mapping, error) {
	return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: errUnsupported}
}

// willNeed is unsupported where there is no mmap (mapFile never returns a
// mapping there).
func willNeed(b []byte, off, end int64) error { return errUnsupported }

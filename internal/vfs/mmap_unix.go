//go:build unix

package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// osPageSize is the unit madvise works in: its address must be a multiple.
var osPageSize = int64(os.Getpagesize())

// mapFile maps the first length bytes of f read-only and shared.
//
// MAP_SHARED makes the mapping a window on the page cache, so later pwrites
// to the file show through it without remapping (the File.Map invariant).
// length may exceed the file: the kernel reserves the address range, and the
// part past the end becomes readable as the file grows. Touching a page past
// the end raises SIGBUS, which is why the pager grows the file before any
// reader can reach a page.
func mapFile(f *os.File, length int64) (Mapping, error) {
	n, err := checkMapLength(length)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	if n == 0 {
		// mmap rejects a zero length; an empty view needs no address space.
		return &sysMapping{}, nil
	}
	var b []byte
	err = control(f, "mmap", func(fd uintptr) error {
		var merr error
		b, merr = unix.Mmap(int(fd), 0, n, unix.PROT_READ, unix.MAP_SHARED)
		return merr
	})
	if err != nil {
		return nil, err
	}
	// B+tree lookups touch pages all over the file; read-ahead would mostly
	// fetch pages nobody asked for (walks in key order ask for theirs:
	// Advisor). The advice is only a hint, so an error (some systems
	// reject it for file mappings) changes nothing.
	_ = unix.Madvise(b, unix.MADV_RANDOM)
	return &sysMapping{b: b, unmap: unix.Munmap}, nil
}

// willNeed asks the kernel to read b[off:end] in now (MADV_WILLNEED): it
// starts the reads and returns without waiting for them; pages already in
// memory cost a lookup each. The start is aligned down to the OS page, as
// madvise requires (the mapping itself starts on one).
func willNeed(b []byte, off, end int64) error {
	off -= off % osPageSize
	return unix.Madvise(b[off:end], unix.MADV_WILLNEED)
}

package vfs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident asks mincore whether the OS page holding b[off] is in memory.
// For a file mapping Linux answers from the page cache when the process may
// write the file (rivet opens its files read-write unless ReadOnly), else
// from this process's page tables only: a page another process read in then
// looks absent, which costs a needless read-ahead hint, nothing more.
func resident(b []byte, off int64) (bool, error) {
	off -= off % osPageSize
	var vec [1]byte
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[off])), 1, uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return false, errno
	}
	return vec[0]&1 != 0, nil
}

//go:build linux || darwin

package difftest

import (
	"syscall"

	"github.com/rivetkv/rivet"
)

// hugeValue returns a value one byte longer than MaxValueSize without
// allocating it: a private anonymous mapping that reserves address space
// only. Both engines refuse such a value by its length before reading it;
// one that read it would read zero pages, and one that copied it would
// show in the test's memory.
func hugeValue() []byte {
	b, err := syscall.Mmap(-1, 0, rivet.MaxValueSize+1, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return b
}

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"runtime"
	"syscall"
)

func peakRSS() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	// ru_maxrss is in bytes on Darwin and in KiB on Linux and the BSDs.
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss), true
	}
	return int64(ru.Maxrss) * 1024, true
}

// majorFaults returns the page faults of this process that needed I/O
// (getrusage's ru_majflt): with the page cache dropped, every page of a
// memory-mapped file touched for the first time is one.
func majorFaults() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return int64(ru.Majflt), true
}

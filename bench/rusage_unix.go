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

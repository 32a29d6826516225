//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bench

// peakRSS is unavailable here; the report omits the figure.
func peakRSS() (int64, bool) { return 0, false }

// majorFaults is unavailable here; the report omits the figure.
func majorFaults() (int64, bool) { return 0, false }

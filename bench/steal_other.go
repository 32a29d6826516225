//go:build !linux

package bench

import "time"

// stolenCPU is Linux-only (/proc/stat's steal column).
func stolenCPU() (time.Duration, bool) { return 0, false }

package vfs

import "math"

// clampBytes returns blocks × size, saturating at the largest int64.
func clampBytes(blocks, size uint64) int64 {
	if size != 0 && blocks > math.MaxInt64/size {
		return math.MaxInt64
	}
	return int64(blocks * size)
}

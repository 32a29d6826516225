package spacemap

import "math/bits"

// Bitmaps are []uint64 with bit i in word i/64 at bit i%64, the numbering
// page.EncodeRegionMap and page.DecodeRegionMap use, so a region's in-memory
// words go to and come from disk unchanged.
//
// Every helper takes bit positions relative to the bitmap and trusts its
// caller to stay inside it: they are only called with ranges the Map has
// already checked against the region size.

// lowMask returns a word with the k lowest bits set (k <= 64).
func lowMask(k uint64) uint64 {
	if k >= 64 {
		return ^uint64(0)
	}
	return 1<<k - 1
}

// setRange sets bits [start, start+n).
func setRange(w []uint64, start, n uint64) {
	for n > 0 {
		i, b := start/64, start%64
		k := min(64-b, n)
		w[i] |= lowMask(k) << b
		start += k
		n -= k
	}
}

// clearRange clears bits [start, start+n).
func clearRange(w []uint64, start, n uint64) {
	for n > 0 {
		i, b := start/64, start%64
		k := min(64-b, n)
		w[i] &^= lowMask(k) << b
		start += k
		n -= k
	}
}

// countRange returns the number of set bits in [start, start+n).
func countRange(w []uint64, start, n uint64) uint64 {
	c := 0
	for n > 0 {
		i, b := start/64, start%64
		k := min(64-b, n)
		c += bits.OnesCount64(w[i] & (lowMask(k) << b))
		start += k
		n -= k
	}
	return uint64(c)
}

// popcount returns the number of set bits in w.
func popcount(w []uint64) uint64 {
	c := 0
	for _, x := range w {
		c += bits.OnesCount64(x)
	}
	return uint64(c)
}

// nextSet returns the first set bit at or after pos.
func nextSet(w []uint64, pos uint64) (uint64, bool) {
	i := pos / 64
	if i >= uint64(len(w)) {
		return 0, false
	}
	if x := w[i] >> (pos % 64); x != 0 {
		return pos + uint64(bits.TrailingZeros64(x)), true
	}
	for i++; i < uint64(len(w)); i++ {
		if w[i] != 0 {
			return i*64 + uint64(bits.TrailingZeros64(w[i])), true
		}
	}
	return 0, false
}

// nextClear returns the first clear bit in [pos, limit), or limit if every
// bit there is set. limit must be <= 64·len(w). Stopping at limit keeps a
// search for a short run from scanning to the end of a long one.
func nextClear(w []uint64, pos, limit uint64) uint64 {
	for pos < limit {
		i, b := pos/64, pos%64
		// The shift fills the top with zeros, so x == 0 means bits b..63 of
		// the word are all set.
		if x := ^w[i] >> b; x != 0 {
			return min(pos+uint64(bits.TrailingZeros64(x)), limit)
		}
		pos += 64 - b
	}
	return limit
}

// findRun returns the lowest start >= from of n consecutive set bits.
//
// It scans word by word, carrying the length of the run of ones that ends at
// the top of the previous word, so every word is visited once: linear in the
// bitmap size at worst, O(log n) operations per word. Within a word, after
// the shift-and folding below, bit p of y is set iff bits p..p+n-1 of the
// word are all set.
func findRun(w []uint64, from, n uint64) (uint64, bool) {
	if n == 1 {
		return nextSet(w, from)
	}
	first := from / 64
	carry := uint64(0) // ones ending at the top of the previous word
	for i := first; i < uint64(len(w)); i++ {
		x := w[i]
		if i == first {
			x &= ^uint64(0) << (from % 64)
		}
		// A run that started in earlier words and continues here starts
		// before anything inside this word, so it is checked first.
		if carry > 0 && carry+uint64(bits.TrailingZeros64(^x)) >= n {
			return i*64 - carry, true
		}
		if n <= 64 {
			y := x
			for k := uint64(1); k < n; {
				step := min(k, n-k)
				y &= y >> step
				k += step
			}
			if y != 0 {
				return i*64 + uint64(bits.TrailingZeros64(y)), true
			}
		}
		if x == ^uint64(0) {
			carry += 64
		} else {
			carry = uint64(bits.LeadingZeros64(^x))
		}
	}
	return 0, false
}

// firstNonZeroWord returns the index of the first non-zero word at or after
// i, or len(w).
func firstNonZeroWord(w []uint64, i int) int {
	for i < len(w) && w[i] == 0 {
		i++
	}
	return i
}

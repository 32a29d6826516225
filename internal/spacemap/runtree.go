package spacemap

import "math/bits"

// runTree summarises a region's allocatable bitmap so that its longest run
// of free pages, and where it starts, are found in O(log words) and kept
// current in O(log words) per changed word (allocation for locality,
// locality.go). Each node covers a power-of-two span of words and holds
// the ones at its low end (pre), at its high end (suf) and the longest
// run inside it (best); a parent combines its children, counting a run
// that crosses from the left child into the right one. Node 1 is the root;
// the leaves are nodes leaves..2·leaves-1, one per word, and the leaves
// past the bitmap's end hold no bits.
type runTree struct {
	leaves         int
	pre, suf, best []uint32
}

// newRunTree builds the summary of w.
func newRunTree(w []uint64) *runTree {
	leaves := 1
	for leaves < len(w) {
		leaves *= 2
	}
	t := &runTree{leaves: leaves, pre: make([]uint32, 2*leaves), suf: make([]uint32, 2*leaves), best: make([]uint32, 2*leaves)}
	for i, x := range w {
		t.setLeaf(i, x)
	}
	for v := leaves - 1; v >= 1; v-- {
		t.pull(v)
	}
	return t
}

// setLeaf stores word i's summary (without updating its ancestors).
func (t *runTree) setLeaf(i int, x uint64) {
	v := t.leaves + i
	t.pre[v] = uint32(bits.TrailingZeros64(^x))
	t.suf[v] = uint32(bits.LeadingZeros64(^x))
	var best uint32
	for y := x; y != 0; y &= y << 1 {
		best++ // each step shortens every run by one
	}
	t.best[v] = best
}

// span returns the bits node v covers.
func (t *runTree) span(v int) uint32 {
	return 64 * uint32(t.leaves>>(bits.Len(uint(v))-1))
}

// pull recomputes node v from its children.
func (t *runTree) pull(v int) {
	l, r := 2*v, 2*v+1
	half := t.span(l)
	t.pre[v] = t.pre[l]
	if t.pre[l] == half {
		t.pre[v] = half + t.pre[r]
	}
	t.suf[v] = t.suf[r]
	if t.suf[r] == half {
		t.suf[v] = half + t.suf[l]
	}
	t.best[v] = max(t.best[l], t.best[r], t.suf[l]+t.pre[r])
}

// update refreshes the words [lo, hi] of w after they changed.
func (t *runTree) update(w []uint64, lo, hi int) {
	for i := lo; i <= hi; i++ {
		t.setLeaf(i, w[i])
	}
	for a, b := (t.leaves+lo)/2, (t.leaves+hi)/2; a >= 1; a, b = a/2, b/2 {
		for v := a; v <= b; v++ {
			t.pull(v)
		}
	}
}

// longest returns the start and length of the longest run in w, the
// bitmap the tree summarises (the lowest such run on a tie; length 0 if no
// bit is set).
func (t *runTree) longest(w []uint64) (start, n uint64) {
	best := t.best[1]
	if best == 0 {
		return 0, 0
	}
	v, base := 1, uint64(0)
	for v < t.leaves {
		l, r := 2*v, 2*v+1
		switch {
		case t.best[l] == best:
			v = l
		case t.suf[l]+t.pre[r] == best:
			return base + uint64(t.span(l)-t.suf[l]), uint64(best)
		default:
			base += uint64(t.span(l))
			v = r
		}
	}
	// Inside one word: bit i of y is set when bits i..i+best-1 all are.
	y := w[v-t.leaves]
	for k := uint32(1); k < best; k++ {
		y &= y >> 1
	}
	return base + uint64(bits.TrailingZeros64(y)), uint64(best)
}

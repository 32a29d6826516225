package spacemap

import (
	"errors"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// Allocation for write locality (docs/design.md §4.3).
//
// First fit hands a transaction the lowest allocatable pages one run at a
// time. After random updates those are scattered single pages, so a commit
// of 180 pages writes ~160 separate runs, and a flush of scattered pages
// costs several times one of contiguous pages (measured on this project's
// VM: 204 scattered pages 2.6 ms, the same pages in 10 runs 0.7 ms).
//
// With a slack s > 0 a transaction instead fills the largest free extents
// first, one after the other, so its pages form as few runs as free space
// allows. When it has started localRunsBeforeGrowth extents and less than
// s of the file is free, it takes the rest at the end of the file (one
// more run) rather than more small holes: the file may grow until s of it
// is free, and the holes left behind merge as their neighbours are freed.
// A model of uniformly random updates (bench/cmd/allocmodel: 182 pages a
// commit, 34,000 leaves) gives 160 runs a commit under first fit at 1.01x
// the live pages; with this policy 127 runs at s = 0.2 (1.26x), 56 at
// s = 1/3 (1.51x), 27 at s = 0.5 (2.01x). Fewer runs cost file size; s
// bounds that cost.
//
// Compaction (SetLimit) always uses first fit: its point is to move pages
// as low as they go.

// localRunsBeforeGrowth is how many extents a transaction fills before it
// may take the rest of its pages at the end of the file.
const localRunsBeforeGrowth = 8

// SetLocalitySlack sets the part of the file (0 to 0.9) that may be left
// free so that transactions write in few contiguous runs; 0 (the default)
// is address-ordered first fit. It takes effect at the next transaction.
func (m *Map) SetLocalitySlack(s float64) {
	if m.tx.active {
		panic("spacemap: SetLocalitySlack inside a transaction")
	}
	m.slack = min(max(s, 0), 0.9)
}

// localCursor is a transaction's position in the extent it fills.
//
// Invariant: outside atHWM, [next, end) lies in one loaded region; its
// pages were allocatable when the extent was chosen, and each use checks
// they still are (first fit, which serves the runs the extent cannot,
// may have taken some).
type localCursor struct {
	next, end page.ID
	atHWM     bool // the transaction takes its pages at the end of the file
	runs      int  // extents started by the transaction
}

// allocateLocal serves Allocate(n) under a slack. ok is false when it
// found no extent of n pages: first fit decides then.
func (m *Map) allocateLocal(n uint64) (id page.ID, ok bool, err error) {
	c := &m.tx.local
	if c.atHWM && m.hwm == c.next {
		if id, err = m.allocateAtHWM(n); err != nil {
			return m.growFailed(err)
		}
		c.next = id + n
		return id, true, nil
	}
	if c.next+n <= c.end {
		reg := m.regions[c.next/m.rp]
		start := c.next - reg.idx*m.rp
		if countRange(reg.alloc, start, n) == n {
			id = c.next
			m.take(reg, start, n)
			m.tx.allocs = append(m.tx.allocs, run{id, n})
			c.next += n
			return id, true, nil
		}
	}
	if c.runs >= localRunsBeforeGrowth && float64(m.freePages) < m.slack*float64(m.hwm) {
		if id, err = m.allocateAtHWM(n); err != nil {
			return m.growFailed(err)
		}
		c.runs++
		c.atHWM, c.next, c.end = true, id+n, 0
		return id, true, nil
	}
	reg, start, length := m.longestExtent()
	if length < n {
		return 0, false, nil
	}
	id = reg.idx*m.rp + start
	m.take(reg, start, n)
	m.tx.allocs = append(m.tx.allocs, run{id, n})
	c.runs++
	c.atHWM, c.next, c.end = false, id+n, id+length
	return id, true, nil
}

// growFailed handles a failed growth: at the size limit the holes growth
// was to spare are still there, so first fit decides; other errors stand.
func (m *Map) growFailed(err error) (page.ID, bool, error) {
	m.tx.local.atHWM = false
	if errors.Is(err, rerrors.ErrMaxSizeReached) {
		return 0, false, nil
	}
	return 0, false, err
}

// longestExtent returns the longest allocatable run of the loaded regions
// (length 0 if none): the longest of each region's run tree, built the
// first time the region is asked and kept current by allocChanged.
func (m *Map) longestExtent() (best *region, start, n uint64) {
	for _, reg := range m.regions {
		if reg.nalloc <= n {
			continue
		}
		if reg.runs == nil {
			reg.runs = newRunTree(reg.alloc)
		}
		if l := uint64(reg.runs.best[1]); l > n || l == n && best != nil && reg.idx < best.idx {
			best, n = reg, l
		}
	}
	if best == nil {
		return nil, 0, 0
	}
	start, n = best.runs.longest(best.alloc)
	return best, start, n
}

// allocChanged keeps the region's run tree current after the bits
// [start, start+n) of its allocatable bitmap changed.
func (reg *region) allocChanged(start, n uint64) {
	if reg.runs == nil || n == 0 {
		return
	}
	reg.runs.update(reg.alloc, int(start/64), int((start+n-1)/64))
}

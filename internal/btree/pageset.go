package btree

import "github.com/rivetkv/rivet/internal/page"

// pageSet is a set of page ids below a high-water mark: a flat bitmap when
// a walk covers the whole file (one bit per page), a sparse one when it
// covers only what the last sync point wrote (recovery at Open), so that
// verifying a few pages of a large file does not allocate a bit for every
// page of it.
type pageSet struct {
	hwm    uint64
	flat   []uint64          // word i: pages 64i..64i+63
	sparse map[uint64]uint64 // the same words, only those with a bit set
}

// newPageSet returns an empty set for pages below hwm; dense chooses the
// flat bitmap.
func newPageSet(hwm uint64, dense bool) pageSet {
	if dense {
		return pageSet{hwm: hwm, flat: make([]uint64, (hwm+63)/64)}
	}
	return pageSet{hwm: hwm, sparse: map[uint64]uint64{}}
}

// empty reports whether the set was never initialised.
func (s *pageSet) empty() bool { return s.flat == nil && s.sparse == nil }

// addRun adds the pages [id, id+n) that lie below the HWM, n at least one.
// If one of them was in the set already, it adds nothing and returns the
// first such page and false.
func (s *pageSet) addRun(id page.ID, n uint64) (page.ID, bool) {
	end := id + max(n, 1)
	if end < id || end > s.hwm {
		end = s.hwm
	}
	for p := id; p < end; p++ {
		if s.word(p)&(1<<(p%64)) != 0 {
			return p, false
		}
	}
	for p := id; p < end; p++ {
		s.set(p)
	}
	return 0, true
}

func (s *pageSet) word(p page.ID) uint64 {
	if s.flat != nil {
		return s.flat[p/64]
	}
	return s.sparse[p/64]
}

func (s *pageSet) set(p page.ID) {
	if s.flat != nil {
		s.flat[p/64] |= 1 << (p % 64)
		return
	}
	s.sparse[p/64] |= 1 << (p % 64)
}

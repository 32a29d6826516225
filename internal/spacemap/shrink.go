package spacemap

import (
	"errors"
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
)

// ErrSyncInFlight is returned by ShrinkTo while a sync point is in flight:
// its image names regions the shrink would drop. Try again after SyncDone.
var ErrSyncInFlight = errors.New("spacemap: a sync point is in flight")

// shrinkUndo is what Rollback and Undo need to undo a ShrinkTo.
type shrinkUndo struct {
	hwm     uint64
	dropped []*region
	last    *region // the region the new HWM ends in (nil: ends on a boundary)
	// lastFrom is where ShrinkTo cleared last's bitmaps from (region
	// relative); lastFree and lastAlloc are copies of them before.
	lastFrom    uint64
	lastFree    []uint64
	lastAlloc   []uint64
	lastDisk    []uint64
	lastDirty   bool
	diskRegions uint64
	diskHint    uint64
	allocHint   uint64
	firstFree   uint64
}

// FreeTail returns the lowest page id p such that every page in [p, HWM)
// is allocatable (free, and no reader or fallback state can see it), with
// the metas and region map slots in that range not counting against it;
// HWM if the last page is not allocatable. It loads the regions it looks at,
// from the last one down, and stops at the first page that is not
// allocatable. The result is never below page.MinPages.
func (m *Map) FreeTail() (page.ID, error) {
	p := m.hwm
	for r := m.regionCount(); r > 0; r-- {
		reg, err := m.region(r - 1)
		if err != nil {
			return 0, err
		}
		base := (r - 1) * m.rp
		first := page.RegionFirstData(m.pageSize, r-1) - base
		end := min(m.rp, m.hwm-base)
		// Walk down from end while the pages are allocatable.
		i := end
		for i > first && reg.alloc[(i-1)/64]&(1<<((i-1)%64)) != 0 {
			i--
		}
		if i > first {
			return base + i, nil
		}
		// The whole data area is allocatable: the region can go, down to
		// its map slots (or, for region 0, the metas and slots).
		p = base + first
		if r-1 > 0 {
			// A region's map slots go with it: the tail reaches the
			// previous region's end.
			p = base
		}
	}
	return max(p, page.MinPages), nil
}

// ShrinkTo lowers the HWM to hwm inside the open transaction, which must
// have made no other change and must make none after it (the DB runs it in
// a transaction of its own). Every page in [hwm, HWM) that is a data page
// must be allocatable (FreeTail says how far that holds); hwm must not end
// inside a region's map slots and is at least page.MinPages. The pages above
// hwm leave the map: regions entirely above it are dropped (and with them
// their place in the meta's bitmaps), and the region hwm ends in gets its
// map written again at the next sync point (its map on disk marks pages
// above the new HWM free, which a delta cannot say). Rollback undoes it.
//
// It returns ErrSyncInFlight while a sync point is in flight.
func (m *Map) ShrinkTo(hwm uint64) error {
	m.mustTx("ShrinkTo")
	if m.syncing {
		return ErrSyncInFlight
	}
	if len(m.tx.allocs) > 0 || len(m.tx.freed) > 0 || m.hwm != m.tx.hwm || m.tx.shrink != nil {
		panic("spacemap: ShrinkTo in a transaction that changed something")
	}
	if hwm >= m.hwm {
		return nil
	}
	if hwm < page.MinPages {
		return fmt.Errorf("spacemap: cannot shrink to %d pages, below %d", hwm, page.MinPages)
	}
	r := (hwm - 1) / m.rp // the region hwm ends in
	if hwm%m.rp != 0 && hwm < page.RegionFirstData(m.pageSize, r) {
		return fmt.Errorf("spacemap: cannot shrink to %d pages, inside region %d's map slots", hwm, r)
	}
	// Check before changing anything.
	for q := r; q < m.regionCount(); q++ {
		reg, err := m.region(q)
		if err != nil {
			return err
		}
		base := q * m.rp
		from := max(hwm, page.RegionFirstData(m.pageSize, q)) - base
		if hwm <= base {
			from = page.RegionFirstData(m.pageSize, q) - base
		}
		to := min(m.rp, m.hwm-base)
		if from < to && countRange(reg.alloc, from, to-from) != to-from {
			return fmt.Errorf("spacemap: cannot shrink to %d pages: region %d has pages in use or pending above it", hwm, q)
		}
	}
	u := &shrinkUndo{hwm: m.hwm, diskRegions: m.diskRegions, diskHint: m.diskHint, allocHint: m.allocHint, firstFree: m.firstFree}
	count := m.regionCount()
	newCount := (hwm + m.rp - 1) / m.rp
	for q := newCount; q < count; q++ {
		reg := m.regions[q]
		u.dropped = append(u.dropped, reg)
		m.freePages -= reg.nfree
		delete(m.regions, q)
		delete(m.dirty, q)
	}
	if last := m.regions[r]; hwm%m.rp != 0 {
		u.last = last
		u.lastFree = append([]uint64(nil), last.free...)
		u.lastAlloc = append([]uint64(nil), last.alloc...)
		u.lastDisk, u.lastDirty = last.disk, last.dirty
		from := hwm - r*m.rp
		u.lastFrom = from
		k := countRange(last.free, from, m.rp-from)
		clearRange(last.free, from, m.rp-from)
		clearRange(last.alloc, from, m.rp-from)
		last.allocChanged(from, m.rp-from)
		last.nfree -= k
		last.nalloc -= k
		last.noFit = 0
		last.allocHint = firstNonZeroWord(last.alloc, 0)
		m.freePages -= k
		// Its map on disk marks pages above the new HWM free; a delta
		// cannot unsay that (runs must lie below the HWM), so the next
		// sync point writes the whole map, to the slot the steady
		// selector does not name.
		last.disk = nil
		m.markDirty(last)
	}
	m.hwm = hwm
	m.diskRegions = min(m.diskRegions, newCount)
	m.diskHint = min(m.diskHint, newCount)
	m.allocHint = min(m.allocHint, newCount)
	m.firstFree = min(m.firstFree, newCount)
	m.tx.shrink = u
	return nil
}

// undoShrink restores what ShrinkTo changed. Rollback calls it, and Undo
// once every later transaction is taken back; the transaction made no
// other change. Release may have made pending pages below the new HWM
// allocatable since, so only the pages above it come back from the copies.
func (m *Map) undoShrink(u *shrinkUndo) {
	for _, reg := range u.dropped {
		m.regions[reg.idx] = reg
		m.freePages += reg.nfree
		if reg.dirty {
			m.dirty[reg.idx] = reg
		}
	}
	if l := u.last; l != nil {
		nf := copyRange(l.free, u.lastFree, u.lastFrom, m.rp)
		na := copyRange(l.alloc, u.lastAlloc, u.lastFrom, m.rp)
		l.allocChanged(u.lastFrom, m.rp-u.lastFrom)
		l.nfree += nf
		l.nalloc += na
		m.freePages += nf
		l.noFit = 0
		l.allocHint = firstNonZeroWord(l.alloc, 0)
		l.disk, l.dirty = u.lastDisk, u.lastDirty
		if l.dirty {
			m.dirty[l.idx] = l
		} else {
			delete(m.dirty, l.idx)
		}
	}
	m.hwm = u.hwm
	m.diskRegions, m.diskHint, m.allocHint, m.firstFree = u.diskRegions, u.diskHint, u.allocHint, u.firstFree
}

// copyRange sets in dst the bits of src in [from, to), which are clear in
// dst, and returns how many it set.
func copyRange(dst, src []uint64, from, to uint64) uint64 {
	var n uint64
	for pos := from; pos < to; {
		s, ok := nextSet(src, pos)
		if !ok || s >= to {
			break
		}
		e := nextClear(src, s, to)
		setRange(dst, s, e-s)
		n += e - s
		pos = e
	}
	return n
}

// InUseFrom returns the data pages in [from, HWM) that are not free in the
// newest committed state: what a compaction must move for everything to
// lie below from. Map slots are not counted. It loads the regions it
// looks at.
func (m *Map) InUseFrom(from page.ID) (uint64, error) {
	var n uint64
	for r := from / m.rp; r < m.regionCount(); r++ {
		reg, err := m.region(r)
		if err != nil {
			return 0, err
		}
		base := r * m.rp
		lo := max(from, page.RegionFirstData(m.pageSize, r)) - base
		hi := min(m.rp, m.hwm-base)
		if hi > lo {
			n += hi - lo - countRange(reg.free, lo, hi-lo)
		}
	}
	return n, nil
}

package spacemap

import (
	"bytes"
	"fmt"
	"math/bits"
	"slices"

	"github.com/rivetkv/rivet/internal/page"
)

// fakeDisk is a Loader backed by a map of page buffers. It stores the pages
// of a SyncImage as if they had been written to the file; pages never written
// read as zeros (a hole).
type fakeDisk struct {
	ps    int
	pages map[page.ID][]byte
	reads int
	fail  error // returned by ReadPages when set
}

func newFakeDisk(ps int) *fakeDisk { return &fakeDisk{ps: ps, pages: make(map[page.ID][]byte)} }

func (d *fakeDisk) ReadPages(id page.ID, n uint64) ([]byte, error) {
	d.reads++
	if d.fail != nil {
		return nil, d.fail
	}
	out := make([]byte, n*uint64(d.ps))
	for i := uint64(0); i < n; i++ {
		copy(out[i*uint64(d.ps):], d.pages[id+i])
	}
	return out, nil
}

func (d *fakeDisk) write(p page.Run) { d.pages[p.ID] = bytes.Clone(p.Data) }

func (d *fakeDisk) apply(img SyncImage) {
	for _, p := range img.Pages {
		d.write(p)
	}
}

// metaState is what the test keeps of the last durable meta.
type metaState struct {
	hwm       uint64
	txid      uint64
	sel       []byte
	firstFree uint32
	freePages uint64
	delta     []page.DeltaRun
}

func (ms metaState) config(ps int, d *fakeDisk, maxPages uint64) Config {
	return Config{
		PageSize:        ps,
		HWM:             ms.hwm,
		Txid:            ms.txid,
		Selector:        slices.Clone(ms.sel),
		FirstFreeRegion: ms.firstFree,
		FreePages:       ms.freePages,
		Delta:           slices.Clone(ms.delta),
		MaxPages:        maxPages,
		Loader:          d,
	}
}

func metaOf(img SyncImage) metaState {
	return metaState{hwm: img.HWM, txid: img.Txid, sel: slices.Clone(img.Selector), firstFree: img.FirstFreeRegion, freePages: img.FreePages, delta: slices.Clone(img.Delta)}
}

// withDelta returns free (region r's map bits) with the delta runs that lie
// in region r applied: the region's free set in the meta's state.
func withDelta(free []uint64, delta []page.DeltaRun, r uint64) []uint64 {
	out := slices.Clone(free)
	rp := page.RegionPages(tps)
	for _, d := range delta {
		if d.ID/rp != r {
			continue
		}
		if d.Free {
			setRange(out, d.ID-r*rp, d.N)
		} else {
			clearRange(out, d.ID-r*rp, d.N)
		}
	}
	return out
}

// check verifies the Map's internal invariants; it is what every test runs
// after every step.
func (m *Map) check() error {
	count := m.regionCount()
	for r, reg := range m.regions {
		if reg.idx != r {
			return fmt.Errorf("region %d stored under %d", reg.idx, r)
		}
		if r >= count {
			return fmt.Errorf("region %d held, but only %d regions exist", r, count)
		}
		if len(reg.free) != m.words || len(reg.alloc) != m.words {
			return fmt.Errorf("region %d: bitmap lengths %d/%d", r, len(reg.free), len(reg.alloc))
		}
		if c := popcount(reg.free); c != reg.nfree {
			return fmt.Errorf("region %d: nfree %d, popcount %d", r, reg.nfree, c)
		}
		if c := popcount(reg.alloc); c != reg.nalloc {
			return fmt.Errorf("region %d: nalloc %d, popcount %d", r, reg.nalloc, c)
		}
		for i := range reg.alloc {
			if reg.alloc[i]&^reg.free[i] != 0 {
				return fmt.Errorf("region %d word %d: allocatable but not free: %#x", r, i, reg.alloc[i]&^reg.free[i])
			}
			if i < reg.allocHint && reg.alloc[i] != 0 {
				return fmt.Errorf("region %d: allocatable bit in word %d below hint %d", r, i, reg.allocHint)
			}
		}
		reserved := page.RegionFirstData(m.pageSize, r) - r*m.rp
		if c := countRange(reg.free, 0, reserved); c != 0 {
			return fmt.Errorf("region %d: map slot or meta marked free", r)
		}
		if end := (r + 1) * m.rp; end > m.hwm {
			from := m.hwm - r*m.rp
			if c := countRange(reg.free, from, m.rp-from); c != 0 {
				return fmt.Errorf("region %d: %d pages at or above the HWM %d marked free", r, c, m.hwm)
			}
		}
		if reg.runs != nil {
			want := newRunTree(reg.alloc)
			if !slices.Equal(reg.runs.pre, want.pre) || !slices.Equal(reg.runs.suf, want.suf) || !slices.Equal(reg.runs.best, want.best) {
				return fmt.Errorf("region %d: the run tree does not summarise the allocatable bitmap", r)
			}
		}
		if reg.noFit != 0 {
			if s, ok := findRun(reg.alloc, 0, reg.noFit); ok {
				return fmt.Errorf("region %d: noFit %d but a run fits at %d", r, reg.noFit, s)
			}
		}
		if reg.dirty != (m.dirty[r] == reg) {
			return fmt.Errorf("region %d: dirty flag %v disagrees with the dirty set", r, reg.dirty)
		}
		if reg.disk == nil && !reg.dirty {
			return fmt.Errorf("region %d: no map on disk, but clean", r)
		}
		if reg.disk != nil && !reg.dirty && !slices.Equal(reg.disk, reg.free) {
			return fmt.Errorf("region %d: clean, but its free set differs from its map on disk", r)
		}
		if _, ok := m.diskDelta[r]; ok {
			return fmt.Errorf("region %d: loaded, but its open-time delta runs are still kept", r)
		}
		if reg.txFreed != nil {
			for i := range reg.txFreed {
				if !m.tx.active && reg.txFreed[i] != 0 {
					return fmt.Errorf("region %d: transaction frees left after the transaction", r)
				}
				if reg.txFreed[i]&reg.free[i] != 0 {
					return fmt.Errorf("region %d: page freed in the transaction is already free", r)
				}
			}
		}
	}
	for r, reg := range m.dirty {
		if m.regions[r] != reg {
			return fmt.Errorf("dirty region %d is not loaded", r)
		}
	}
	for r := uint64(0); r < min(m.allocHint, count); r++ {
		reg := m.regions[r]
		if (reg == nil && r >= m.diskHint) || (reg != nil && reg.nalloc != 0) {
			return fmt.Errorf("region %d below the allocation hint %d may have allocatable pages", r, m.allocHint)
		}
	}
	for r := uint64(0); r < min(m.firstFree, count); r++ {
		reg := m.regions[r]
		if (reg == nil && r >= m.diskHint) || (reg != nil && reg.nfree != 0) {
			return fmt.Errorf("region %d below the free hint %d may have free pages", r, m.firstFree)
		}
	}
	// Pending runs: ascending txids, free but not allocatable, disjoint.
	var pend uint64
	seen := make(map[uint64][]uint64)
	// Young batches are checked as pending ones too, and against each other
	// and the others for overlap.
	all := slices.Clone(m.pending)
	for i, y := range m.young {
		if y.born == 0 || y.born > y.txid {
			return fmt.Errorf("young batch %d written at txn %d", y.txid, y.born)
		}
		if i > 0 && y.txid <= m.young[i-1].txid {
			return fmt.Errorf("young batches out of order: %d after %d", y.txid, m.young[i-1].txid)
		}
		all = append(all, batch{txid: y.txid, runs: y.runs, pages: y.pages})
	}
	for i, b := range all {
		if i > 0 && i < len(m.pending) && b.txid <= m.pending[i-1].txid {
			return fmt.Errorf("pending batches out of order: %d after %d", b.txid, m.pending[i-1].txid)
		}
		var bp uint64
		for _, rn := range b.runs {
			r := rn.id / m.rp
			reg := m.regions[r]
			if reg == nil {
				return fmt.Errorf("pending run %d+%d in unloaded region", rn.id, rn.n)
			}
			s := rn.id - r*m.rp
			if s+rn.n > m.rp {
				return fmt.Errorf("pending run %d+%d crosses its region", rn.id, rn.n)
			}
			if countRange(reg.free, s, rn.n) != rn.n || countRange(reg.alloc, s, rn.n) != 0 {
				return fmt.Errorf("pending run %d+%d (txn %d) not free or already allocatable", rn.id, rn.n, b.txid)
			}
			w := seen[r]
			if w == nil {
				w = make([]uint64, m.words)
				seen[r] = w
			}
			if countRange(w, s, rn.n) != 0 {
				return fmt.Errorf("pending run %d+%d overlaps another pending run", rn.id, rn.n)
			}
			setRange(w, s, rn.n)
			bp += rn.n
		}
		if bp != b.pages {
			return fmt.Errorf("pending batch %d: %d pages counted, runs hold %d", b.txid, b.pages, bp)
		}
		pend += bp
	}
	if pend != m.pendingPages {
		return fmt.Errorf("pendingPages %d, batches hold %d", m.pendingPages, pend)
	}
	var loaded uint64
	for _, reg := range m.regions {
		loaded += reg.nfree
	}
	if loaded > m.freePages {
		return fmt.Errorf("loaded regions hold %d free pages, freePages is %d", loaded, m.freePages)
	}
	if uint64(len(m.regions)) == count {
		var total uint64
		for _, reg := range m.regions {
			total += reg.nfree
		}
		if total != m.freePages {
			return fmt.Errorf("freePages %d, all regions loaded hold %d", m.freePages, total)
		}
	}
	return nil
}

// bitAt reports bit i of w.
func bitAt(w []uint64, i uint64) bool { return w[i/64]>>(i%64)&1 != 0 }

// onesIn returns the positions of the set bits of w, for messages.
func onesIn(w []uint64) []uint64 {
	var out []uint64
	for i, x := range w {
		for x != 0 {
			out = append(out, uint64(i)*64+uint64(bits.TrailingZeros64(x)))
			x &= x - 1
		}
	}
	return out
}

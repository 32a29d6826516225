package spacemap

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

const (
	tps = page.MinPageSize // small pages keep regions small: R = 7936
	tR  = (tps - page.HeaderSize) * 8
)

func mustCheck(t *testing.T, m *Map) {
	t.Helper()
	if err := m.check(); err != nil {
		t.Fatalf("invariant: %v", err)
	}
}

func mustAlloc(t *testing.T, m *Map, n uint64) page.ID {
	t.Helper()
	id, err := m.Allocate(n)
	if err != nil {
		t.Fatalf("Allocate(%d): %v", n, err)
	}
	mustCheck(t, m)
	return id
}

func mustAllocAt(t *testing.T, m *Map, n uint64, want page.ID) {
	t.Helper()
	if id := mustAlloc(t, m, n); id != want {
		t.Fatalf("Allocate(%d) = %d, want %d", n, id, want)
	}
}

func mustFree(t *testing.T, m *Map, id page.ID, n uint64) {
	t.Helper()
	if err := m.Free(id, n); err != nil {
		t.Fatalf("Free(%d, %d): %v", id, n, err)
	}
	mustCheck(t, m)
}

func wantCorrupt(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("%s: err = %v, want ErrCorrupt", what, err)
	}
}

// sync runs a complete sync point at txid: PrepareSync, the writes, and
// SyncDone. It returns the image and the durable meta.
func sync(t *testing.T, m *Map, d *fakeDisk, txid uint64) (SyncImage, metaState) {
	t.Helper()
	img := m.PrepareSync(txid)
	d.apply(img)
	m.SyncDone(img)
	mustCheck(t, m)
	return img, metaOf(img)
}

func fresh(t *testing.T) (*Map, *fakeDisk) {
	t.Helper()
	return freshWith(t, 0)
}

// freshWith is fresh with Config.MaxDeltaRuns = maxDelta; -1 makes every
// sync point write the maps of the regions that changed.
func freshWith(t *testing.T, maxDelta int) (*Map, *fakeDisk) {
	t.Helper()
	d := newFakeDisk(tps)
	m, err := New(Config{PageSize: tps, Loader: d, MaxDeltaRuns: maxDelta})
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, m)
	return m, d
}

func reopen(t *testing.T, d *fakeDisk, ms metaState) *Map {
	t.Helper()
	m, err := New(ms.config(tps, d, 0))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	mustCheck(t, m)
	return m
}

// freeRuns collects ForEachFree's runs.
func freeRuns(t *testing.T, m *Map) [][2]uint64 {
	t.Helper()
	var out [][2]uint64
	if err := m.ForEachFree(func(id page.ID, n uint64) error {
		out = append(out, [2]uint64{id, n})
		return nil
	}); err != nil {
		t.Fatalf("ForEachFree: %v", err)
	}
	return out
}

func TestRegionGeometry(t *testing.T) {
	if page.RegionPages(tps) != tR {
		t.Fatalf("R = %d, want %d", page.RegionPages(tps), tR)
	}
	if MaxRunPages(tps) != tR-4 {
		t.Fatalf("MaxRunPages = %d, want %d", MaxRunPages(tps), tR-4)
	}
}

func TestFreshFile(t *testing.T) {
	m, d := fresh(t)
	if m.HWM() != 4 {
		t.Fatalf("fresh HWM = %d, want 4 (metas and region 0's map slots)", m.HWM())
	}
	if s := m.Stats(); s.DirtyRegions != 1 || s.RegionLoads != 0 || s.FreePages != 0 || s.Regions != 1 {
		t.Fatalf("fresh stats %+v", s)
	}
	m.Begin(1)
	mustAllocAt(t, m, 1, 4)
	mustAllocAt(t, m, 3, 5)
	m.Commit()
	if m.HWM() != 8 {
		t.Fatalf("HWM = %d, want 8", m.HWM())
	}
	img := m.PrepareSync(1)
	if len(img.Pages) != 1 || img.Pages[0].ID != 3 {
		t.Fatalf("pages %v, want region 0's map in slot B (page 3): a region with no map on disk counts as slot A", img.Pages)
	}
	txid, free, err := page.DecodeRegionMap(img.Pages[0].Data, tps, 3)
	if err != nil || txid != 1 || popcount(free) != 0 {
		t.Fatalf("map page: txid %d, %d free, err %v", txid, popcount(free), err)
	}
	if !slices.Equal(img.Selector, []byte{1}) || !slices.Equal(img.Changed, []byte{1}) {
		t.Fatalf("selector %v changed %v, want [1] [1]", img.Selector, img.Changed)
	}
	if img.HWM != 8 || img.RegionCount != 1 || img.FreePages != 0 || img.FirstFreeRegion != 1 || img.Txid != 1 {
		t.Fatalf("image %+v", img)
	}
	d.apply(img)
	m.SyncDone(img)
	if s := m.Stats(); s.DirtyRegions != 0 {
		t.Fatalf("dirty regions after SyncDone: %d", s.DirtyRegions)
	}
	if img := m.PrepareSync(2); len(img.Pages) != 0 || !slices.Equal(img.Selector, []byte{1}) || !slices.Equal(img.Changed, []byte{0}) {
		t.Fatalf("sync with nothing changed: %+v", img)
	}
}

// threeRegions builds a file whose regions 0 and 1 are full except for two
// padding pages at the end of region 1 (2R-2, 2R-1), with region 2 holding
// one run of 100 pages.
func threeRegions(t *testing.T) (*fakeDisk, metaState) {
	t.Helper()
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	mustAllocAt(t, m, tR-4, tR+2)
	mustAllocAt(t, m, 100, 2*tR+2)
	m.Commit()
	img, ms := sync(t, m, d, 1)
	if img.FirstFreeRegion != 1 || img.FreePages != 2 || img.RegionCount != 3 {
		t.Fatalf("image %+v", img)
	}
	return d, ms
}

func TestNewReadsNothing(t *testing.T) {
	d, ms := threeRegions(t)
	d.reads = 0
	m := reopen(t, d, ms)
	if d.reads != 0 || m.Stats().RegionLoads != 0 || m.Stats().LoadedRegions != 0 {
		t.Fatalf("New read %d pages, stats %+v", d.reads, m.Stats())
	}
	if m.Stats().FreePages != 2 || m.HWM() != ms.hwm {
		t.Fatalf("stats %+v", m.Stats())
	}
}

func TestLazyLoadFromHint(t *testing.T) {
	d, ms := threeRegions(t)
	m := reopen(t, d, ms)
	d.reads = 0
	m.Begin(2)
	// Region 0 is below the hint and never read; region 1 holds the
	// padding pages.
	mustAllocAt(t, m, 1, 2*tR-2)
	if d.reads != 1 || m.Stats().LoadedRegions != 1 {
		t.Fatalf("after first allocation: %d reads, %+v", d.reads, m.Stats())
	}
	// A run of 3 does not fit in region 1 (1 page left): region 2 is loaded
	// and has nothing free, so the run goes to the HWM.
	mustAllocAt(t, m, 3, 2*tR+102)
	if d.reads != 2 || m.Stats().LoadedRegions != 2 {
		t.Fatalf("after second allocation: %d reads, %+v", d.reads, m.Stats())
	}
	mustAllocAt(t, m, 1, 2*tR-1)
	mustAllocAt(t, m, 1, 2*tR+105)
	if d.reads != 2 {
		t.Fatalf("regions loaded twice: %d reads", d.reads)
	}
	m.Commit()
	img, _ := sync(t, m, d, 2)
	if img.FirstFreeRegion != 3 {
		t.Fatalf("FirstFreeRegion = %d, want 3 (no free pages anywhere)", img.FirstFreeRegion)
	}
	if _, ok := m.regions[0]; ok {
		t.Fatal("region 0 was loaded")
	}
}

func TestFirstFit(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	for i := uint64(0); i < 20; i++ {
		mustAllocAt(t, m, 1, 4+i)
	}
	m.Commit()
	sync(t, m, d, 1)
	m.Begin(2)
	mustFree(t, m, 5, 1)
	mustFree(t, m, 7, 2)
	mustFree(t, m, 10, 4)
	m.Commit()
	sync(t, m, d, 2)
	m.Release(2, math.MaxUint64)
	mustCheck(t, m)
	m.Begin(3)
	mustAllocAt(t, m, 3, 10) // the lowest run of 3: 5 and 7-8 are too short
	mustAllocAt(t, m, 2, 7)
	mustAllocAt(t, m, 2, 24) // only page 5 and 13 left: goes to the HWM
	mustAllocAt(t, m, 1, 5)
	mustAllocAt(t, m, 1, 13)
	mustAllocAt(t, m, 1, 26)
	m.Commit()
}

// TestFirstFitAcrossRegions checks the address order: a free page in a
// lower region wins over one in a higher region, and a run that fits only in
// a higher region is found there rather than at the HWM.
func TestFirstFitAcrossRegions(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	mustAllocAt(t, m, tR-4, tR+2)
	m.Commit()
	sync(t, m, d, 1)
	m.Begin(2)
	mustFree(t, m, tR+100, 10)
	mustFree(t, m, 50, 2)
	m.Commit()
	sync(t, m, d, 2)
	m.Release(2, math.MaxUint64)
	m.Begin(3)
	mustAllocAt(t, m, 5, tR+100)
	mustAllocAt(t, m, 1, 50)
	mustAllocAt(t, m, 2, tR+105)
	// 51 and tR+107..tR+109 are too short: the run goes to the HWM, and as
	// it does not fit in region 1's last two pages it opens region 2.
	mustAllocAt(t, m, 4, 2*tR+2)
	m.Rollback()
	m.Begin(3)
	mustAllocAt(t, m, 11, 2*tR+2) // no free run of 11 anywhere
	mustAllocAt(t, m, 2, 50)
	mustAllocAt(t, m, 2, tR+100) // region 1's free run comes before its padding
	mustAllocAt(t, m, 8, tR+102)
	mustAllocAt(t, m, 2, 2*tR-2) // the padding
	m.Commit()
}

func TestNoReuseBeforeRelease(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	for i := uint64(0); i < 8; i++ {
		mustAlloc(t, m, 1)
	}
	m.Commit()
	sync(t, m, d, 1)

	m.Begin(2)
	mustFree(t, m, 5, 1)
	// Release during the txn cannot touch its frees: they are not even
	// pending yet.
	m.Release(math.MaxUint64, math.MaxUint64)
	mustAllocAt(t, m, 1, 12) // not 5: a txn never reuses its own frees
	m.Commit()
	if s := m.Stats(); s.PendingPages != 1 || s.FreePages != 1 || s.AllocatablePages != 0 {
		t.Fatalf("after commit: %+v", s)
	}
	// Committed but not yet steady: not reusable.
	m.Release(1, math.MaxUint64)
	m.Begin(3)
	mustAllocAt(t, m, 1, 13)
	m.Commit()
	sync(t, m, d, 3)
	// Steady now, but a reader at snapshot 1 can still see page 5.
	m.Release(3, 1)
	if m.Stats().PendingPages != 1 {
		t.Fatalf("released while a reader at 1 can see a page freed at 2: %+v", m.Stats())
	}
	m.Begin(4)
	mustAllocAt(t, m, 1, 14)
	m.Commit()
	// The reader at 1 ended; the oldest is at 2, which does not see page 5.
	m.Release(3, 2)
	if s := m.Stats(); s.PendingPages != 0 || s.AllocatablePages != 1 {
		t.Fatalf("after release: %+v", s)
	}
	m.Begin(5)
	mustAllocAt(t, m, 1, 5)
	m.Commit()
}

func TestReleaseInTxidOrder(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 30, 4)
	m.Commit()
	for tx := uint64(2); tx <= 4; tx++ {
		m.Begin(tx)
		mustFree(t, m, 4+tx*3, 2)
		m.Commit()
	}
	sync(t, m, d, 4)
	for _, c := range []struct {
		limit   uint64
		pending uint64
	}{{1, 6}, {2, 4}, {3, 2}, {3, 2}, {10, 0}} {
		m.Release(c.limit, math.MaxUint64)
		mustCheck(t, m)
		if s := m.Stats(); s.PendingPages != c.pending || s.AllocatablePages != 6-c.pending {
			t.Fatalf("release up to %d: %+v", c.limit, s)
		}
	}
}

func TestDoubleFree(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 40, 4)
	m.Commit()
	m.Begin(2)
	mustFree(t, m, 10, 5)
	m.Commit()
	sync(t, m, d, 2)
	m.Begin(3)
	mustFree(t, m, 20, 5)
	m.Commit()
	m.Begin(4)
	mustFree(t, m, 30, 2)
	m.Commit()
	sync(t, m, d, 4)
	m.Release(3, math.MaxUint64) // 10-14 and 20-24 allocatable, 30-31 pending
	before := m.Stats()

	m.Begin(5)
	mustFree(t, m, 35, 3)
	for _, c := range []struct {
		id, n uint64
		what  string
	}{
		{12, 1, "allocatable page"},
		{8, 4, "run ending on an allocatable page"},
		{31, 1, "pending page"},
		{29, 3, "run over a pending page"},
		{35, 3, "run freed earlier in this txn"},
		{37, 2, "run overlapping this txn's frees"},
	} {
		wantCorrupt(t, m.Free(c.id, c.n), c.what)
		mustCheck(t, m)
	}
	m.Commit()
	after := m.Stats()
	if after.FreePages != before.FreePages+3 || after.PendingPages != before.PendingPages+3 {
		t.Fatalf("rejected frees changed the state: before %+v after %+v", before, after)
	}
}

func TestFreeValidation(t *testing.T) {
	m, _ := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	mustAllocAt(t, m, 10, tR+2)
	hwm := m.HWM()
	for _, c := range []struct {
		id, n uint64
		what  string
	}{
		{hwm, 1, "page at the HWM"},
		{hwm - 1, 2, "run past the HWM"},
		{math.MaxUint64, 2, "run wrapping around"},
		{0, 1, "meta page 0"},
		{1, 1, "meta page 1"},
		{2, 1, "region 0 slot A"},
		{3, 2, "run starting on region 0 slot B"},
		{tR, 1, "region 1 slot A"},
		{tR + 1, 1, "region 1 slot B"},
		{tR - 2, 5, "run crossing into region 1"},
	} {
		wantCorrupt(t, m.Free(c.id, c.n), c.what)
	}
	if err := m.Free(10, 0); err == nil {
		t.Fatal("empty run accepted")
	}
	mustCheck(t, m)
	mustFree(t, m, tR-1, 1)
	mustFree(t, m, tR+2, 10)
	m.Commit()
}

func TestAllocateLimits(t *testing.T) {
	m, _ := fresh(t)
	m.Begin(1)
	if _, err := m.Allocate(0); err == nil {
		t.Fatal("Allocate(0) accepted")
	}
	if _, err := m.Allocate(MaxRunPages(tps) + 1); err == nil {
		t.Fatal("run longer than a region accepted")
	}
	mustAllocAt(t, m, MaxRunPages(tps), 4)
	mustAllocAt(t, m, MaxRunPages(tps), tR+2)
	m.Commit()
}

func TestMaxPages(t *testing.T) {
	d := newFakeDisk(tps)
	m, err := New(Config{PageSize: tps, MaxPages: 20, Loader: d})
	if err != nil {
		t.Fatal(err)
	}
	m.Begin(1)
	mustAllocAt(t, m, 10, 4)
	if _, err := m.Allocate(10); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("err = %v, want ErrMaxSizeReached", err)
	}
	if m.HWM() != 14 {
		t.Fatalf("failed allocation moved the HWM to %d", m.HWM())
	}
	mustAllocAt(t, m, 6, 14)
	if _, err := m.Allocate(1); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("err = %v, want ErrMaxSizeReached", err)
	}
	mustCheck(t, m)
	m.Commit()
}

// TestSetMaxPages: a bound set on an open map applies to the allocations
// that follow, in the same transaction; below the HWM it refuses growth,
// and 0 lifts it.
func TestSetMaxPages(t *testing.T) {
	m, _ := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 10, 4)
	m.SetMaxPages(12)
	if _, err := m.Allocate(1); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("growth past a lowered bound: %v, want ErrMaxSizeReached", err)
	}
	m.Commit()
	m.Begin(2)
	if _, err := m.Allocate(20); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("growth past a lowered bound: %v, want ErrMaxSizeReached", err)
	}
	m.SetMaxPages(0)
	mustAllocAt(t, m, 20, 14)
	m.Commit()
	mustCheck(t, m)
}

func TestRegionCrossing(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 7000, 4)
	// 1000 pages at 7004 would end past R = 7936: the tail 7004..7935
	// becomes free and the run opens region 1 after its map slots.
	mustAllocAt(t, m, 1000, tR+2)
	pad := uint64(tR - 7004)
	if s := m.Stats(); s.FreePages != pad || s.AllocatablePages != pad || s.HWM != tR+1002 || s.Regions != 2 || s.DirtyRegions != 2 {
		t.Fatalf("after crossing: %+v", s)
	}
	// The tail is allocatable at once: no state ever used it.
	mustAllocAt(t, m, 900, 7004)
	m.Commit()
	img, ms := sync(t, m, d, 1)
	if len(img.Pages) != 2 || img.Pages[0].ID != 3 || img.Pages[1].ID != tR+1 {
		t.Fatalf("pages %d %d, want slot B of regions 0 and 1", img.Pages[0].ID, img.Pages[1].ID)
	}
	if !slices.Equal(img.Selector, []byte{3}) || !slices.Equal(img.Changed, []byte{3}) || img.FirstFreeRegion != 0 || img.FreePages != pad-900 {
		t.Fatalf("image %+v", img)
	}
	_, free, err := page.DecodeRegionMap(img.Pages[0].Data, tps, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := onesIn(free); len(got) != int(pad-900) || got[0] != 7904 || got[len(got)-1] != tR-1 {
		t.Fatalf("region 0 free bits %v", got)
	}
	m2 := reopen(t, d, ms)
	if runs := freeRuns(t, m2); !slices.Equal(runs, [][2]uint64{{7904, 32}}) {
		t.Fatalf("reopened free runs %v", runs)
	}
}

// TestRunAtRegionBoundary: an HWM exactly at a region boundary opens the
// next region without any padding.
func TestRunAtRegionBoundary(t *testing.T) {
	m, _ := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	if m.HWM() != tR {
		t.Fatalf("HWM %d", m.HWM())
	}
	mustAllocAt(t, m, 1, tR+2)
	if s := m.Stats(); s.FreePages != 0 || s.Regions != 2 {
		t.Fatalf("stats %+v", s)
	}
	m.Commit()
}

type regionSnap struct {
	free, alloc []uint64
	dirty       bool
}

func snapRegions(m *Map) map[uint64]regionSnap {
	out := make(map[uint64]regionSnap)
	for r, reg := range m.regions {
		out[r] = regionSnap{slices.Clone(reg.free), slices.Clone(reg.alloc), reg.dirty}
	}
	return out
}

func sameRegions(t *testing.T, got, want map[uint64]regionSnap) {
	t.Helper()
	for r, w := range want {
		g, ok := got[r]
		if !ok {
			t.Fatalf("region %d missing", r)
		}
		if !slices.Equal(g.free, w.free) || !slices.Equal(g.alloc, w.alloc) || g.dirty != w.dirty {
			t.Fatalf("region %d differs: dirty %v/%v free %v/%v", r, g.dirty, w.dirty, onesIn(g.free), onesIn(w.free))
		}
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			t.Fatalf("extra region %d", r)
		}
	}
}

func TestRollback(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 7000, 4)
	m.Commit()
	m.Begin(2)
	mustFree(t, m, 100, 50)
	mustFree(t, m, 500, 10)
	m.Commit()
	sync(t, m, d, 2)
	m.Release(2, math.MaxUint64)
	m.Begin(3)
	mustFree(t, m, 1000, 5)
	m.Commit()
	sync(t, m, d, 3) // 1000..1004 pending at 3, region 0 clean
	wantRegions := snapRegions(m)
	wantStats := m.Stats()

	m.Begin(4)
	mustAllocAt(t, m, 20, 100)
	mustAllocAt(t, m, 30, 120)
	mustAllocAt(t, m, 10, 500)
	mustAllocAt(t, m, 2000, tR+2) // crosses: tail of region 0 freed, region 1 created
	mustAllocAt(t, m, 30, 7004)   // from the tail
	mustAllocAt(t, m, 900, 7034)
	mustAllocAt(t, m, 7000, 2*tR+2) // crosses again: region 2
	mustFree(t, m, 2000, 3)
	mustFree(t, m, tR+2, 2000)
	mustFree(t, m, 7004, 900)
	m.Release(3, math.MaxUint64) // a committed release inside the txn stays
	m.Rollback()
	mustCheck(t, m)

	// Page 1000..1004 was released during the txn; that is not undone.
	setRange(wantRegions[0].alloc, 1000, 5)
	wantStats.AllocatablePages += 5
	wantStats.PendingPages -= 5
	sameRegions(t, snapRegions(m), wantRegions)
	if s := m.Stats(); s != wantStats {
		t.Fatalf("stats after rollback %+v, want %+v", s, wantStats)
	}
	if img := m.PrepareSync(4); len(img.Pages) != 0 || img.RegionCount != 1 {
		t.Fatalf("rolled-back txn left something to write: %+v", img)
	}
	// The state is usable afterwards.
	m.Begin(4)
	mustAllocAt(t, m, 50, 100)
	m.Commit()
}

func TestSyncAlternatesSlots(t *testing.T) {
	m, d := freshWith(t, -1)
	for tx := uint64(1); tx <= 4; tx++ {
		// Growing the HWM alone changes no map; the free makes region 0
		// dirty.
		m.Begin(tx)
		mustFree(t, m, mustAlloc(t, m, 2), 1)
		m.Commit()
		img, ms := sync(t, m, d, tx)
		want := page.MapSlot(tps, 0, int(tx%2)) // B, A, B, A
		if len(img.Pages) != 1 || img.Pages[0].ID != want {
			t.Fatalf("sync %d wrote %v, want page %d", tx, img.Pages, want)
		}
		m2 := reopen(t, d, ms)
		if runs, want := freeRuns(t, m2), freeRuns(t, m); len(runs) != int(tx) || !slices.Equal(runs, want) || m2.HWM() != m.HWM() {
			t.Fatalf("reopen after sync %d: runs %v, want %v; HWM %d", tx, runs, want, m2.HWM())
		}
		if m2.Stats().RegionLoads != 1 {
			t.Fatalf("reopen loads %d", m2.Stats().RegionLoads)
		}
	}
}

// TestUnfinishedSyncIsIgnored: map pages of a sync point whose flush failed
// (or whose meta never reached the disk) are in slots the durable selector
// does not name, so reopening at the previous meta never reads them.
func TestUnfinishedSyncIsIgnored(t *testing.T) {
	m, d := freshWith(t, -1)
	m.Begin(1)
	mustAllocAt(t, m, 100, 4)
	m.Commit()
	sync(t, m, d, 1)
	m.Begin(2)
	mustFree(t, m, 10, 20)
	m.Commit()
	_, ms := sync(t, m, d, 2)
	m.Release(2, math.MaxUint64)

	m.Begin(3)
	mustAllocAt(t, m, 5, 10)
	mustFree(t, m, 50, 10)
	m.Commit()
	img := m.PrepareSync(3)
	if len(img.Pages) != 1 || img.Pages[0].ID != 3 {
		t.Fatalf("pages %v, want slot B (A is steady)", img.Pages)
	}
	// Torn write: half the new page over the old slot contents.
	torn := make([]byte, tps)
	copy(torn[:tps/2], img.Pages[0].Data)
	d.write(page.Run{ID: img.Pages[0].ID, Data: torn})

	m2 := reopen(t, d, ms)
	if runs := freeRuns(t, m2); !slices.Equal(runs, [][2]uint64{{10, 20}}) {
		t.Fatalf("reopened runs %v, want the state of sync point 2", runs)
	}
}

// TestSyncDoneKeepsLaterChanges: a change made between PrepareSync and
// SyncDone is not in the image, so the region must stay dirty.
func TestSyncDoneKeepsLaterChanges(t *testing.T) {
	m, d := freshWith(t, -1)
	m.Begin(1)
	mustAllocAt(t, m, 10, 4)
	m.Commit()
	img := m.PrepareSync(1)
	d.apply(img)
	m.Begin(2)
	mustFree(t, m, 5, 1)
	m.Commit()
	m.SyncDone(img)
	mustCheck(t, m)
	if m.Stats().DirtyRegions != 1 {
		t.Fatal("region changed after PrepareSync was marked clean")
	}
	img2, ms := sync(t, m, d, 2)
	if len(img2.Pages) != 1 || img2.Pages[0].ID != 2 {
		t.Fatalf("second sync wrote %v, want slot A (B is steady now)", img2.Pages)
	}
	if runs := freeRuns(t, reopen(t, d, ms)); !slices.Equal(runs, [][2]uint64{{5, 1}}) {
		t.Fatalf("runs %v", runs)
	}
}

func TestForEachFree(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	mustAllocAt(t, m, 100, tR+2)
	m.Commit()
	m.Begin(2)
	mustFree(t, m, 10, 3)
	mustFree(t, m, 13, 2) // adjacent: one run
	mustFree(t, m, tR+50, 1)
	m.Commit()
	_, ms := sync(t, m, d, 2)
	want := [][2]uint64{{10, 5}, {tR + 50, 1}}
	if runs := freeRuns(t, m); !slices.Equal(runs, want) {
		t.Fatalf("pending runs %v, want %v (pending frees are free in the newest state)", runs, want)
	}
	m2 := reopen(t, d, ms)
	if runs := freeRuns(t, m2); !slices.Equal(runs, want) {
		t.Fatalf("reopened runs %v, want %v", runs, want)
	}
	if m2.Stats().LoadedRegions != 2 {
		t.Fatal("ForEachFree did not load every region")
	}
	// A meta whose free count disagrees with the maps.
	bad := ms
	bad.freePages++
	m3 := reopen(t, d, bad)
	wantCorrupt(t, m3.ForEachFree(func(page.ID, uint64) error { return nil }), "free count mismatch")
	// fn's error stops the walk.
	stop := errors.New("stop")
	calls := 0
	if err := m2.ForEachFree(func(page.ID, uint64) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

// corruptState builds a two-region file with free pages in region 0, and
// returns the disk, its meta and region 0's current slot.
func corruptState(t *testing.T) (*fakeDisk, metaState, page.ID) {
	t.Helper()
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	mustAllocAt(t, m, 10, tR+2)
	m.Commit()
	m.Begin(2)
	mustFree(t, m, 100, 3)
	m.Commit()
	_, ms := sync(t, m, d, 2)
	if ms.firstFree != 0 {
		t.Fatalf("hint %d", ms.firstFree)
	}
	return d, ms, page.MapSlot(tps, 0, selBit(ms.sel, 0))
}

func TestCorruptMapOnLoad(t *testing.T) {
	// mapWith encodes a region-0 map with the given free bits, then lets
	// raw edit the bytes and reseals the checksum.
	mapWith := func(slot page.ID, txid uint64, bitsSet []uint64, raw func([]byte)) []byte {
		free := make([]uint64, page.RegionMapWords(tps))
		buf := make([]byte, tps)
		page.EncodeRegionMap(buf, tps, slot, txid, free)
		for _, b := range bitsSet {
			buf[page.HeaderSize+b/8] |= 1 << (b % 8)
		}
		binary.LittleEndian.PutUint32(buf[4:], uint32(len(bitsSet)))
		if raw != nil {
			raw(buf)
		}
		binary.LittleEndian.PutUint32(buf[28:], page.ChecksumSkipping(buf, 28))
		return buf
	}
	cases := []struct {
		name  string
		edit  func(d *fakeDisk, ms *metaState, slot page.ID)
		slotR uint64 // region whose load must fail
	}{
		{"bad checksum", func(d *fakeDisk, ms *metaState, slot page.ID) { d.pages[slot][page.HeaderSize+12] ^= 1 }, 0},
		{"hole", func(d *fakeDisk, ms *metaState, slot page.ID) { delete(d.pages, slot) }, 0},
		{"wrong pgid", func(d *fakeDisk, ms *metaState, slot page.ID) {
			d.pages[slot] = mapWith(slot, 2, []uint64{100}, func(b []byte) { binary.LittleEndian.PutUint64(b[16:], slot^1) })
		}, 0},
		{"map slot bit set", func(d *fakeDisk, ms *metaState, slot page.ID) {
			d.pages[slot] = mapWith(slot, 2, []uint64{2, 100}, nil)
		}, 0},
		{"meta bit set", func(d *fakeDisk, ms *metaState, slot page.ID) {
			d.pages[slot] = mapWith(slot, 2, []uint64{1, 100}, nil)
		}, 0},
		{"txid after the meta", func(d *fakeDisk, ms *metaState, slot page.ID) {
			d.pages[slot] = mapWith(slot, 3, []uint64{100}, nil)
		}, 0},
		{"free page above the HWM", func(d *fakeDisk, ms *metaState, slot page.ID) {
			s1 := page.MapSlot(tps, 1, selBit(ms.sel, 1))
			free := make([]uint64, page.RegionMapWords(tps))
			setRange(free, ms.hwm-tR, 1)
			buf := make([]byte, tps)
			page.EncodeRegionMap(buf, tps, s1, 2, free)
			d.pages[s1] = buf
			ms.firstFree = 1 // so the allocation searches region 1 first
			// Region 0 then must have no free pages: use an empty map.
			d.pages[slot] = mapWith(slot, 2, nil, nil)
			ms.freePages = 1
		}, 1},
		{"meta counts fewer free pages", func(d *fakeDisk, ms *metaState, slot page.ID) {
			ms.freePages = 2 // region 0's map holds 3
		}, 0},
		{"free pages below the hint", func(d *fakeDisk, ms *metaState, slot page.ID) {
			ms.firstFree = 1
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ms, slot := corruptState(t)
			c.edit(d, &ms, slot)
			m := reopen(t, d, ms)
			m.Begin(3)
			var err error
			if c.name == "free pages below the hint" {
				// Allocation never reads below the hint; a free there
				// does, and must find the contradiction.
				err = m.Free(50, 1)
			} else {
				_, err = m.Allocate(1)
			}
			wantCorrupt(t, err, "load")
			var ce *rerrors.CorruptError
			if !errors.As(err, &ce) || ce.Page != page.MapSlot(tps, c.slotR, selBit(ms.sel, c.slotR)) {
				t.Fatalf("err %v does not name region %d's map slot", err, c.slotR)
			}
			mustCheck(t, m)
			if m.Stats().LoadedRegions != 0 && c.slotR == 0 {
				t.Fatal("a rejected map was kept")
			}
			// ForEachFree (Check) reports it too.
			wantCorrupt(t, m.ForEachFree(func(page.ID, uint64) error { return nil }), "ForEachFree")
		})
	}
}

func TestLoadIOError(t *testing.T) {
	d, ms, _ := corruptState(t)
	m := reopen(t, d, ms)
	ioErr := errors.New("disk on fire")
	d.fail = ioErr
	m.Begin(3)
	if _, err := m.Allocate(1); !errors.Is(err, ioErr) {
		t.Fatalf("err = %v, want the loader's error", err)
	}
	if err := m.Free(200, 1); !errors.Is(err, ioErr) {
		t.Fatalf("err = %v, want the loader's error", err)
	}
	d.fail = nil
	mustAllocAt(t, m, 1, 100) // the Map is still usable once reads work
	m.Commit()
}

func TestConfigValidation(t *testing.T) {
	d := newFakeDisk(tps)
	good := Config{PageSize: tps, HWM: tR + 10, Txid: 1, Selector: []byte{2}, FirstFreeRegion: 2, Loader: d}
	if _, err := New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, c := range []struct {
		name    string
		mut     func(*Config)
		corrupt bool
	}{
		{"page size", func(c *Config) { c.PageSize = 1000 }, false},
		{"no loader", func(c *Config) { c.Loader = nil }, false},
		{"selector too short", func(c *Config) { c.Selector = nil }, true},
		{"selector too long", func(c *Config) { c.Selector = []byte{0, 0} }, true},
		{"selector bits past the last region", func(c *Config) { c.Selector = []byte{4} }, true},
		{"hint past the regions", func(c *Config) { c.FirstFreeRegion = 3 }, true},
		{"free pages above HWM", func(c *Config) { c.FreePages = tR + 11 }, true},
		{"HWM inside map slots", func(c *Config) { c.HWM = tR + 1 }, true},
		{"too many regions", func(c *Config) {
			c.HWM = maxRegions(tps)*tR + 10
			c.Selector = make([]byte, (maxRegions(tps)+8)/8)
		}, true},
		{"fresh with free pages", func(c *Config) { c.HWM, c.Selector, c.FirstFreeRegion, c.FreePages = 0, nil, 0, 1 }, true},
	} {
		cfg := good
		c.mut(&cfg)
		_, err := New(cfg)
		if err == nil {
			t.Fatalf("%s: accepted", c.name)
		}
		if errors.Is(err, rerrors.ErrCorrupt) != c.corrupt {
			t.Fatalf("%s: err %v, corrupt = %v", c.name, err, c.corrupt)
		}
	}
	if d.reads != 0 {
		t.Fatalf("New read %d pages", d.reads)
	}
}

func TestRollbackAfterCommitIsNoop(t *testing.T) {
	m, _ := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 5, 4)
	m.Commit()
	m.Rollback()
	m.Rollback()
	mustCheck(t, m)
	if m.HWM() != 9 {
		t.Fatalf("Rollback after Commit undid the commit: HWM %d", m.HWM())
	}
	m.Begin(2)
	mustAllocAt(t, m, 1, 9)
	m.Commit()
}

func TestMisusePanics(t *testing.T) {
	m, _ := fresh(t)
	for name, fn := range map[string]func(){
		"Allocate outside txn": func() { _, _ = m.Allocate(1) },
		"Free outside txn":     func() { _ = m.Free(4, 1) },
		"Commit outside txn":   func() { m.Commit() },
		"Begin twice":          func() { m.Begin(1); defer m.Rollback(); m.Begin(2) },
		"PrepareSync in txn":   func() { m.Begin(1); defer m.Rollback(); m.PrepareSync(1) },
		"two syncs in flight":  func() { m.PrepareSync(1); m.PrepareSync(2) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
}

// TestFirstFreeRegionHint follows the meta's hint through a full file, a
// crossing that frees the tail of the last region, and a reopen that leaves
// a region with free pages unloaded.
func TestFirstFreeRegionHint(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, tR-4, 4)
	m.Commit()
	if img, _ := sync(t, m, d, 1); img.FirstFreeRegion != 1 {
		t.Fatalf("full region 0: hint %d, want 1", img.FirstFreeRegion)
	}
	m.Begin(2)
	mustAllocAt(t, m, 100, tR+2)
	m.Commit()
	if img, _ := sync(t, m, d, 2); img.FirstFreeRegion != 2 {
		t.Fatalf("every region full: hint %d, want 2 (the region count)", img.FirstFreeRegion)
	}
	// Crossing frees region 1's tail: the hint must come back down.
	m.Begin(3)
	mustAllocAt(t, m, tR-4, 2*tR+2)
	m.Commit()
	img, _ := sync(t, m, d, 3)
	if img.FirstFreeRegion != 1 {
		t.Fatalf("after crossing: hint %d, want 1", img.FirstFreeRegion)
	}
	// Free pages in region 2, then reopen: region 1 is loaded and emptied
	// by allocations while region 2 stays unloaded. The hint may not jump
	// over region 2, whose free pages only its map on disk knows.
	m.Begin(4)
	mustFree(t, m, 2*tR+10, 5)
	m.Commit()
	_, ms := sync(t, m, d, 4)
	m2 := reopen(t, d, ms)
	m2.Begin(5)
	mustAllocAt(t, m2, tR-102, tR+102)
	m2.Commit()
	if _, ok := m2.regions[2]; ok {
		t.Fatal("region 2 loaded")
	}
	img, ms = sync(t, m2, d, 5)
	if img.FirstFreeRegion != 2 {
		t.Fatalf("hint %d, want 2: region 2 (unloaded) has free pages", img.FirstFreeRegion)
	}
	// And the file reopens cleanly, with region 2's pages found.
	m3 := reopen(t, d, ms)
	m3.Begin(6)
	mustAllocAt(t, m3, 5, 2*tR+10)
	m3.Commit()
}

// TestDeltaInsteadOfMaps: once a region has a map on disk, small changes
// ride in the meta's delta (no map page written), a reopen applies them,
// and a delta too long for the limit falls back to writing the map.
func TestDeltaInsteadOfMaps(t *testing.T) {
	m, d := freshWith(t, 2)
	m.Begin(1)
	mustAllocAt(t, m, 100, page.RegionFirstData(tps, 0))
	m.Commit()
	if img, _ := sync(t, m, d, 1); len(img.Pages) != 1 || len(img.Delta) != 0 {
		t.Fatalf("first sync: %d pages, delta %v; want region 0's first map and no delta", len(img.Pages), img.Delta)
	}
	m.Begin(2)
	mustFree(t, m, 10, 3)
	mustFree(t, m, 20, 1)
	m.Commit()
	img, ms := sync(t, m, d, 2)
	want := []page.DeltaRun{{ID: 10, N: 3, Free: true}, {ID: 20, N: 1, Free: true}}
	if len(img.Pages) != 0 || !slices.Equal(img.Delta, want) || m.Stats().DeltaRuns != 2 {
		t.Fatalf("second sync: %d pages, delta %+v; want no page and %+v", len(img.Pages), img.Delta, want)
	}
	if m.Stats().DirtyRegions != 1 {
		t.Fatal("a region described by the delta was marked clean")
	}
	m2 := reopen(t, d, ms)
	if runs := freeRuns(t, m2); !slices.Equal(runs, [][2]uint64{{10, 3}, {20, 1}}) {
		t.Fatalf("reopened runs %v", runs)
	}
	// A third run exceeds the limit of 2: the map is written instead.
	m.Release(2, math.MaxUint64)
	m.Begin(3)
	mustFree(t, m, 30, 1)
	m.Commit()
	img, ms = sync(t, m, d, 3)
	if len(img.Pages) != 1 || len(img.Delta) != 0 || m.Stats().DirtyRegions != 0 {
		t.Fatalf("third sync: %d pages, delta %+v, %d dirty; want the map, no delta, clean", len(img.Pages), img.Delta, m.Stats().DirtyRegions)
	}
	if runs := freeRuns(t, reopen(t, d, ms)); !slices.Equal(runs, [][2]uint64{{10, 3}, {20, 1}, {30, 1}}) {
		t.Fatalf("reopened runs %v", runs)
	}
	// Reusing the freed pages brings the state back to the map: the delta
	// describes the difference, and an empty difference makes it clean.
	m.Release(3, math.MaxUint64)
	m.Begin(4)
	mustAllocAt(t, m, 3, 10)
	m.Commit()
	if img, _ := sync(t, m, d, 4); len(img.Pages) != 0 || !slices.Equal(img.Delta, []page.DeltaRun{{ID: 10, N: 3}}) {
		t.Fatalf("fourth sync: %d pages, delta %+v", len(img.Pages), img.Delta)
	}
	m.Begin(5)
	mustFree(t, m, 11, 1)
	m.Commit()
	sync(t, m, d, 5)
	m.Release(5, math.MaxUint64)
	m.Begin(6)
	mustAllocAt(t, m, 1, 11)
	m.Commit()
	sync(t, m, d, 6)
	m.Release(6, math.MaxUint64)
	m.Begin(7)
	mustFree(t, m, 10, 3)
	m.Commit()
	if img, _ := sync(t, m, d, 7); len(img.Pages) != 0 || len(img.Delta) != 0 || m.Stats().DirtyRegions != 0 {
		t.Fatalf("back to the map: %d pages, delta %+v, %d dirty", len(img.Pages), img.Delta, m.Stats().DirtyRegions)
	}
}

// TestDeltaDisagreeingWithMapIsCorrupt: a delta run must change every page
// it covers; one that frees an already free page (or uses a used one) was
// not written by rivet, and loading the region reports ErrCorrupt.
func TestDeltaDisagreeingWithMapIsCorrupt(t *testing.T) {
	m, d := freshWith(t, -1)
	m.Begin(1)
	mustAllocAt(t, m, 100, page.RegionFirstData(tps, 0))
	m.Commit()
	sync(t, m, d, 1)
	m.Begin(2)
	mustFree(t, m, 10, 3)
	m.Commit()
	_, ms := sync(t, m, d, 2) // the map has 10..12 free
	for _, bad := range [][]page.DeltaRun{
		{{ID: 11, N: 1, Free: true}}, // already free in the map
		{{ID: 12, N: 2, Free: true}}, // half of it already free
		{{ID: 50, N: 1}},             // already used in the map
	} {
		forged := ms
		forged.delta = bad
		m2 := reopen(t, d, forged)
		m2.Begin(3)
		_, err := m2.Allocate(1)
		if !errors.Is(err, rerrors.ErrCorrupt) {
			t.Fatalf("delta %+v: Allocate = %v, want ErrCorrupt", bad, err)
		}
		m2.Rollback()
	}
}

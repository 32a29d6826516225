package spacemap

import (
	"math"
	"slices"
	"testing"
)

// sameBitmaps fails unless got and want hold the same regions with the
// same free and allocatable bitmaps (Undo may leave regions dirty).
func sameBitmaps(t *testing.T, got, want map[uint64]regionSnap) {
	t.Helper()
	for r, w := range want {
		g, ok := got[r]
		if !ok {
			t.Fatalf("region %d missing", r)
		}
		for i := range w.free {
			if g.free[i] != w.free[i] || g.alloc[i] != w.alloc[i] {
				t.Fatalf("region %d, pages %d..%d: free %#x, want %#x; allocatable %#x, want %#x", r, i*64, i*64+63, g.free[i], w.free[i], g.alloc[i], w.alloc[i])
			}
		}
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			t.Fatalf("extra region %d", r)
		}
	}
}

// TestUndoCommitted: a failed sync point takes back three committed
// transactions — allocations from free space and at the HWM across two
// region boundaries, frees, and young frees that were released and
// allocated again by a later one — and the Map is exactly as it was after
// the last sealed commit, but for a release of a sealed batch, which stays.
func TestUndoCommitted(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 7000, 4)
	m.Commit()
	m.Begin(2)
	mustFree(t, m, 100, 50)
	mustFree(t, m, 500, 10)
	m.Commit()
	sync(t, m, d, 2)
	m.Seal()
	m.Release(2, math.MaxUint64)
	m.Begin(3)
	mustFree(t, m, 1000, 5)
	m.Commit() // pending at 3, sealed below
	m.Seal()
	want := snapRegions(m)
	wantStats := m.Stats()

	// Txn 4 writes pages 20..39 and 7004..7303 (from the old tail, after a
	// crossing into region 1) and frees 100..104 of txn 1's.
	m.Begin(4)
	mustAllocAt(t, m, 20, 100)
	mustAllocAt(t, m, 2000, tR+2) // crosses: region 0's tail free, region 1 created
	mustAllocAt(t, m, 300, 7004)  // from that tail
	m.Commit()
	// Txn 5 frees txn 4's young pages (written after the newest prepared
	// state, 2) and some of txn 1's.
	m.Begin(5)
	if err := m.FreeBorn(100, 20, 4); err != nil {
		t.Fatal(err)
	}
	if err := m.FreeBorn(7004, 300, 4); err != nil {
		t.Fatal(err)
	}
	mustFree(t, m, 2000, 7)
	m.Commit()
	m.ReleaseYoung(nil) // no reader: txn 5's young runs are allocatable
	m.Release(2, math.MaxUint64)
	// Txn 6 takes some of them again and grows into region 2.
	m.Begin(6)
	mustAllocAt(t, m, 10, 100)
	mustAllocAt(t, m, 7000, 2*tR+2)
	m.Commit()
	mustCheck(t, m)

	// The sync point for txn 6 fails to write.
	img := m.PrepareSync(6)
	m.AbortSync(img)
	if n := m.Undo(); n != 3 {
		t.Fatalf("Undo took back %d transactions, want 3", n)
	}
	mustCheck(t, m)
	sameBitmaps(t, snapRegions(m), want)
	s := m.Stats()
	s.DirtyRegions, wantStats.DirtyRegions = 0, 0
	s.DeltaRuns, wantStats.DeltaRuns = 0, 0
	if s != wantStats {
		t.Fatalf("stats after Undo %+v, want %+v", s, wantStats)
	}
	if n := m.Undo(); n != 0 {
		t.Fatalf("a second Undo took back %d transactions", n)
	}
	// The Map goes on from the sealed state: txids 4.. again, and the next
	// sync point writes what the sealed state changed.
	m.Begin(4)
	mustAllocAt(t, m, 20, 100)
	m.Commit()
	m.Seal()
	_, ms := sync(t, m, d, 4)
	reopened := reopen(t, d, ms)
	if got, want := freeRuns(t, reopened), freeRuns(t, m); !slices.Equal(got, want) {
		t.Fatalf("reopened free runs %v, want %v", got, want)
	}
}

// TestUndoShrink: a committed ShrinkTo is taken back, and a pending run
// below the new HWM that Release made allocatable after it stays so.
func TestUndoShrink(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 3000, 4)
	m.Commit()
	sync(t, m, d, 1)
	m.Begin(2)
	mustFree(t, m, 1000, 2004)
	mustFree(t, m, 10, 5)
	m.Commit()
	sync(t, m, d, 2)
	m.Begin(3)
	mustFree(t, m, 20, 5)
	m.Commit()
	sync(t, m, d, 3)
	m.Seal()
	m.Release(2, math.MaxUint64)
	want := snapRegions(m)
	m.Begin(4)
	if tail, err := m.FreeTail(); err != nil || tail != 1000 {
		t.Fatalf("FreeTail %d, %v", tail, err)
	}
	if err := m.ShrinkTo(1000); err != nil {
		t.Fatal(err)
	}
	m.Commit()
	m.Release(3, math.MaxUint64) // after the shrink, below its HWM
	setRange(want[0].alloc, 20, 5)
	img := m.PrepareSync(4)
	m.AbortSync(img)
	if n := m.Undo(); n != 1 {
		t.Fatalf("Undo took back %d transactions, want 1", n)
	}
	mustCheck(t, m)
	if m.HWM() != 3004 {
		t.Fatalf("HWM %d after undoing the shrink, want 3004", m.HWM())
	}
	sameBitmaps(t, snapRegions(m), want)
}

// TestAbortSyncRestoresPrepared: after an aborted sync point, pages written
// by transactions after the last durable state are young again.
func TestAbortSyncRestoresPrepared(t *testing.T) {
	m, d := fresh(t)
	m.Begin(1)
	mustAllocAt(t, m, 10, 4)
	m.Commit()
	sync(t, m, d, 1)
	m.Begin(2)
	mustAllocAt(t, m, 10, 14)
	m.Commit()
	m.Seal()
	img := m.PrepareSync(2)
	m.AbortSync(img)
	m.Begin(3)
	if err := m.FreeBorn(14, 10, 2); err != nil {
		t.Fatal(err)
	}
	m.Commit()
	m.ReleaseYoung(nil)
	if s := m.Stats(); s.PendingPages != 0 || s.AllocatablePages < 10 {
		t.Fatalf("txn 2's pages are not young after the aborted sync point: %+v", s)
	}
}

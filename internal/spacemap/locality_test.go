package spacemap

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// naiveLongest counts the longest run of set bits in w bit by bit (the
// lowest on a tie).
func naiveLongest(w []uint64) (start, n uint64) {
	var cur uint64
	for b := uint64(0); b <= uint64(len(w))*64; b++ {
		if b < uint64(len(w))*64 && bitAt(w, b) {
			cur++
			continue
		}
		if cur > n {
			start, n = b-cur, cur
		}
		cur = 0
	}
	return start, n
}

// TestRunTree compares the run tree's longest run with a bit-by-bit count
// on random bitmaps of varied density and length, then after random range
// changes made the way the Map makes them (the bits, then update).
func TestRunTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		w := make([]uint64, 1+rng.IntN(12))
		density := rng.Float64()
		for b := range uint64(len(w)) * 64 {
			if rng.Float64() < density {
				w[b/64] |= 1 << (b % 64)
			}
		}
		if i%5 == 0 {
			w[rng.IntN(len(w))] = ^uint64(0)
		}
		tree := newRunTree(w)
		for step := range 20 {
			gotS, gotN := tree.longest(w)
			if ws, wn := naiveLongest(w); gotS != ws || gotN != wn {
				t.Fatalf("bitmap %x (step %d): longest = (%d, %d), want (%d, %d)", w, step, gotS, gotN, ws, wn)
			}
			bitsN := uint64(len(w)) * 64
			start := rng.Uint64N(bitsN)
			n := 1 + rng.Uint64N(min(bitsN-start, 150))
			if rng.IntN(2) == 0 {
				setRange(w, start, n)
			} else {
				clearRange(w, start, n)
			}
			tree.update(w, int(start/64), int((start+n-1)/64))
		}
	}
}

// TestLocality checks the policy of a locality slack: a transaction fills
// the largest free extent first and goes on in it page after page, then
// the next largest; after localRunsBeforeGrowth extents it takes pages at
// the HWM while less than the slack is free, and more holes once the file
// is that free. Without a slack the same frees give first fit.
func TestLocality(t *testing.T) {
	// Pages 4..203 used, then freed in holes of 1, 3, 1, 10, 1, 6, ... so
	// first fit and largest-first differ from the first page on.
	setupDisk := func(slack float64) (*Map, *fakeDisk, metaState) {
		m, d := fresh(t)
		m.SetLocalitySlack(slack)
		m.Begin(1)
		for range 200 {
			mustAlloc(t, m, 1)
		}
		m.Commit()
		sync(t, m, d, 1)
		m.Begin(2)
		for _, h := range [][2]uint64{{10, 1}, {20, 3}, {30, 1}, {40, 10}, {60, 1}, {70, 6}, {90, 2}, {100, 4}, {110, 1}, {120, 5}, {130, 1}, {140, 2}, {150, 1}, {160, 1}} {
			mustFree(t, m, h[0], h[1])
		}
		m.Commit()
		_, ms := sync(t, m, d, 2)
		m.Release(2, math.MaxUint64)
		mustCheck(t, m)
		return m, d, ms
	}
	setup := func(slack float64) *Map {
		m, _, _ := setupDisk(slack)
		return m
	}

	m := setup(0)
	m.Begin(3)
	mustAllocAt(t, m, 1, 10)
	mustAllocAt(t, m, 1, 20)
	m.Rollback()

	// 39 free pages in a file of 204: 19 % free.
	m = setup(0.5)
	m.Begin(3)
	var got []page.ID
	for range 36 {
		got = append(got, mustAlloc(t, m, 1))
	}
	want := []page.ID{40, 41, 42, 43, 44, 45, 46, 47, 48, 49, // the 10-page hole
		70, 71, 72, 73, 74, 75, // 6
		120, 121, 122, 123, 124, // 5
		100, 101, 102, 103, // 4
		20, 21, 22, // 3
		90, 91, // 2
		140, 141, // 2
		10,  // 1, the lowest of the single pages: the eighth extent
		204, // then the HWM: less than half the file is free
	}
	for i, id := range got {
		if i < len(want) && id != want[i] {
			t.Fatalf("allocation %d = %d, want %d (all: %v)", i, id, want[i], got)
		}
		if i >= len(want) && id != got[i-1]+1 {
			t.Fatalf("allocation %d = %d: growth at the HWM should go on contiguously (all: %v)", i, id, got)
		}
	}
	// A run that does not fit the extent in use starts a new one at the
	// HWM too: contiguous with what the transaction took there.
	next := got[len(got)-1] + 1
	mustAllocAt(t, m, 3, next)
	m.Rollback()
	mustCheck(t, m)

	// While more than the slack is free (the free part counts down as the
	// transaction takes pages), the holes are used instead of growing:
	// after the eight largest, the next largest, single pages.
	m = setup(0.02)
	m.Begin(3)
	got = got[:0]
	for range 35 {
		got = append(got, mustAlloc(t, m, 1))
	}
	if g := got[33:]; g[0] != 30 || g[1] != 60 || m.HWM() != 204 {
		t.Fatalf("allocations 34 and 35 = %v, HWM %d: want holes 30 and 60 and no growth (5 of 204 pages still free, slack 2%%)", g, m.HWM())
	}
	m.Commit()

	// At the size limit growth gives way to first fit: the holes it was
	// to spare are still there.
	_, d, ms := setupDisk(0.5)
	m, err := New(ms.config(tps, d, 204))
	if err != nil {
		t.Fatal(err)
	}
	m.SetLocalitySlack(0.5)
	m.Begin(3)
	got = got[:0]
	for range 35 {
		got = append(got, mustAlloc(t, m, 1))
	}
	// A reopened Map has no region loaded, so the first page comes from
	// first fit (which loads region 0): 10. Then the seven longest runs
	// (40, 70, 120, 100, 20, 90, 140), the eighth extent (30), and growth,
	// which the limit refuses: first fit gives the lowest hole left.
	if g := got[33:]; g[0] != 30 || g[1] != 60 || m.HWM() != 204 {
		t.Fatalf("allocations 34 and 35 at the size limit = %v, HWM %d: want 30, then the lowest hole 60 and no growth (all: %v)", g, m.HWM(), got)
	}
	m.Commit()

	// Compaction's limit turns the policy off: first fit, below the limit.
	m = setup(0.5)
	m.Begin(3)
	m.SetLimit(150)
	mustAllocAt(t, m, 1, 10)
	mustAllocAt(t, m, 2, 20)
	m.Rollback()
}

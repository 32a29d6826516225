package spacemap

import (
	"math/rand/v2"
	"testing"
)

// randomBitmap returns words with runs of set and clear bits of random
// lengths, so run searches meet word-straddling runs of every size.
func randomBitmap(rng *rand.Rand, words int) []uint64 {
	w := make([]uint64, words)
	total := uint64(words) * 64
	for pos := uint64(0); pos < total; {
		n := min(uint64(rng.IntN(150)+1), total-pos)
		if rng.IntN(2) == 0 {
			setRange(w, pos, n)
		}
		pos += n
	}
	return w
}

func naiveFindRun(w []uint64, from, n uint64) (uint64, bool) {
	total := uint64(len(w)) * 64
	for s := from; s+n <= total; s++ {
		ok := true
		for i := s; i < s+n; i++ {
			if !bitAt(w, i) {
				ok = false
				break
			}
		}
		if ok {
			return s, true
		}
	}
	return 0, false
}

func TestFindRunMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		w := randomBitmap(rng, 1+rng.IntN(12))
		total := uint64(len(w)) * 64
		for _, n := range []uint64{1, 2, 3, 63, 64, 65, 100, 129, total, total + 1} {
			from := uint64(rng.IntN(int(total)))
			if rng.IntN(3) == 0 {
				from = 0
			}
			gs, gok := findRun(w, from, n)
			ws, wok := naiveFindRun(w, from, n)
			if gs != ws || gok != wok {
				t.Fatalf("findRun(from %d, n %d) = %d,%v want %d,%v on %v", from, n, gs, gok, ws, wok, onesIn(w))
			}
		}
	}
}

func TestRangeOpsMatchNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 2000; iter++ {
		words := 1 + rng.IntN(6)
		total := uint64(words) * 64
		w := randomBitmap(rng, words)
		ref := make([]bool, total)
		for i := range ref {
			ref[i] = bitAt(w, uint64(i))
		}
		start := uint64(rng.IntN(int(total)))
		n := uint64(rng.IntN(int(total-start) + 1))
		var want uint64
		for i := start; i < start+n; i++ {
			if ref[i] {
				want++
			}
		}
		if got := countRange(w, start, n); got != want {
			t.Fatalf("countRange(%d,%d) = %d, want %d", start, n, got, want)
		}
		set := rng.IntN(2) == 0
		if set {
			setRange(w, start, n)
		} else {
			clearRange(w, start, n)
		}
		for i := uint64(0); i < total; i++ {
			want := ref[i]
			if i >= start && i < start+n {
				want = set
			}
			if bitAt(w, i) != want {
				t.Fatalf("set=%v [%d,%d): bit %d = %v", set, start, start+n, i, !want)
			}
		}
		// nextSet / nextClear against the reference.
		pos := uint64(rng.IntN(int(total)))
		ns, ok := nextSet(w, pos)
		wantS, wantOK := uint64(0), false
		for i := pos; i < total; i++ {
			if bitAt(w, i) {
				wantS, wantOK = i, true
				break
			}
		}
		if ns != wantS || ok != wantOK {
			t.Fatalf("nextSet(%d) = %d,%v want %d,%v", pos, ns, ok, wantS, wantOK)
		}
		limit := pos + uint64(rng.IntN(int(total-pos)+1))
		wantC := limit
		for i := pos; i < limit; i++ {
			if !bitAt(w, i) {
				wantC = i
				break
			}
		}
		if got := nextClear(w, pos, limit); got != wantC {
			t.Fatalf("nextClear(%d,%d) = %d, want %d", pos, limit, got, wantC)
		}
	}
}

// BenchmarkFindRunFragmented measures the worst case the allocator meets: a
// full region bitmap of alternating short runs with no run long enough.
func BenchmarkFindRunFragmented(b *testing.B) {
	w := make([]uint64, 508) // a 4 KiB page's region
	for i := range w {
		w[i] = 0x7777_7777_7777_7777 // runs of 3
	}
	for i := 0; i < b.N; i++ {
		if _, ok := findRun(w, 0, 4); ok {
			b.Fatal("found a run of 4")
		}
	}
}

package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestLatencyHistBuckets(t *testing.T) {
	// Buckets tile the non-negative int64s: each upper bound is in its own
	// bucket and the next value starts the next one.
	for i := 0; i < histBuckets-1; i++ {
		u := histUpper(i)
		if got := histIndex(u); got != i {
			t.Fatalf("histIndex(histUpper(%d) = %d) = %d", i, u, got)
		}
		if got := histIndex(u + 1); got != i+1 {
			t.Fatalf("histIndex(%d) = %d, want %d", u+1, got, i+1)
		}
	}
	if got := histIndex(math.MaxInt64); got != histBuckets-1 {
		t.Fatalf("histIndex(MaxInt64) = %d, want the last bucket %d", got, histBuckets-1)
	}
}

func TestLatencyHistPercentiles(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var h latencyHist
	var exact []float64
	for range 100_000 {
		// Log-uniform from 1 ns to about 100 s: every bucket width matters.
		d := time.Duration(math.Exp(r.Float64() * math.Log(1e11)))
		h.add(d)
		exact = append(exact, float64(d))
	}
	if h.count() != uint64(len(exact)) {
		t.Fatalf("count %d, want %d", h.count(), len(exact))
	}
	for _, p := range []float64{0.1, 1, 50, 90, 99, 99.9, 100} {
		want := Percentile(exact, p)
		got := h.percentile(p)
		// The bucket's upper bound: never below the true sample, and above
		// it by at most one bucket's width.
		if got < want || got > want*(1+1.0/histSubBuckets)+1 {
			t.Errorf("p%v = %v, exact %v", p, got, want)
		}
	}
	if got, want := h.percentile(100), Percentile(exact, 100); got != want {
		t.Errorf("p100 = %v, want the maximum %v", got, want)
	}
	var empty latencyHist
	if !math.IsNaN(empty.percentile(50)) {
		t.Error("percentile of no samples is not NaN")
	}
	var small latencyHist
	for _, d := range []time.Duration{3, 1, 2, -5} {
		small.add(d)
	}
	// Below histSubBuckets nanoseconds every value has a bucket of its own.
	if got := small.percentile(50); got != 1 {
		t.Errorf("p50 of {0, 1, 2, 3} = %v, want 1", got)
	}
}

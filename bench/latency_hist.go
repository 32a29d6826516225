package bench

import (
	"math"
	"math/bits"
	"time"
)

// latencyHist is a latency distribution in fixed memory, for loops whose
// sample count has no useful bound (a reader making Gets for as long as a
// compaction of many GiB takes would otherwise keep hundreds of millions
// of samples). Each power of two of nanoseconds is cut into
// histSubBuckets buckets, so a percentile is known to within 1/histSubBuckets
// of its value; the count and the maximum are exact.
//
// Invariant: counts[i] is the number of samples whose bucket index is i,
// and n is their sum.
type latencyHist struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const (
	// histSubBits is log2 of the buckets per power of two.
	histSubBits    = 6
	histSubBuckets = 1 << histSubBits
	// histBuckets covers every non-negative int64: values below
	// histSubBuckets have a bucket each, then 63-histSubBits powers of two
	// of histSubBuckets buckets.
	histBuckets = histSubBuckets * (64 - histSubBits)
)

// histIndex returns the bucket of a duration of v ≥ 0 nanoseconds.
func histIndex(v uint64) int {
	if v < histSubBuckets {
		return int(v)
	}
	exp := bits.Len64(v) - 1 - histSubBits // v >> exp is in [histSubBuckets, 2·histSubBuckets)
	return (exp+1)*histSubBuckets + int(v>>exp) - histSubBuckets
}

// histUpper returns the largest duration, in nanoseconds, that falls into
// bucket i.
func histUpper(i int) uint64 {
	if i < histSubBuckets {
		return uint64(i)
	}
	exp := i/histSubBuckets - 1
	mant := uint64(i%histSubBuckets + histSubBuckets)
	return (mant+1)<<exp - 1
}

// add records one sample; negative durations count as zero.
func (h *latencyHist) add(d time.Duration) {
	h.counts[histIndex(uint64(max(d, 0)))]++
	h.n++
	h.max = max(h.max, d)
}

// count returns the number of samples.
func (h *latencyHist) count() uint64 { return h.n }

// percentile returns the p-th percentile (0 < p ≤ 100) by nearest rank:
// the upper bound of the bucket holding the sample of that rank, but never
// more than the largest sample. It returns NaN for no samples.
func (h *latencyHist) percentile(p float64) float64 {
	if h.n == 0 || !(p > 0 && p <= 100) {
		return math.NaN()
	}
	rank := max(uint64(math.Ceil(p/100*float64(h.n))), 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return float64(min(histUpper(i), uint64(h.max)))
		}
	}
	return float64(h.max)
}

// record records the p50, p99, p99.9 and maximum as scalars named after
// figure, as recordTail does for kept samples; nothing for no samples.
func (h *latencyHist) record(env *Env, figure string) {
	if h.n == 0 {
		return
	}
	env.Scalar(figure+" p50", UnitDuration, Lower, h.percentile(50))
	env.Scalar(figure+" p99", UnitDuration, Lower, h.percentile(99))
	env.Scalar(figure+" p99.9", UnitDuration, Lower, h.percentile(99.9))
	env.Scalar(figure+" max", UnitDuration, Lower, float64(h.max))
}

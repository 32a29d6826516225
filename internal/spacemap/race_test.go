//go:build race

package spacemap

// raceEnabled shortens the randomized test under the race detector, which
// slows its page-by-page model comparisons about tenfold; the Map has no
// concurrency of its own for the detector to find.
const raceEnabled = true

package raftstore

import (
	"flag"
	"testing"
	"time"
)

var seedFlag = flag.Int64("rivet.seed", 0, "seed for randomized tests (0: time-based); printed on every run")

// testSeed returns the seed of a randomized test: -rivet.seed, or the clock
// when it is 0. It logs the seed so a failing run can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -rivet.seed=%d)", seed, seed)
	return uint64(seed)
}

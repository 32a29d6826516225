//go:build race

package rivet

// raceEnabled: the race detector multiplies memory use, so the tests that
// need gigabytes run in scripts/test.sh's separate non-race step instead.
const raceEnabled = true

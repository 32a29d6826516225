//go:build !race

package rivet

// raceEnabled: see race_on_test.go.
const raceEnabled = false

//go:build !race

package spacemap

// raceEnabled: see race_test.go.
const raceEnabled = false

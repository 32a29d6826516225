package bench

import (
	"testing"
	"time"
)

func TestParseStolen(t *testing.T) {
	for _, tc := range []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"cpu  4199814 233 1869069 4039703 462542 0 107727 4675 0 0\n", 46750 * time.Millisecond, true},
		{"cpu  1 2 3 4 5 6 7 0\n", 0, true},
		// Kernels before 2.6.11 have no steal column.
		{"cpu  1 2 3 4 5 6 7\n", 0, false},
		{"cpu0 1 2 3 4 5 6 7 8 9 10\n", 0, false},
		{"cpu  1 2 3 4 5 6 7 x 9 10\n", 0, false},
		{"cpu  1 2 3 4 5 6 7 18446744073709551615 0 0\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parseStolen([]byte(tc.line))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStolen(%q) = %v, %v; want %v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := stolenCPU(); !ok {
		t.Log("this kernel reports no steal time")
	}
}

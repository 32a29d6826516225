package bench

import (
	"math"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 1, 1, 100}, 1},
		{[]float64{-2, 2}, 0},
	} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if xs[0] != 3 || xs[1] != 1 || xs[2] != 2 {
		t.Errorf("Median sorted its input: %v", xs)
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 of 1..100", hundred, 100, 100},
		{"p50 of 1..100", hundred, 50, 50},
		{"p1 of 1..100", hundred, 1, 1},
		{"tiny p sticks to the minimum", hundred, 0.001, 1},
		// Nearest rank: ceil(0.99*10) = 10th smallest, the maximum.
		{"p99 of ten samples is the max", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 1000}, 99, 1000},
		{"p90 of ten samples", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 90, 9},
		{"single sample", []float64{7}, 99, 7},
		{"p50 of two is the lower", []float64{3, 1}, 50, 1},
	} {
		if got := Percentile(tc.xs, tc.p); got != tc.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
	for _, p := range []float64{0, -1, 101, math.NaN()} {
		if !math.IsNaN(Percentile(hundred, p)) {
			t.Errorf("Percentile(p=%v) is not NaN", p)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile(nil) is not NaN")
	}
}

func TestUnitFormat(t *testing.T) {
	for _, tc := range []struct {
		u    Unit
		v    float64
		want string
	}{
		{UnitDuration, float64(850 * time.Nanosecond), "850ns"},
		{UnitDuration, float64(27 * time.Millisecond), "27.0ms"},
		{UnitDuration, float64(1500 * time.Microsecond), "1.50ms"},
		{UnitBytes, 8966144, "8.55 MiB"},
		{UnitBytes, 512, "512 B"},
		{UnitRate, 369e6, "369M/s"},
		{UnitCount, 1000, "1000"},
		{UnitCount, 1.25, "1.25"},
		{UnitRate, math.NaN(), "-"},
	} {
		if got := tc.u.Format(tc.v); got != tc.want {
			t.Errorf("%s.Format(%v) = %q, want %q", tc.u, tc.v, got, tc.want)
		}
	}
}

func TestProcIO(t *testing.T) {
	before, ok := ReadProcIO()
	if !ok {
		t.Skip("/proc/self/io not available here")
	}
	if before.Wchar < 0 || before.WriteBytes < 0 {
		t.Fatalf("negative counters: %+v", before)
	}
	f := t.TempDir() + "/f"
	if err := writeFile(f, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	after, _ := ReadProcIO()
	d := after.Sub(before)
	if d.Wchar < 64<<10 {
		t.Errorf("wchar grew by %d after writing 64 KiB", d.Wchar)
	}
	if d.Syscw < 1 {
		t.Errorf("syscw grew by %d after a write call", d.Syscw)
	}
}

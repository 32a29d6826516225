package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Config selects what Run measures and how big it is.
type Config struct {
	// Workloads and Engines name what to run; empty means every workload
	// but those that run only when named (large-value, hostile-check,
	// compaction-scale), and for engines every registered one except the
	// durability variants (DefaultEngines).
	Workloads []string `json:"workloads"`
	Engines   []string `json:"engines"`
	// Size is the file size the fragmented workload grows its DB to before
	// deleting nearly everything, and compaction-scale its etcd-shaped DB
	// before deleting the oldest half.
	Size Size `json:"size"`
	// Keys is the key count of bulk-load and of the random-reads DB.
	Keys int `json:"keys"`
	// OneTxnKeys is the key count of bulk-load's single-transaction loads;
	// 0 means Keys. It is separate because bbolt's cost there grows with
	// the square of the count (it splits nodes only at commit, so each put
	// shifts every element after it in one huge node): 35 s for 100k
	// random keys, 139 s for 200k here, about an hour for 1M.
	OneTxnKeys int `json:"one_txn_keys,omitempty"`
	// Reads is the number of Gets random-reads issues per goroutine setting
	// (and a tenth of that in 10-key range scans).
	Reads int `json:"reads"`
	// Commits is the number of one-key commits of durable-writes, and the
	// cap on the fragmented commit loop.
	Commits int `json:"commits"`
	// Duration caps the fragmented commit loop; whichever of Commits and
	// Duration comes first ends it. concurrent-durable runs each of its
	// settings, and mode-latency its loop, for a quarter of it.
	// compaction-scale runs its writer and reader for it before compacting.
	Duration time.Duration `json:"duration_ns"`
	// OpenSizes are the file sizes open-scaling builds (each once plain,
	// once fragmented) and times Open on.
	OpenSizes []Size `json:"open_sizes"`
	// SlasherKeys is the key count batch-slasher spreads over its buckets.
	SlasherKeys int `json:"slasher_keys"`
	// ValueSizes are the sizes of the values large-value stores, one
	// child process per engine and size.
	ValueSizes []Size `json:"value_sizes"`
	// Runs repeats every workload; medians are taken over runs.
	Runs int `json:"runs"`
	// Dir is where databases are created (a fresh subdirectory, removed
	// afterwards); empty means the OS temp dir. Pick the disk you care about:
	// fsync costs differ by orders of magnitude between devices.
	Dir string `json:"dir,omitempty"`
	// Keep leaves the databases the workloads made in Dir instead of
	// removing them, for inspecting, converting or picturing afterwards.
	Keep bool `json:"keep,omitempty"`

	// Progress, when set, is told about long phases (see ProgressFunc).
	Progress ProgressFunc `json:"-"`
	// Log, when set, receives one line per workload run as it starts.
	Log io.Writer `json:"-"`
}

// maxValueSize is the largest value rivet and bbolt store (both define
// MaxValueSize as 2^31-2).
const maxValueSize = 1<<31 - 2

// Presets are the named sizes. "tiny" is for tests and CI (seconds),
// "demo" for a first look on a laptop (about a minute for rivet alone on two
// cores), "full" for numbers worth publishing.
var Presets = map[string]Config{
	"tiny": {Size: 2 << 20, Keys: 2_000, Reads: 4_000, Commits: 50, Duration: 2 * time.Second, Runs: 1,
		OpenSizes: []Size{1 << 20, 2 << 20, 4 << 20}, SlasherKeys: 8_000, ValueSizes: []Size{20 << 20}},
	"demo": {Size: 256 << 20, Keys: 100_000, Reads: 200_000, Commits: 1_000, Duration: 5 * time.Second, Runs: 1,
		OpenSizes: []Size{4 << 20, 16 << 20, 64 << 20}, SlasherKeys: 200_000, ValueSizes: []Size{300 << 20}},
	"full": {Size: 1 << 30, Keys: 1_000_000, OneTxnKeys: 100_000, Reads: 1_000_000, Commits: 1_000, Duration: 10 * time.Second, Runs: 3,
		OpenSizes: []Size{16 << 20, 1 << 30, 4 << 30}, SlasherKeys: 4_000_000, ValueSizes: []Size{300 << 20, 1 << 30}},
}

// Preset returns the named preset.
func Preset(name string) (Config, error) {
	c, ok := Presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown preset %q (want tiny, demo or full)", name)
	}
	// A copy, so a caller changing the sizes does not change the preset.
	c.OpenSizes = slices.Clone(c.OpenSizes)
	c.ValueSizes = slices.Clone(c.ValueSizes)
	return c, nil
}

// SplitList splits a comma-separated flag value, dropping blanks, so
// "--engines rivet,bbolt" and "--engines ' rivet , bbolt '" mean the same.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (c *Config) validate() error {
	switch {
	case c.Size <= 0:
		return fmt.Errorf("size must be positive, got %s", c.Size)
	case c.Keys < 10:
		return fmt.Errorf("keys must be at least 10, got %d", c.Keys)
	case c.OneTxnKeys < 0 || (c.OneTxnKeys > 0 && c.OneTxnKeys < 10):
		return fmt.Errorf("one-txn keys must be 0 (same as keys) or at least 10, got %d", c.OneTxnKeys)
	case c.Reads <= 0:
		return fmt.Errorf("reads must be positive, got %d", c.Reads)
	case c.Commits <= 0:
		return fmt.Errorf("commits must be positive, got %d", c.Commits)
	case c.Duration <= 0:
		return fmt.Errorf("duration must be positive, got %s", c.Duration)
	case c.Runs <= 0:
		return fmt.Errorf("runs must be positive, got %d", c.Runs)
	case len(c.OpenSizes) == 0:
		return fmt.Errorf("open sizes must not be empty")
	case c.SlasherKeys < slasherBuckets*slasherBatch/10:
		return fmt.Errorf("slasher keys must be at least %d, got %d", slasherBuckets*slasherBatch/10, c.SlasherKeys)
	}
	for _, z := range c.OpenSizes {
		if z <= 0 {
			return fmt.Errorf("open sizes must be positive, got %s", z)
		}
	}
	for _, z := range c.ValueSizes {
		if z <= 0 || z > maxValueSize {
			return fmt.Errorf("value sizes must be from 1 byte to %d (bbolt's and rivet's MaxValueSize), got %s", int64(maxValueSize), z)
		}
	}
	return nil
}

// Progress receives the advance of one long phase.
type Progress interface {
	// Add reports n more units done. Concurrent readers call it from
	// several goroutines, so implementations must be safe for that.
	Add(n int64)
	// Done ends the phase (also when it ended early).
	Done()
}

// ProgressFunc starts reporting a phase called label that has total units
// of work (bytes, keys or commits; a phase may end before total). The bench
// package draws nothing itself: the command-line front end decides whether
// a bar fits its output (not when stdout is a pipe, for instance).
type ProgressFunc func(label string, total int64) Progress

// nopProgress is the Progress used when nobody listens.
type nopProgress struct{}

// Add implements Progress.
func (nopProgress) Add(int64) {}

// Done implements Progress.
func (nopProgress) Done() {}

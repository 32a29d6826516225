package raftstore

// A raft log's life: entries are appended in batches of raft's
// MaxAppendEntries (64) and the head is truncated as raft does after each
// snapshot (SnapshotThreshold 8192 entries, TrailingLogs 10240 kept).
//
// TestLogGrowthBounded checks that raftstore's file stops growing once the
// truncations free as much as the appends add. BenchmarkLogGrowth runs the
// same life side by side with raft-boltdb v2 at scale and prints a table.

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rivetkv/rivet"
)

// Raft's defaults (raft.DefaultConfig).
const (
	growthBatch     = 64
	growthThreshold = 8192
	growthTrailing  = 10240
)

// growthRun is one store's progress.
type growthRun struct {
	name      string
	path      string
	s         benchStore
	last      uint64 // last index stored
	snapAt    uint64 // last index at the last truncation
	appended  int64  // bytes of entry data stored
	commits   []time.Duration
	written   int64 // bytes written by StoreLogs (write syscalls)
	truncs    int
	truncTime time.Duration
	total     time.Duration
}

// procWchar returns the bytes this process has passed to write calls.
func procWchar() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// step stores one batch and truncates the head when raft would.
func (g *growthRun) step(t testing.TB, batch []*raft.Log) {
	for i, l := range batch {
		l.Index = g.last + 1 + uint64(i)
		g.appended += int64(len(l.Data))
	}
	w := procWchar()
	start := time.Now()
	if err := g.s.StoreLogs(batch); err != nil {
		t.Fatalf("%s: %v", g.name, err)
	}
	d := time.Since(start)
	g.written += procWchar() - w
	g.commits = append(g.commits, d)
	g.total += d
	g.last += uint64(len(batch))
	if g.last-g.snapAt >= growthThreshold {
		first, err := g.s.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		if g.last > growthTrailing && first <= g.last-growthTrailing {
			start := time.Now()
			if err := g.s.DeleteRange(first, g.last-growthTrailing); err != nil {
				t.Fatalf("%s: %v", g.name, err)
			}
			d := time.Since(start)
			g.truncs++
			g.truncTime += d
			g.total += d
		}
		g.snapAt = g.last
	}
}

// row prints the window since the last row and starts a new one.
func (g *growthRun) row() string {
	fi, err := os.Stat(g.path)
	size := int64(-1)
	if err == nil {
		size = fi.Size()
	}
	c := slices.Clone(g.commits)
	slices.Sort(c)
	var sum time.Duration
	for _, d := range c {
		sum += d
	}
	pct := func(p float64) time.Duration { return c[min(len(c)-1, int(p*float64(len(c))))] }
	line := fmt.Sprintf("| %s | %.2f | %.1f | %v | %v | %v | %.0f | %v |",
		g.name, float64(g.appended)/(1<<30), float64(size)/(1<<20),
		(sum / time.Duration(len(c))).Round(time.Microsecond), pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond),
		float64(g.written)/float64(len(c))/1024, (g.truncTime / time.Duration(max(g.truncs, 1))).Round(time.Microsecond))
	g.commits = g.commits[:0]
	g.written = 0
	g.truncs = 0
	g.truncTime = 0
	return line
}

// growthEntry returns an entry's data: entry bytes that do not compress.
func growthEntry(entry int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, entry)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}

// growthBatchOf returns a batch of growthBatch entries holding data.
func growthBatchOf(data []byte) []*raft.Log {
	batch := make([]*raft.Log, growthBatch)
	for i := range batch {
		batch[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
	}
	return batch
}

// TestLogGrowthBounded: through raft's append-and-truncate cycle the file
// reaches a steady size. The live log never holds more than
// growthTrailing+growthThreshold entries; once a few truncations have
// freed pages, later appends reuse them, so the file after the last cycle
// is no larger than after the warm-up cycles (plus a few pages of slack
// for the tree's shape), and within a small multiple of the live data.
func TestLogGrowthBounded(t *testing.T) {
	const (
		entry  = 256
		warmUp = 3 // truncations before the file's size is taken as steady
	)
	cycles := 12
	if testing.Short() {
		cycles = 7
	}
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := NewStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	g := &growthRun{name: "raftstore", path: path, s: s}
	data := growthEntry(entry)
	// size is the bytes up to the file's high-water mark: the file itself
	// grows in larger steps.
	size := func() int64 {
		t.Helper()
		var n int64
		if err := s.db.View(func(tx *rivet.Tx) error { n = tx.Size(); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var sizes []int64 // the size after each truncation
	for g.truncs < cycles {
		before := g.truncs
		g.step(t, growthBatchOf(data))
		if g.truncs > before {
			sizes = append(sizes, size())
		}
	}
	live := int64(growthTrailing+growthThreshold) * entry
	steady, last := sizes[warmUp-1], sizes[len(sizes)-1]
	t.Logf("size up to the high-water mark after each of %d truncations (KiB): %v; live data at most %d KiB", cycles, kib(sizes), live>>10)
	if last > steady+steady/8 {
		t.Fatalf("the file grew from %d KiB after %d truncations to %d KiB after %d: freed pages are not reused", steady>>10, warmUp, last>>10, cycles)
	}
	if last > 4*live {
		t.Fatalf("the file holds %d KiB for at most %d KiB of live entries", last>>10, live>>10)
	}
}

func kib(sizes []int64) []int64 {
	out := make([]int64, len(sizes))
	for i, s := range sizes {
		out[i] = s >> 10
	}
	return out
}

// BenchmarkLogGrowth pushes RAFTSTORE_GROWTH_GIB GiB of entries through
// raftstore and raft-boltdb v2. The two stores take turns batch by batch,
// so both see the same machine over time. It prints, at each eighth of the
// way, each file's size and the cost of the StoreLogs calls and
// truncations since the previous row, and reports each store's final file
// size and time with their ratios. It ignores b.N; run it once, by hand
// (minutes; several GiB written to TMPDIR):
//
//	RAFTSTORE_GROWTH_GIB=4 go test -run '^$' -bench LogGrowth -benchtime 1x -timeout 0 .
//
// RAFTSTORE_GROWTH_ENTRY sets the entry size in bytes (default 1024).
func BenchmarkLogGrowth(b *testing.B) {
	gib, err := strconv.ParseFloat(os.Getenv("RAFTSTORE_GROWTH_GIB"), 64)
	if err != nil || gib <= 0 {
		b.Skip("set RAFTSTORE_GROWTH_GIB (e.g. 4) to run; it writes that much through each store")
	}
	entry := 1024
	if n, err := strconv.Atoi(os.Getenv("RAFTSTORE_GROWTH_ENTRY")); err == nil && n > 0 {
		entry = n
	}
	dir := b.TempDir()
	var runs []*growthRun
	for _, bs := range benchStores {
		path := filepath.Join(dir, bs.name+".db")
		s, err := bs.open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		runs = append(runs, &growthRun{name: bs.name, path: path, s: s})
	}
	data := growthEntry(entry)
	target := int64(gib * (1 << 30))
	checkpoint := target / 8
	fmt.Printf("%s GiB through each store, %d-byte entries, batches of %d; truncation every %d entries keeping %d\n\n",
		strconv.FormatFloat(gib, 'g', -1, 64), entry, growthBatch, growthThreshold, growthTrailing)
	fmt.Println("| store | GiB appended | file MiB | StoreLogs mean | p50 | p99 | KiB written per StoreLogs | DeleteRange mean |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	next := checkpoint
	b.ResetTimer()
	for runs[0].appended < target {
		for _, g := range runs {
			g.step(b, growthBatchOf(data))
		}
		if runs[0].appended >= next || runs[0].appended >= target {
			for _, g := range runs {
				fmt.Println(g.row())
			}
			next += checkpoint
		}
	}
	b.StopTimer()
	fmt.Println()
	sizes := make([]float64, len(runs))
	for i, g := range runs {
		first, _ := g.s.FirstIndex()
		fmt.Printf("%s: %v in StoreLogs and DeleteRange; %d entries stored, log [%d, %d] at the end\n",
			g.name, g.total.Round(time.Millisecond), g.last, first, g.last)
		if fi, err := os.Stat(g.path); err == nil {
			sizes[i] = float64(fi.Size()) / (1 << 20)
		}
		b.ReportMetric(sizes[i], g.name+"-file-MiB")
		b.ReportMetric(g.total.Seconds(), g.name+"-s")
	}
	// runs[0] is raftstore, runs[1] raft-boltdb.
	if sizes[1] > 0 && runs[1].total > 0 {
		b.ReportMetric(sizes[0]/sizes[1], "file-ratio")
		b.ReportMetric(runs[0].total.Seconds()/runs[1].total.Seconds(), "time-ratio")
	}
}

package raftstore

// TestLogGrowth: a raft log's life, side by side with raft-boltdb v2.
// Entries are appended in batches of raft's MaxAppendEntries (64) and the
// head is truncated as raft does after each snapshot (SnapshotThreshold
// 8192 entries, TrailingLogs 10240 kept), until RAFTSTORE_GROWTH_GIB GiB
// of entries have gone through each store. The two stores take turns
// batch by batch, so both see the same machine over time. It prints, at
// each eighth of the way, each file's size and the cost of the
// StoreLogs calls and truncations since the previous row.
//
// It is run by hand (minutes; several GiB written to TMPDIR):
//
//	RAFTSTORE_GROWTH_GIB=4 go test -run TestLogGrowth -v -timeout 0 .
//
// RAFTSTORE_GROWTH_ENTRY sets the entry size in bytes (default 1024).

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
func (g *growthRun) step(t *testing.T, batch []*raft.Log) {
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

func TestLogGrowth(t *testing.T) {
	gib, err := strconv.ParseFloat(os.Getenv("RAFTSTORE_GROWTH_GIB"), 64)
	if err != nil || gib <= 0 {
		t.Skip("set RAFTSTORE_GROWTH_GIB (e.g. 4) to run; it writes that much through each store")
	}
	entry := 1024
	if n, err := strconv.Atoi(os.Getenv("RAFTSTORE_GROWTH_ENTRY")); err == nil && n > 0 {
		entry = n
	}
	dir := t.TempDir()
	var runs []*growthRun
	for _, bs := range benchStores {
		path := filepath.Join(dir, bs.name+".db")
		s, err := bs.open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		runs = append(runs, &growthRun{name: bs.name, path: path, s: s})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, entry)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	target := int64(gib * (1 << 30))
	checkpoint := target / 8
	fmt.Printf("%s GiB through each store, %d-byte entries, batches of %d; truncation every %d entries keeping %d\n\n",
		strconv.FormatFloat(gib, 'g', -1, 64), entry, growthBatch, growthThreshold, growthTrailing)
	fmt.Println("| store | GiB appended | file MiB | StoreLogs mean | p50 | p99 | KiB written per StoreLogs | DeleteRange mean |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	next := checkpoint
	for runs[0].appended < target {
		for _, g := range runs {
			batch := make([]*raft.Log, growthBatch)
			for i := range batch {
				batch[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			}
			g.step(t, batch)
		}
		if runs[0].appended >= next || runs[0].appended >= target {
			for _, g := range runs {
				fmt.Println(g.row())
			}
			next += checkpoint
		}
	}
	fmt.Println()
	for _, g := range runs {
		first, _ := g.s.FirstIndex()
		fmt.Printf("%s: %v in StoreLogs and DeleteRange; %d entries stored, log [%d, %d] at the end\n",
			g.name, g.total.Round(time.Millisecond), g.last, first, g.last)
	}
}

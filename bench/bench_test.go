package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rivetkv/rivet/bench/lmdb"
)

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }

// tinyConfig is the "tiny" preset with a shorter loop cap: the tests check
// that every workload produces well-formed rows, not the numbers.
func tinyConfig(t *testing.T, engines ...string) Config {
	t.Helper()
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engines = engines
	cfg.Dir = t.TempDir()
	cfg.Duration = time.Second
	return cfg
}

// testEngines are the engines the workload tests run.
// LMDB joins them when it is built in (go test -tags lmdb).
func testEngines() []string {
	es := []string{RivetEngine, BaselineEngine, BoltNoFreelistSyncEngine}
	if lmdb.Available {
		es = append(es, LMDBEngine)
	}
	return es
}

func TestRunAllWorkloadsTiny(t *testing.T) {
	engines := testEngines()
	cfg := tinyConfig(t, engines...)
	var phases []string
	cfg.Progress = func(label string, total int64) Progress {
		if total <= 0 {
			t.Errorf("phase %q has total %d", label, total)
		}
		phases = append(phases, label)
		return nopProgress{}
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}

	// Every workload ran on every engine and left rows behind.
	for _, w := range Workloads() {
		ran := slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Workload == w.Name })
		if w.OnlyWhenNamed {
			if ran {
				t.Errorf("%s ran without being named", w.Name)
			}
			continue
		}
		for _, e := range engines {
			if !slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Workload == w.Name && r.Engine == e }) {
				t.Errorf("no rows for %s on %s", w.Name, e)
			}
		}
	}
	if len(phases) == 0 {
		t.Error("no progress phase was reported")
	}

	// Figures every engine must produce, with a positive median.
	must := map[string][]string{
		"fragmented":      {"keys loaded", "file size after load", "file size after delete", "open", "commit latency", "commits/s", "commits"},
		"durable-writes":  {"commit latency", "commits/s", "total time"},
		"bulk-load":       {"sequential keys/s", "random keys/s", "sequential file size", "random file size", "sequential one-txn keys/s", "random one-txn keys/s", "one-txn keys"},
		"random-reads":    {"gets/s, 1 goroutine(s)", "gets/s, 2 goroutine(s)", "10-key scans/s"},
		"update-locality": {"file size after load", "commit latency", "commits/s", "commits"},
		"batch-slasher": {"file size after load", "commit latency", "commits/s", "updates/s", "commits",
			"file size at end"},
		"memory":       {"peak RSS", "peak RSS of an idle child"},
		"mode-latency": {"commits/s", "commit latency", "commits", "close"},
	}
	for _, z := range cfg.OpenSizes {
		for _, state := range []string{"plain", "fragmented"} {
			must["open-scaling"] = append(must["open-scaling"],
				fmt.Sprintf("file size, %s %s", z, state), fmt.Sprintf("open, %s %s", z, state))
		}
	}
	for _, mode := range []string{"update", "batch"} {
		for _, g := range concurrentGoroutines {
			must["concurrent-durable"] = append(must["concurrent-durable"],
				fmt.Sprintf("commits/s, %s, %d goroutine(s)", mode, g), fmt.Sprintf("latency, %s, %d goroutine(s)", mode, g))
		}
	}
	if _, ok := ReadProcIO(); ok {
		must["fragmented"] = append(must["fragmented"], "wchar/commit")
		must["durable-writes"] = append(must["durable-writes"], "wchar/commit")
		must["update-locality"] = append(must["update-locality"], "wchar/commit", "write syscalls/commit")
		must["batch-slasher"] = append(must["batch-slasher"], "wchar/commit")
	}
	for w, figs := range must {
		for _, f := range figs {
			for _, e := range engines {
				r, ok := find(rep.Results, w, f, e)
				if !ok && e == LMDBEngine && strings.Contains(f, "batch") {
					continue // LMDB has no Batch
				}
				if !ok {
					t.Errorf("%s/%s: no %q row", w, e, f)
					continue
				}
				if !(r.Median > 0) || r.Runs != 1 {
					t.Errorf("%s/%s %q: median %v over %d runs", w, e, f, r.Median, r.Runs)
				}
			}
		}
	}

	for _, r := range rep.Results {
		if r.Workload == "" || r.Engine == "" || r.Figure == "" || r.Unit == "" {
			t.Errorf("incomplete row %+v", r)
		}
		if r.Min > r.Median || r.Median > r.Max {
			t.Errorf("%s/%s %q: median %v outside [%v, %v]", r.Workload, r.Engine, r.Figure, r.Median, r.Min, r.Max)
		}
		if r.IsDistribution() && (r.P99 < r.Median || r.P99 > r.Max) {
			t.Errorf("%s/%s %q: p99 %v outside [median %v, max %v]", r.Workload, r.Engine, r.Figure, r.P99, r.Median, r.Max)
		}
		// Ratios: exactly the non-baseline rows whose baseline is non-zero.
		base, ok := find(rep.Results, r.Workload, r.Figure, BaselineEngine)
		// A row whose own median is zero (no reads over 10 ms) has a true
		// ratio of zero.
		wantRatio := r.Engine != BaselineEngine && ok && base.Median != 0
		if (wantRatio && r.Median != 0) != (r.Ratio != 0) {
			t.Errorf("%s/%s %q: ratio %v, baseline row %v (median %v)", r.Workload, r.Engine, r.Figure, r.Ratio, ok, base.Median)
		}
		if wantRatio && r.Median != 0 && abs(r.Ratio-r.Median/base.Median) > 1e-9*r.Ratio {
			t.Errorf("%s/%s %q: ratio %v != %v/%v", r.Workload, r.Engine, r.Figure, r.Ratio, r.Median, base.Median)
		}
	}
	// The fragmented key count is calibrated so bbolt's file reaches about
	// --size (its file grows in power-of-two steps at this scale).
	for _, e := range []string{BaselineEngine, BoltNoFreelistSyncEngine} {
		r, _ := find(rep.Results, "fragmented", "file size after load", e)
		if r.Median < float64(cfg.Size)/2 || r.Median > 2*float64(cfg.Size) {
			t.Errorf("fragmented on %s grew to %v bytes, want about %d", e, r.Median, cfg.Size)
		}
	}
	for _, e := range engines {
		if r, _ := find(rep.Results, "fragmented", "keys loaded", e); r.Median != float64(fragmentedKeys(cfg.Size)) {
			t.Errorf("fragmented on %s loaded %v keys, want %d like every engine", e, r.Median, fragmentedKeys(cfg.Size))
		}
	}
	// The durable-writes loop has no time cap: it must make every commit.
	for _, e := range engines {
		if r, _ := find(rep.Results, "durable-writes", "commits", e); r.Median != float64(cfg.Commits) {
			t.Errorf("durable-writes on %s made %v commits, want %d", e, r.Median, cfg.Commits)
		}
	}

	checkNewWorkloads(t, cfg, rep.Results, engines)

	// The databases are gone; the directory given is left empty.
	if left, _ := os.ReadDir(cfg.Dir); len(left) != 0 {
		t.Errorf("bench left %d entries in %s", len(left), cfg.Dir)
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, col := range TableHeader[:len(TableHeader)-1] {
		if !strings.Contains(table.String(), col) {
			t.Errorf("table lacks column %q:\n%s", col, table.String())
		}
	}
	if !strings.Contains(table.String(), "VS BBOLT") {
		t.Errorf("table lacks the ratio column:\n%s", table.String())
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(rep.Results) || !slices.Equal(back.Config.Engines, engines) {
		t.Errorf("JSON round trip: %d results (want %d), engines %v", len(back.Results), len(rep.Results), back.Config.Engines)
	}
}

// checkNewWorkloads asserts what the open-scaling, update-locality,
// batch-slasher, memory and concurrent-durable rows must say whatever the
// machine's speed.
func checkNewWorkloads(t *testing.T, cfg Config, rs []Result, engines []string) {
	t.Helper()
	for _, z := range cfg.OpenSizes {
		for _, state := range []string{"plain", "fragmented"} {
			label := fmt.Sprintf("%s %s", z, state)
			// Only rivet counts pages read at Open, and it reads a few
			// metas, not the file.
			r, ok := find(rs, "open-scaling", "pages read at open, "+label, RivetEngine)
			if !ok || r.Median < 1 || r.Median*4096 >= float64(z) {
				t.Errorf("rivet pages read at open, %s: %+v (found %v)", label, r, ok)
			}
			if _, ok := find(rs, "open-scaling", "pages read at open, "+label, BaselineEngine); ok {
				t.Errorf("bbolt has a pages-read row it cannot measure")
			}
			if r, _ := find(rs, "open-scaling", "open, "+label, BaselineEngine); r.Samples != openTimings {
				t.Errorf("open, %s: %d samples, want %d", label, r.Samples, openTimings)
			}
		}
	}
	// Every rivet commit waits for one journal write: one run on its
	// flush's path, and it writes at least one run to the file.
	if r, _ := find(rs, "update-locality", "flush-path write runs/commit", RivetEngine); r.Median != 1 {
		t.Errorf("update-locality: rivet flush-path write runs/commit %v, want 1", r.Median)
	}
	for _, e := range engines {
		// LMDB keeps no counters: its row is missing, never zero.
		if r, ok := find(rs, "update-locality", "engine write runs/commit", e); (ok || e != LMDBEngine) && r.Median < 1 {
			t.Errorf("update-locality on %s: %v write runs per commit", e, r.Median)
		}
		// A slasher commit writes 5000 values of 100 bytes, through the
		// kernel whatever the engine.
		if r, ok := find(rs, "batch-slasher", "wchar/commit", e); ok && r.Median < slasherBatch*ValueSize {
			t.Errorf("batch-slasher on %s: %v bytes per commit, below the values' own size", e, r.Median)
		}
		peak, _ := find(rs, "memory", "peak RSS", e)
		idle, _ := find(rs, "memory", "peak RSS of an idle child", e)
		if peak.Median < idle.Median || idle.Median < 1<<20 {
			t.Errorf("memory on %s: peak %v, idle child %v", e, peak.Median, idle.Median)
		}
	}
	// Without group commit, one goroutine's commits are one flush each; with
	// more goroutines rivet may share flushes but never exceeds one per
	// commit. Batch shares flushes between goroutines, with or without
	// its gathering delay.
	for _, mode := range []string{"update", "batch", "batch, no delay"} {
		for _, g := range concurrentGoroutines {
			r, ok := find(rs, "concurrent-durable", fmt.Sprintf("flushes per 1000 commits, %s, %d goroutine(s)", mode, g), RivetEngine)
			if !ok || r.Median <= 0 || r.Median > 1000 || (mode == "update" && g == 1 && r.Median != 1000) {
				t.Errorf("rivet flushes per 1000 commits, %s, %d goroutines: %v (found %v)", mode, g, r.Median, ok)
			}
		}
	}
}

// TestDurabilityVariants runs the concurrent-durable comparison on every durability
// variant and checks what the flush counts must say whatever the machine:
// Full and Barrier (a full flush on Linux and Windows) flush once per
// single-writer commit, Periodic and None almost never, and bbolt counts
// no flushes at all.
func TestDurabilityVariants(t *testing.T) {
	for _, e := range DefaultEngines() {
		if slices.Contains(DurabilityEngines, e.Name()) && e.Name() != RivetEngine && e.Name() != BaselineEngine {
			t.Errorf("variant %s runs by default", e.Name())
		}
	}
	for _, name := range DurabilityEngines {
		e, err := LookupEngine(name)
		if err != nil {
			t.Fatal(err)
		}
		_, isVariant := e.(Variant)
		if _, isInspector := e.(Inspector); isVariant && isInspector {
			t.Errorf("variant %s claims files as an Inspector", name)
		}
	}
	cfg := tinyConfig(t, DurabilityEngines...)
	cfg.Workloads = []string{"mode-latency", "concurrent-durable"}
	cfg.Duration = 400 * time.Millisecond
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range DurabilityEngines {
		for _, f := range []string{"commits/s", "commit latency", "close"} {
			if r, ok := find(rep.Results, "mode-latency", f, name); !ok || !(r.Median > 0) {
				t.Errorf("mode-latency on %s: %q = %+v (found %v)", name, f, r, ok)
			}
		}
		for _, g := range concurrentGoroutines {
			if r, ok := find(rep.Results, "concurrent-durable", fmt.Sprintf("commits/s, update, %d goroutine(s)", g), name); !ok || !(r.Median > 0) {
				t.Errorf("concurrent-durable on %s, %d goroutines: %+v (found %v)", name, g, r, ok)
			}
		}
		fl, ok := find(rep.Results, "mode-latency", "flushes per 1000 commits", name)
		cfl, cok := find(rep.Results, "concurrent-durable", "flushes per 1000 commits, update, 1 goroutine(s)", name)
		switch name {
		case BaselineEngine, BoltNoSyncEngine:
			if ok || cok {
				t.Errorf("%s has a flush count it cannot measure", name)
			}
		case RivetEngine, RivetBarrierEngine:
			if fl.Median != 1000 || cfl.Median != 1000 {
				t.Errorf("%s: %v and %v flushes per 1000 single-writer commits, want 1000", name, fl.Median, cfl.Median)
			}
		default: // Periodic(1s) and None: no flush per commit
			if !ok || !cok || fl.Median > 100 || cfl.Median > 100 {
				t.Errorf("%s: %v and %v flushes per 1000 commits (found %v, %v)", name, fl.Median, cfl.Median, ok, cok)
			}
		}
	}
}

func find(rs []Result, workload, figure, engine string) (Result, bool) {
	i := slices.IndexFunc(rs, func(r Result) bool {
		return r.Workload == workload && r.Figure == figure && r.Engine == engine
	})
	if i < 0 {
		return Result{}, false
	}
	return rs[i], true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestRunWithoutBaselineHasNoRatios(t *testing.T) {
	cfg := tinyConfig(t, BoltNoFreelistSyncEngine)
	cfg.Workloads = []string{"durable-writes"}
	cfg.Runs = 2
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Ratio != 0 {
			t.Errorf("%q has ratio %v without a baseline in the run", r.Figure, r.Ratio)
		}
		if r.Runs != 2 {
			t.Errorf("%q aggregated %d runs, want 2", r.Figure, r.Runs)
		}
	}
	lat, ok := find(rep.Results, "durable-writes", "commit latency", BoltNoFreelistSyncEngine)
	if !ok || lat.Samples != 2*cfg.Commits {
		t.Errorf("latency samples pooled over runs: %d, want %d", lat.Samples, 2*cfg.Commits)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "P99/SPREAD") || strings.Contains(table.String(), "VS BBOLT") {
		t.Errorf("table without a baseline should have no ratio column:\n%s", table.String())
	}
}

func TestAggregatorOrderAndRatios(t *testing.T) {
	var a aggregator
	for run := range 3 {
		for _, e := range []string{"b", "a"} { // engines arrive in rotated order
			rec := &recorder{}
			v := float64(10 + run)
			if e == "a" {
				v *= 2
			}
			rec.scalar("x", UnitCount, Higher, v)
			rec.latencies("lat", []time.Duration{time.Duration(v), time.Duration(2 * v)})
			a.add("w", e, rec)
		}
	}
	rs := a.results([]string{"a", "b"}, "b")
	var got []string
	for _, r := range rs {
		got = append(got, r.Figure+"/"+r.Engine)
	}
	if want := []string{"x/a", "x/b", "lat/a", "lat/b"}; !slices.Equal(got, want) {
		t.Fatalf("row order %v, want %v", got, want)
	}
	if rs[0].Median != 22 || rs[0].Min != 20 || rs[0].Max != 24 || rs[0].Runs != 3 || rs[0].Ratio != 2 {
		t.Errorf("scalar row %+v", rs[0])
	}
	if rs[1].Ratio != 0 {
		t.Errorf("baseline row has ratio %v", rs[1].Ratio)
	}
	if rs[2].Samples != 6 || rs[2].P99 != 48 || rs[2].Ratio != 2 {
		t.Errorf("distribution row %+v", rs[2])
	}
	if s := rs[0].spread(); s != "±9.1%" {
		t.Errorf("spread %q", s)
	}
	if s := rs[0].ratio(); s != "2× better" {
		t.Errorf("ratio %q", s)
	}
	if s := rs[2].ratio(); s != "2× worse" {
		t.Errorf("latency ratio %q", s)
	}
}

func TestSelectionErrors(t *testing.T) {
	cfg := tinyConfig(t, "no-such-engine")
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no-such-engine") {
		t.Errorf("unknown engine: %v", err)
	}
	cfg = tinyConfig(t, BaselineEngine)
	cfg.Workloads = []string{"no-such-workload"}
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no-such-workload") {
		t.Errorf("unknown workload: %v", err)
	}
	if !lmdb.Available {
		cfg = tinyConfig(t, LMDBEngine)
		if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "-tags lmdb") {
			t.Errorf("lmdb without the binding: %v", err)
		}
	}
	cfg = tinyConfig(t, BaselineEngine)
	cfg.Keys = 0
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Error("zero keys accepted")
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	cfg := tinyConfig(t, BaselineEngine)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("Run on a cancelled context: %v", err)
	}
}

func TestCountersSub(t *testing.T) {
	d := Counters{CtrFlushes: 10, CtrBytesWritten: 8192}.Sub(Counters{CtrFlushes: 4})
	if len(d) != 1 || d[CtrFlushes] != 6 {
		t.Errorf("Sub = %v, want only flushes: 6", d)
	}
}

func TestFields(t *testing.T) {
	type inner struct {
		Write int64
		Time  time.Duration
	}
	s := struct {
		Tx      inner
		FreeN   int
		private int
		Name    string
		OK      bool
	}{Tx: inner{3, time.Second}, FreeN: 7, private: 1, Name: "x", OK: true}
	var got []string
	for _, f := range Fields(&s) {
		got = append(got, f.Name)
	}
	if want := []string{"Tx.Write", "Tx.Time", "FreeN", "OK"}; !slices.Equal(got, want) {
		t.Errorf("Fields = %v, want %v", got, want)
	}
}

func TestBucketLabel(t *testing.T) {
	if got := bucketLabel([]byte("widgets")); got != "widgets" {
		t.Errorf("printable name: %q", got)
	}
	if got := bucketLabel([]byte{0, 0xff, 'a'}); got != `"\x00\xffa"` {
		t.Errorf("binary name: %q", got)
	}
}

// TestInspectors creates a file with each inspectable engine and checks
// that detection, Inspect and Check agree with what was written.
func TestInspectors(t *testing.T) {
	for _, name := range testEngines() {
		e, _ := LookupEngine(name)
		ins, ok := e.(Inspector)
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			path := t.TempDir() + "/x.db"
			db, err := e.Open(path, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := load(context.Background(), db, sequence(1500), nopProgress{}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			header := make([]byte, 64)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Read(header)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !ins.Detect(header) {
				t.Error("engine does not recognise its own file")
			}
			if ins.Detect(make([]byte, 64)) {
				t.Error("engine claims a zero-filled header")
			}

			got, err := ins.Inspect(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.PageSize <= 0 || got.FileSize <= 0 || len(got.DB) == 0 {
				t.Errorf("inspection %+v", got)
			}
			if len(got.Buckets) != 1 || got.Buckets[0].Name != string(BucketName) {
				t.Fatalf("buckets %+v", got.Buckets)
			}
			keyN := slices.IndexFunc(got.Buckets[0].Stats, func(f Field) bool { return f.Name == "KeyN" })
			if keyN < 0 || got.Buckets[0].Stats[keyN].Value != 1500 {
				t.Errorf("bucket stats %+v", got.Buckets[0].Stats)
			}

			n, err := ins.Check(path, func(err error) { t.Errorf("check: %v", err) })
			if err != nil || n != 0 {
				t.Errorf("Check = %d, %v", n, err)
			}
		})
	}
}

// TestMemoryChildIgnoresParentRSS checks the reason the child reports its
// own peak: a parent holding a lot of memory must not inflate the figure
// (on Linux, wait4's ru_maxrss would include the parent's RSS at fork).
func TestMemoryChildIgnoresParentRSS(t *testing.T) {
	ballast := make([]byte, 128<<20)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	cfg := tinyConfig(t, RivetEngine)
	e, _ := LookupEngine(RivetEngine)
	env := &Env{Config: &cfg, Engine: e, Dir: t.TempDir(), rec: &recorder{}}
	rss, err := runMemoryChild(context.Background(), env, "")
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || rss > 64<<20 {
		t.Errorf("idle child peak RSS %d bytes while the parent holds 128 MiB", rss)
	}
	if ballast[4096] != 1 {
		t.Fatal("ballast lost")
	}
}

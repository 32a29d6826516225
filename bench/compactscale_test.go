package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestCompactionScaleTiny runs compaction-scale at 32 MiB on rivet and
// bbolt and checks that its rows exist and add up: counts and sizes, not
// times. As root it drops the page cache for the cold rows (the whole
// machine's); otherwise it checks the note that says why they are missing.
func TestCompactionScaleTiny(t *testing.T) {
	if !compactionScale.OnlyWhenNamed || !slices.Contains(OnlyWhenNamedWorkloads(), compactionScale.Name) {
		t.Fatal("compaction-scale must run only when named")
	}
	engines := []string{RivetEngine, BaselineEngine}
	cfg := tinyConfig(t, engines...)
	cfg.Workloads = []string{compactionScale.Name}
	cfg.Size = 32 << 20
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(figure, engine string) float64 {
		t.Helper()
		r, ok := find(rep.Results, compactionScale.Name, figure, engine)
		if !ok {
			t.Fatalf("%s: no %q row", engine, figure)
		}
		if r.Runs != 1 {
			t.Errorf("%s %q: %d runs, want 1", engine, figure, r.Runs)
		}
		return r.Median
	}
	const during = "during (bbolt: stopped): "
	coldSkipped := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "cold restart rows skipped") })

	loaded := float64(etcdRevisions(cfg.Size))
	for _, e := range engines {
		// Same history on every engine.
		if got := get("revisions loaded", e); got != loaded {
			t.Errorf("%s loaded %v revisions, want %v", e, got, loaded)
		}
		// Live at the end: the newer half, plus one revision per commit
		// the writer made before and during compaction.
		kept := loaded - float64(uint64(loaded)/2)
		wrote := get("before: writer commits", e) + get(during+"writer commits", e)
		live := get("live revisions at end", e)
		if live != kept+wrote {
			t.Errorf("%s: %v live revisions at the end, want %v kept + %v written", e, live, kept, wrote)
		}
		if get("before: writer commits", e) < 1 || get("before: reader Gets", e) < 1 {
			t.Errorf("%s: the writer or the reader did nothing before compaction", e)
		}
		// The oldest half was freed; compaction gives it back. rivet's
		// writer goes on during compaction and refills freed pages (as
		// it did before it), so its file need not shrink: what must hold
		// is that the file is little more than its live data afterwards.
		afterDeletes := get("file size after deletes", e)
		rightAfter := get("file size right after compaction", e)
		if e == BaselineEngine && !(rightAfter < afterDeletes) {
			t.Errorf("%s: file %v bytes after compaction, %v before", e, rightAfter, afterDeletes)
		}
		if r := get("file ÷ live, right after compaction", e); e == RivetEngine && r > 1.2 {
			t.Errorf("%s: file ÷ live right after compaction = %v, want ≤ 1.2", e, r)
		}
		liveBytes := get("live bytes at end", e)
		if min := live * (etcdRevKeySize + etcdValueMin); liveBytes < min {
			t.Errorf("%s: %v live bytes for %v revisions, want at least %v", e, liveBytes, live, min)
		}
		for _, when := range []string{"right after compaction", "after close + reopen"} {
			if r := get("file ÷ live, "+when, e); !(r >= 1) {
				t.Errorf("%s: file ÷ live %s = %v, want ≥ 1", e, when, r)
			}
		}
		if get("pages moved (rivet: CompactPagesRewritten; bbolt: pages of the copy)", e) < 1 ||
			get("compaction transactions (rivet: CompactSteps; bbolt: copy commits)", e) < 1 {
			t.Errorf("%s: compaction moved no page or committed nothing", e)
		}
		if coldSkipped {
			if _, ok := find(rep.Results, compactionScale.Name, "cold: keys passed", e); ok {
				t.Errorf("%s: cold rows despite the note that they were skipped", e)
			}
			continue
		}
		if got := get("cold: keys passed", e); got != live {
			t.Errorf("%s: the cold pass saw %v keys, want %v", e, got, live)
		}
		// The page cache was dropped: the pass through the map faults.
		if _, ok := majorFaults(); ok && get("cold: major faults (Open and pass)", e) < 1 {
			t.Errorf("%s: no major fault in a cold pass", e)
		}
	}
	if coldSkipped && dropPageCache() == nil {
		t.Error("cold rows skipped although the page cache can be dropped here")
	}

	// rivet compacts under the writer and the reader; bbolt's
	// defragmentation stops both, and each waits for all of it.
	if get(during+"writer commits", RivetEngine) < 1 || get(during+"reader Gets", RivetEngine) < 1 {
		t.Error("rivet: the writer or the reader did nothing during compaction")
	}
	wall := get("compaction wall time", BaselineEngine)
	for _, f := range []string{"writer commits/s", "writer commits", "reader Gets/s", "reader Gets"} {
		if got := get(during+f, BaselineEngine); got != 0 {
			t.Errorf("bbolt %s during defragmentation = %v, want 0", f, got)
		}
	}
	for _, f := range []string{"writer commit max", "reader Get max"} {
		if got := get(during+f, BaselineEngine); got != wall {
			t.Errorf("bbolt %s during defragmentation = %v, want its wall time %v", f, got, wall)
		}
	}
	if got := get("writer commits/s, during ÷ before", BaselineEngine); got != 0 {
		t.Errorf("bbolt writer commits/s during ÷ before = %v, want 0", got)
	}
	if r, _ := find(rep.Results, compactionScale.Name, "file ÷ live, after close + reopen", RivetEngine); r.Ratio == 0 {
		t.Error("rivet's file ÷ live row has no ratio to bbolt's")
	}
}

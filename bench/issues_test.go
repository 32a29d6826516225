package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rivetkv/rivet/testing/hostile"
	bolt "go.etcd.io/bbolt"
)

// Tests of the workloads built on bbolt users' reports (large-value,
// readers-under-writer, long-read, hostile-check): what each must say
// whatever the machine's speed. TestRunAllWorkloadsTiny runs them on every
// engine too.

// runTiny runs one workload at the tiny preset on rivet and bbolt.
func runTiny(t *testing.T, workload string, edit func(*Config)) *Report {
	t.Helper()
	cfg := tinyConfig(t, RivetEngine, BaselineEngine)
	cfg.Workloads = []string{workload}
	if edit != nil {
		edit(&cfg)
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// mustFind returns the row of figure for engine, failing the test if
// there is none.
func mustFind(t *testing.T, rep *Report, workload, figure, engine string) Result {
	t.Helper()
	r, ok := find(rep.Results, workload, figure, engine)
	if !ok {
		t.Fatalf("%s on %s: no %q row", workload, engine, figure)
	}
	return r
}

func TestLargeValueWorkload(t *testing.T) {
	const size = 20 << 20
	rep := runTiny(t, "large-value", func(c *Config) { c.ValueSizes = []Size{size} })
	for _, e := range []string{RivetEngine, BaselineEngine} {
		label := Size(size).String() + ": "
		if r := mustFind(t, rep, "large-value", label+"round trip succeeded", e); r.Median != 1 {
			t.Errorf("%s: a %s value did not round-trip (notes: %v)", e, Size(size), rep.Notes)
		}
		// The child holds the value it stores, and the file holds it too.
		if r := mustFind(t, rep, "large-value", label+"peak RSS", e); r.Median < size {
			t.Errorf("%s: peak RSS %v below the value's size", e, r.Median)
		}
		if r := mustFind(t, rep, "large-value", label+lvFileSize, e); r.Median < size {
			t.Errorf("%s: file size %v below the value's size", e, r.Median)
		}
		for _, f := range []string{lvPut, lvGet, lvReopen, lvGetReopen, lvCheck} {
			if r := mustFind(t, rep, "large-value", label+f, e); !(r.Median > 0) {
				t.Errorf("%s %q: %v", e, f, r.Median)
			}
		}
	}
}

// TestLargeValueChildFindsWrongValue: the round trip fails, and says so,
// when the value read back differs: the comparison can fail.
func TestLargeValueChildFindsWrongValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	e, _ := LookupEngine(RivetEngine)
	db, err := e.Open(path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := largeValueBytes(1 << 20)
	if err := db.Update(BucketName, []KV{{Key: largeValueKey, Value: want[:len(want)-8]}}); err != nil {
		t.Fatal(err)
	}
	equal, err := db.(ValueChecker).ValueEquals(BucketName, largeValueKey, want)
	if err != nil || equal {
		t.Fatalf("a value 8 bytes short compared equal (%v)", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReadersUnderWriterWorkload(t *testing.T) {
	rep := runTiny(t, "readers-under-writer", nil)
	for _, e := range []string{RivetEngine, BaselineEngine} {
		for _, mode := range readerModes {
			pre := mode.name + ": "
			for _, f := range []string{"reads/s", "writer commits/s"} {
				if r := mustFind(t, rep, "readers-under-writer", pre+f, e); !(r.Median > 0) {
					t.Errorf("%s %s%s: %v", e, pre, f, r.Median)
				}
			}
			// The paced run starts from the loaded file, so its writer
			// grows it (the saturating run may fit in room the first
			// left).
			if r := mustFind(t, rep, "readers-under-writer", pre+"file growth", e); mode.pause > 0 && !(r.Median > 0) {
				t.Errorf("%s %sthe writer did not grow the file", e, pre)
			}
			for _, fig := range []string{"read latency", "writer commit latency"} {
				var prev float64
				for _, q := range []string{"p50", "p99", "p99.9", "max"} {
					r := mustFind(t, rep, "readers-under-writer", pre+fig+" "+q, e)
					if !(r.Median > 0) || r.Median < prev {
						t.Errorf("%s %s%s %s: %v after %v", e, pre, fig, q, r.Median, prev)
					}
					prev = r.Median
				}
			}
		}
	}
}

func TestLongReadWorkload(t *testing.T) {
	rep := runTiny(t, "long-read", nil)
	for _, e := range []string{RivetEngine, BaselineEngine} {
		// The workload fails unless the copy opens, checks and matches.
		if r := mustFind(t, rep, "long-read", "copy opens, checks and matches the snapshot", e); r.Median != 1 {
			t.Errorf("%s: copy not verified", e)
		}
		// The throttle makes the copy last --duration (1 s): sleeping
		// cannot make it shorter.
		if r := mustFind(t, rep, "long-read", "copy time", e); r.Median < 0.9*float64(time.Second) {
			t.Errorf("%s: the copy took %v, not the throttled second", e, time.Duration(r.Median))
		}
		mustFind(t, rep, "long-read", "writer commit latency max", e)
	}
	// rivet's writer does not wait for the reader: it commits during the
	// copy. (bbolt's blocks when the file outgrows its map, bbolt #850.)
	if r := mustFind(t, rep, "long-read", "writer commits during the copy", RivetEngine); r.Median < 1 {
		t.Errorf("rivet made %v commits during a one-second copy", r.Median)
	}
}

// TestVerifyCopyRejectsOtherData: the copy check fails on a file that is
// not the snapshot, so a copy that "matches" means something.
func TestVerifyCopyRejectsOtherData(t *testing.T) {
	cfg := tinyConfig(t, RivetEngine)
	e, _ := LookupEngine(RivetEngine)
	env := &Env{Config: &cfg, Engine: e, Dir: t.TempDir(), rec: &recorder{}}
	db, err := env.Open("a.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := load(context.Background(), db, sequence(100), nopProgress{}); err != nil {
		t.Fatal(err)
	}
	pairs, sum, err := db.(Digester).Digest(BucketName)
	if err != nil || pairs != 100 {
		t.Fatalf("digest: %d pairs, %v", pairs, err)
	}
	if err := db.Update(BucketName, []KV{{Key: []byte("later"), Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := verifyCopy(env, env.Path("a.db"), pairs, sum); err == nil {
		t.Fatal("a file with one pair more than the snapshot passed as its copy")
	}
}

func TestHostileCheckWorkload(t *testing.T) {
	rep := runTiny(t, "hostile-check", func(c *Config) { c.Duration = 2 * time.Second })
	for _, shape := range hostile.Shapes {
		pre := string(shape) + ": "
		if r := mustFind(t, rep, "hostile-check", pre+"check finished", RivetEngine); r.Median != 1 {
			t.Errorf("rivet's check on a %s did not finish (notes %v)", shape, rep.Notes)
		}
		if r := mustFind(t, rep, "hostile-check", pre+"problems reported", RivetEngine); r.Median < 1 {
			t.Errorf("rivet's check on a %s reported nothing", shape)
		}
	}
	// A 20-level DAG has 194^20 (branches) or 110^20 (buckets) paths at
	// 4 KiB pages: bbolt's check, which follows every reference, cannot
	// finish in two seconds.
	for _, shape := range []hostile.Shape{hostile.BranchDAG, hostile.BucketDAG} {
		if r := mustFind(t, rep, "hostile-check", string(shape)+": check finished", BaselineEngine); r.Median != 0 {
			t.Errorf("bbolt's check on a 20-level %s finished", shape)
		}
	}
}

// TestDamageBboltShallow checks damageBbolt's pages with bbolt itself: on
// a two-level DAG, bbolt's reads reach the bottom leaf through the shared
// pages, and its Check finishes and reports the shared pages.
func TestDamageBboltShallow(t *testing.T) {
	for _, shape := range []hostile.Shape{hostile.BranchDAG, hostile.BucketDAG} {
		t.Run(string(shape), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.db")
			e, _ := LookupEngine(BaselineEngine)
			db, err := e.Open(path, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = load(context.Background(), db, sequence(5000), nopProgress{})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			img, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			const levels = 2
			if err := damageBbolt(img, string(BucketName), shape, levels); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, img, 0o600); err != nil {
				t.Fatal(err)
			}
			bdb, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer bdb.Close()
			var problems []string
			err = bdb.View(func(tx *bolt.Tx) error {
				b := tx.Bucket(BucketName)
				if shape == hostile.BucketDAG {
					for range levels {
						if b = b.Bucket([]byte("k0000")); b == nil {
							return errors.New("nested bucket k0000 missing")
						}
					}
				}
				if v := b.Get([]byte("k0000")); string(v) != "bottom" {
					return fmt.Errorf("bottom leaf's value: %q", v)
				}
				for err := range tx.Check() {
					problems = append(problems, err.Error())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(problems, "\n"), "multiple references") {
				t.Fatalf("bbolt's check did not report shared pages: %d problems, first %q", len(problems), problems[:min(1, len(problems))])
			}
		})
	}
}

// Child tasks for TestChildFailures: the test binary is the child too.
var (
	_ = registerChild("test-panic", func(map[string]string) (childResult, error) { panic("on purpose") })
	_ = registerChild("test-hang", func(map[string]string) (childResult, error) {
		time.Sleep(time.Hour)
		return childResult{}, nil
	})
	_ = registerChild("test-ok", func(args map[string]string) (childResult, error) {
		return childResult{Figures: map[string]float64{"n": float64(len(args["x"]))}}, nil
	})
)

func TestChildFailures(t *testing.T) {
	ctx := context.Background()
	res, err := runChild(ctx, "test-ok", map[string]string{"x": "abc"}, 0)
	if err != nil || res.Figures["n"] != 3 || res.PeakRSS <= 0 {
		t.Fatalf("ok child: %+v, %v", res, err)
	}
	_, err = runChild(ctx, "test-panic", nil, 0)
	var ce *childError
	if !errors.As(err, &ce) || ce.TimedOut {
		t.Fatalf("panicking child: %v", err)
	}
	if !strings.Contains(ce.Crash(), "on purpose") {
		t.Fatalf("panicking child's crash line %q (stderr %q)", ce.Crash(), ce.Stderr)
	}
	start := time.Now()
	_, err = runChild(ctx, "test-hang", nil, 500*time.Millisecond)
	if !errors.As(err, &ce) || !ce.TimedOut {
		t.Fatalf("hanging child: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("hanging child stopped after %v", d)
	}
}

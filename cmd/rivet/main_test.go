package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/bench"
)

// run executes the root command with args and returns stdout, stderr and
// the command's error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd(&out, &errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestBenchTiny(t *testing.T) {
	dir := t.TempDir()
	out, errOut, err := run(t, "bench", "--preset", "tiny", "--dir", dir, "--duration", "500ms", "--vs", "bbolt")
	if err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, errOut)
	}
	for _, col := range []string{"WORKLOAD", "FIGURE", "ENGINE", "MEDIAN", "P99/SPREAD", "VS BBOLT"} {
		if !strings.Contains(out, col) {
			t.Errorf("output lacks column %q:\n%s", col, out)
		}
	}
	for _, w := range bench.WorkloadNames() {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks workload %s", w)
		}
		if !strings.Contains(errOut, w+" on bbolt") {
			t.Errorf("stderr does not narrate %s:\n%s", w, errOut)
		}
	}
	// A buffer is not a terminal: no progress bar may be drawn into it.
	if strings.Contains(errOut, "\r") || strings.Contains(out, "\r") {
		t.Error("progress bar drawn into a non-terminal")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("bench left %d entries in --dir", len(left))
	}
}

func TestBenchRivetAlone(t *testing.T) {
	out, _, err := run(t, "bench", "--preset", "tiny", "--dir", t.TempDir(), "-q", "--workloads", "durable-writes,fragmented")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "WORKLOAD  ") || !strings.Contains(out, "P99/SPREAD") {
		t.Errorf("no table header:\n%s", out)
	}
	if strings.Contains(out, "VS BBOLT") || strings.Contains(out, "bbolt") {
		t.Errorf("rivet alone printed bbolt rows or ratios:\n%s", out)
	}
	for _, fig := range []string{"commit latency", "engine flushes/commit", "open"} {
		if !strings.Contains(lineWith(out, fig), "rivet") {
			t.Errorf("no rivet row for %q:\n%s", fig, out)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	out, errOut, err := run(t, "bench", "--preset", "tiny", "--dir", t.TempDir(), "--json", "-q",
		"--workloads", "durable-writes", "--commits", "20", "--runs", "2", "--vs", "bbolt")
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	if errOut != "" {
		t.Errorf("-q still printed to stderr: %q", errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if rep.Config.Commits != 20 || rep.Config.Runs != 2 || rep.Config.Keys != bench.Presets["tiny"].Keys {
		t.Errorf("flags did not override exactly their own preset fields: %+v", rep.Config)
	}
	ratios := 0
	for _, r := range rep.Results {
		if r.Workload != "durable-writes" {
			t.Errorf("unexpected workload row %+v", r)
		}
		if r.Ratio != 0 {
			ratios++
		}
	}
	if ratios == 0 {
		t.Error("no ratio to bbolt in the JSON report")
	}
}

func TestBenchEngineSelection(t *testing.T) {
	for _, tc := range []struct {
		f    benchFlags
		want string
	}{
		{benchFlags{}, "rivet"},
		{benchFlags{vs: []string{"bbolt"}}, "rivet,bbolt,bbolt-nofreelistsync"},
		{benchFlags{vs: []string{"BBOLT", "bbolt-nofreelistsync"}}, "rivet,bbolt,bbolt-nofreelistsync"},
		{benchFlags{vs: []string{"bbolt"}, engines: []string{"bbolt"}}, "bbolt"},
		{benchFlags{vs: []string{"modes"}}, "rivet,rivet-barrier,rivet-periodic,rivet-none,bbolt,bbolt-nosync"},
		{benchFlags{vs: []string{"bbolt", "Modes"}}, "rivet,bbolt,bbolt-nofreelistsync,rivet-barrier,rivet-periodic,rivet-none,bbolt-nosync"},
	} {
		if got := strings.Join(engineList(&tc.f), ","); got != tc.want {
			t.Errorf("engineList(%+v) = %s, want %s", tc.f, got, tc.want)
		}
	}
	if _, _, err := run(t, "bench", "--preset", "huge"); err == nil {
		t.Error("unknown preset accepted")
	}
}

// makeDB creates a small database with engine name: two buckets, the
// bench bucket with keys.
func makeDB(t *testing.T, name string) string {
	t.Helper()
	e, err := bench.LookupEngine(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".db")
	db, err := e.Open(path, bench.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kvs := []bench.KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("c"), Value: nil}}
	if err := db.Update(bench.BucketName, kvs); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// inspectableEngines are the engines stats and check are tested on: the
// file formats the tool reads.
func inspectableEngines() []string {
	return []string{bench.RivetEngine, bench.BaselineEngine}
}

func TestStats(t *testing.T) {
	for _, name := range inspectableEngines() {
		t.Run(name, func(t *testing.T) {
			path := makeDB(t, name)
			out, _, err := run(t, "stats", path)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(path)
			for _, want := range []string{"format", name, "page size", "file size", "DB stats", "FreePageN",
				"bucket bench", "KeyN", "  " + "TxN", strings.TrimSpace(bench.UnitBytes.Format(float64(fi.Size())))} {
				if !strings.Contains(out, want) {
					t.Errorf("stats output lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(out, "KeyN") || !strings.Contains(lineWith(out, "KeyN"), "3") {
				t.Errorf("KeyN line %q, want 3 keys", lineWith(out, "KeyN"))
			}

			js, _, err := run(t, "stats", "--json", "--engine", name, path)
			if err != nil {
				t.Fatal(err)
			}
			var ins bench.Inspection
			if err := json.Unmarshal([]byte(js), &ins); err != nil {
				t.Fatal(err)
			}
			if ins.Engine != name || ins.FileSize != fi.Size() || ins.PageSize <= 0 || len(ins.Buckets) != 1 {
				t.Errorf("JSON inspection %+v", ins)
			}
		})
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func TestCheck(t *testing.T) {
	for _, name := range inspectableEngines() {
		t.Run(name, func(t *testing.T) {
			path := makeDB(t, name)
			out, _, err := run(t, "check", path)
			if err != nil {
				t.Fatalf("check of a good file: %v\n%s", err, out)
			}
			if !strings.Contains(out, "ok ("+name+")") {
				t.Errorf("check output %q", out)
			}
		})
	}
}

// fakeEngine is an inspectable engine whose check always finds two
// problems, to test the failing path without corrupting a real file (bbolt
// panics on many corruptions rather than reporting them).
type fakeEngine struct{}

var errFake = errors.New("fake engine does not open databases")

func (fakeEngine) Name() string                                     { return "fake" }
func (fakeEngine) Open(string, bench.OpenOptions) (bench.DB, error) { return nil, errFake }
func (fakeEngine) Detect(h []byte) bool                             { return bytes.HasPrefix(h, []byte("FAKEDB")) }
func (fakeEngine) Inspect(string) (*bench.Inspection, error)        { return nil, errFake }
func (fakeEngine) Check(_ string, report func(error)) (int, error) {
	report(errors.New("page 7: bad checksum"))
	report(errors.New("page 9: unreachable"))
	return 2, nil
}

func init() { bench.Register(fakeEngine{}) }

func TestCheckReportsProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fake.db")
	if err := os.WriteFile(path, []byte("FAKEDB and then some"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, "check", path)
	if err == nil || !strings.Contains(err.Error(), "2 problem(s)") {
		t.Errorf("check error = %v, want 2 problems", err)
	}
	if !strings.Contains(out, "page 7: bad checksum\n") || !strings.Contains(out, "page 9: unreachable\n") {
		t.Errorf("problems not printed one per line:\n%s", out)
	}
}

func TestUnknownFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte{0xAB}, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"stats", "check"} {
		for _, p := range []string{junk, empty} {
			if _, _, err := run(t, cmd, p); err == nil || !strings.Contains(err.Error(), "not a database file") {
				t.Errorf("%s %s: %v", cmd, filepath.Base(p), err)
			}
		}
		if _, _, err := run(t, cmd, filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s on a missing file: %v", cmd, err)
		}
		if _, _, err := run(t, cmd); err == nil {
			t.Errorf("%s without a file accepted", cmd)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rivet ", "library github.com/rivetkv/rivet", "go go1.", "bench engines", "bbolt"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

// TestCompactCommand: a rivet file grown and then emptied to a few keys
// shrinks in place; its data survive; a file another process (here: this
// one) holds open is refused with a clear message.
func TestCompactCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < 20000; start += 1000 {
		if err := db.Update(func(tx *rivet.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := start; i < start+1000; i++ {
				if err := b.Put([]byte(fmt.Sprintf("k%06d", i)), bytes.Repeat([]byte("v"), 300)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *rivet.Tx) error {
		b := tx.Bucket([]byte("b"))
		for i := 0; i < 20000; i++ {
			if i%1000 != 0 {
				if err := b.Delete([]byte(fmt.Sprintf("k%06d", i))); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Held open: refused.
	if _, _, err := run(t, "compact", path); err == nil || !strings.Contains(err.Error(), "open in another process") {
		t.Fatalf("compact of a file held open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	out, _, err := run(t, "compact", path)
	if err != nil {
		t.Fatalf("compact: %v\n%s", err, out)
	}
	after, _ := os.Stat(path)
	t.Logf("%s", strings.TrimSpace(out))
	if after.Size() > before.Size()/4 {
		t.Fatalf("file %d -> %d bytes: not compacted", before.Size(), after.Size())
	}
	db, err = rivet.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *rivet.Tx) error {
		n := 0
		if err := tx.Bucket([]byte("b")).ForEach(func(k, v []byte) error { n++; return nil }); err != nil {
			return err
		}
		if n != 20 {
			return fmt.Errorf("%d keys after compact, want 20", n)
		}
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/bench"
	bolt "go.etcd.io/bbolt"
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
		if slices.Contains(bench.OnlyWhenNamedWorkloads(), w) {
			if strings.Contains(errOut, w+" on ") {
				t.Errorf("%s ran without being named", w)
			}
			continue
		}
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
			before := fileDigest(t, path)
			out, errOut, code := runBin(t, "stats", path)
			wantCode(t, code, 0, out, errOut)
			fi, _ := os.Stat(path)
			for _, want := range []string{"(" + name + ")", "free pages", "3 in 1 buckets (1 top-level)", "fill", sizeString(fi.Size()),
				"BUCKET", string(bench.BucketName)} {
				if !strings.Contains(out, want) {
					t.Errorf("stats output lacks %q:\n%s", want, out)
				}
			}
			js, errOut, code := runBin(t, "stats", "--json", path)
			wantCode(t, code, 0, js, errOut)
			var st fileStats
			if err := json.Unmarshal([]byte(js), &st); err != nil {
				t.Fatal(err)
			}
			// Both engines keep a bucket this small inline in its parent:
			// no pages of its own, so no fill to compute.
			if st.Format != name || st.FileSize != fi.Size() || st.PageSize <= 0 || len(st.Buckets) != 1 || st.Total.Keys != 3 ||
				st.Total.Fill < 0 || st.Total.Fill > 1 || st.Pages != fi.Size()/int64(st.PageSize) {
				t.Errorf("JSON stats %+v", st)
			}
			if fileDigest(t, path) != before {
				t.Error("stats changed the file")
			}
		})
	}
}

// TestStatsTopLevelValue: a plain value at the top level (Tx.ForEach gives
// it a nil bucket) is not a bucket to report, and does not stop stats.
func TestStatsTopLevelValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "top.db")
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *rivet.Tx) error {
		if err := tx.Cursor().Bucket().Put([]byte("plain"), []byte("value")); err != nil {
			return err
		}
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	js, errOut, code := runBin(t, "stats", "--json", path)
	wantCode(t, code, 0, js, errOut)
	var st fileStats
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Buckets) != 1 || st.Buckets[0].Name != "b" {
		t.Errorf("stats of a file with a top-level value: buckets %+v", st.Buckets)
	}
}

func TestCheck(t *testing.T) {
	for _, name := range inspectableEngines() {
		t.Run(name, func(t *testing.T) {
			path := makeDB(t, name)
			before := fileDigest(t, path)
			out, errOut, code := runBin(t, "check", path)
			wantCode(t, code, 0, out, errOut)
			if !strings.Contains(out, "ok ("+name+")") {
				t.Errorf("check output %q", out)
			}
			if fileDigest(t, path) != before {
				t.Error("check changed the file")
			}
		})
	}
}

// TestDamagedFiles: stats, check and dump on damaged files report damage
// in one line with exit code 1 — never a panic's stack trace — for a
// truncated bbolt file (bbolt asserts on it) and a rivet file with a
// flipped byte in a leaf.
func TestDamagedFiles(t *testing.T) {
	bboltPath := filepath.Join(t.TempDir(), "trunc.bbolt")
	bdb, err := bolt.Open(bboltPath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		for i := 0; err == nil && i < 20000; i++ {
			err = b.Put([]byte(fmt.Sprintf("k%06d", i)), make([]byte, 100))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	if err := os.Truncate(bboltPath, 1<<20); err != nil {
		t.Fatal(err)
	}

	rivetPath := filepath.Join(t.TempDir(), "flipped.rivet")
	rdb, err := rivet.Open(rivetPath, 0o600, &rivet.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Update(func(tx *rivet.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		for i := 0; err == nil && i < 2000; i++ {
			err = b.Put([]byte(fmt.Sprintf("k%06d", i)), make([]byte, 100))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	flipLeafByte(t, rivetPath)

	for _, path := range []string{bboltPath, rivetPath} {
		for _, cmd := range []string{"stats", "check", "dump"} {
			out, errOut, code := runBin(t, cmd, path)
			wantCode(t, code, 1, out, errOut)
			if strings.Contains(errOut+out, "goroutine ") || strings.Contains(errOut+out, ".go:") {
				t.Errorf("%s %s printed a stack trace:\n%s%s", cmd, filepath.Base(path), out, errOut)
			}
			if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines > 1 {
				t.Errorf("%s %s: %d error lines:\n%s", cmd, filepath.Base(path), lines, errOut)
			}
			if !strings.Contains(errOut+out, "damaged") && !strings.Contains(errOut+out, "corrupt") && !strings.Contains(errOut, "problem(s) found") {
				t.Errorf("%s %s does not say the file is damaged:\n%s%s", cmd, filepath.Base(path), out, errOut)
			}
		}
	}
}

// flipLeafByte damages the header of the first leaf page after the
// metas of a 4 KiB-page rivet file: damage a parent's checksum catches.
func flipLeafByte(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for id := int64(2); ; id++ {
		if _, err := f.ReadAt(buf, id*4096); err != nil {
			t.Fatal("no leaf page found")
		}
		if buf[0] == 3 && buf[1] == 0 { // page type 3: leaf (docs/design.md §2.1)
			buf[8] ^= 0xff // the txid in its header: the parent expects another
			if _, err := f.WriteAt(buf, id*4096); err != nil {
				t.Fatal(err)
			}
			return
		}
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

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

package prometheus

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rivetkv/rivet"
)

func openDB(t *testing.T) *rivet.DB {
	t.Helper()
	db, err := rivet.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// scrape serves reg through promhttp and returns the text exposition.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// value returns the value of the sample named name (with labels) in a
// text exposition.
func value(t *testing.T, text, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no sample %s in:\n%s", name, text)
	return 0
}

// TestScrape: the collector's metrics pass Prometheus's own lint, and a
// scrape over HTTP shows the commits, flushes, bytes and file size the DB
// did, with the constant labels.
func TestScrape(t *testing.T) {
	db := openDB(t)
	defer db.Close()
	c := NewCollector(db, Options{ConstLabels: prometheus.Labels{"db": "test"}})
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	before := scrape(t, reg)
	for i := 0; i < 5; i++ {
		if err := db.Update(func(tx *rivet.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, make([]byte, 100))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A small commit's pages reach the file at the next sync point
	// (docs/design.md §3.9 in the library).
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	after := scrape(t, reg)
	_ = tx.Rollback()
	const l = `{db="test"}`
	if d := value(t, after, "rivet_commits_total"+l) - value(t, before, "rivet_commits_total"+l); d != 5 {
		t.Errorf("commits_total grew by %v, want 5", d)
	}
	// Each durable commit flushes the journal or the file.
	flushes := value(t, after, "rivet_flushes_total"+l) - value(t, before, "rivet_flushes_total"+l)
	journal := value(t, after, "rivet_journal_writes_total"+l) - value(t, before, "rivet_journal_writes_total"+l)
	if flushes+journal < 5 || journal < 1 {
		t.Errorf("flushes_total grew by %v and journal_writes_total by %v over 5 durable commits", flushes, journal)
	}
	if d := value(t, after, "rivet_journal_records_total"+l) - value(t, before, "rivet_journal_records_total"+l); d < 1 || d > 5 {
		t.Errorf("journal_records_total grew by %v over 5 durable commits", d)
	}
	if d := value(t, after, "rivet_written_bytes_total"+l) - value(t, before, "rivet_written_bytes_total"+l); d < 5*4096 {
		t.Errorf("written_bytes_total grew by %v", d)
	}
	if v := value(t, after, "rivet_read_transactions_open"+l); v != 1 {
		t.Errorf("read_transactions_open = %v with one reader", v)
	}
	if v := value(t, after, "rivet_file_size_bytes"+l); v < 4*4096 {
		t.Errorf("file_size_bytes = %v", v)
	}
	if v := value(t, after, "rivet_latched"+l); v != 0 {
		t.Errorf("latched = %v on a healthy DB", v)
	}
	for _, want := range []string{"# TYPE rivet_commits_total counter", "# TYPE rivet_free_pages gauge", "# HELP rivet_pending_pages "} {
		if !strings.Contains(after, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// TestScrapeDuringCompaction: while a compaction runs, a scrape shows it
// running with its progress; after it, not running, and the longest hold
// of the writer lock it took.
func TestScrapeDuringCompaction(t *testing.T) {
	db := openDB(t)
	defer db.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(db, Options{}))
	val := make([]byte, 300)
	for start := 0; start < 20000; start += 2000 {
		if err := db.Update(func(tx *rivet.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := start; i < start+2000; i++ {
				if err := b.Put([]byte(strconv.Itoa(1000000+i)), val); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *rivet.Tx) error {
		c := tx.Bucket([]byte("b")).Cursor()
		i := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if i%10 != 0 {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			i++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var during []string
	if _, err := db.CompactWith(t.Context(), &rivet.CompactOptions{Progress: func(p rivet.CompactProgress) {
		if p.Phase != "cut" && p.ToMove > 0 && len(during) < 3 {
			during = append(during, scrape(t, reg))
		}
	}}); err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("the compaction reported no progress before its cut")
	}
	for _, text := range during {
		if v := value(t, text, "rivet_compact_running"); v != 1 {
			t.Errorf("compact_running = %v during a compaction", v)
		}
		moved, toMove := value(t, text, "rivet_compact_moved_bytes"), value(t, text, "rivet_compact_to_move_bytes")
		if toMove <= 0 || moved > toMove {
			t.Errorf("during a compaction: moved %v of %v bytes", moved, toMove)
		}
	}
	after := scrape(t, reg)
	if v := value(t, after, "rivet_compact_running"); v != 0 {
		t.Errorf("compact_running = %v after the compaction", v)
	}
	if v := value(t, after, "rivet_compact_longest_hold_seconds"); v <= 0 {
		t.Errorf("compact_longest_hold_seconds = %v after a compaction", v)
	}
}

// TestClosedDBReportsNothing: scraping after Close yields no samples and
// no panic.
func TestClosedDBReportsNothing(t *testing.T) {
	db := openDB(t)
	c := NewCollector(db, Options{Namespace: "app_store"})
	if n := testutil.CollectAndCount(c); n < 20 {
		t.Fatalf("%d metrics from an open DB", n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d metrics from a closed DB", n)
	}
}

package rivet

import (
	"sync"
	"testing"
)

// TestReaderStats: the counters read transactions and commits keep
// without db.mu — TxN, OpenTxN, the read transactions' TxStats and
// Commits — count exactly, while readers, a writer and Stats run at once,
// and keep their values after Close.
func TestReaderStats(t *testing.T) {
	db := openTestDB(t, nil)
	put := func(i int) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := db.Stats()
	put(0)
	old, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	put(1)
	cur, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	if s := db.Stats(); s.OpenTxN != 2 || s.TxN-before.TxN != 2 || s.Commits-before.Commits != 2 {
		t.Fatalf("two readers open on two states after two commits: OpenTxN %d, TxN +%d, Commits +%d", s.OpenTxN, s.TxN-before.TxN, s.Commits-before.Commits)
	}
	for _, tx := range []*Tx{old, cur} {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if s := db.Stats(); s.OpenTxN != 0 {
		t.Fatalf("OpenTxN %d after both readers ended", s.OpenTxN)
	}

	const readers, views, commits = 4, 500, 50
	start := db.Stats()
	var wg sync.WaitGroup
	cursors := make([]int64, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range views {
				if err := db.View(func(tx *Tx) error {
					tx.Bucket([]byte("b")).Cursor().First()
					cursors[r] += tx.Stats().CursorCount
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			if s := db.Stats(); s.OpenTxN < 0 || s.OpenTxN > readers {
				t.Errorf("OpenTxN %d with %d readers", s.OpenTxN, readers)
				return
			}
		}
	}()
	for i := range commits {
		put(2 + i)
	}
	wg.Wait()
	end := db.Stats()
	d := end.Sub(&start)
	var wantCursors int64
	for _, c := range cursors {
		wantCursors += c
	}
	if d.TxN != readers*views || d.Commits != commits || end.OpenTxN != 0 {
		t.Fatalf("TxN +%d (want %d), Commits +%d (want %d), OpenTxN %d (want 0)", d.TxN, readers*views, d.Commits, commits, end.OpenTxN)
	}
	// Each put's write transaction creates cursors of its own.
	if got := d.TxStats.GetCursorCount(); wantCursors < readers*views || got < wantCursors {
		t.Fatalf("CursorCount +%d, the read transactions alone made %d (at least %d)", got, wantCursors, readers*views)
	}
	if d.TxStats.GetWrite() < commits {
		t.Fatalf("Write +%d over %d commits", d.TxStats.GetWrite(), commits)
	}

	mustCheck(t, db.DB)
	last := db.Stats()
	if err := db.DB.Close(); err != nil {
		t.Fatal(err)
	}
	closed := db.Stats()
	if closed.TxN != last.TxN || closed.Commits != last.Commits || closed.OpenTxN != 0 || closed.TxStats != last.TxStats {
		t.Fatalf("Close changed the counters: TxN %d -> %d, Commits %d -> %d, OpenTxN %d", last.TxN, closed.TxN, last.Commits, closed.Commits, closed.OpenTxN)
	}
}

package rivet

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// TestRunListsReleased checks what a write transaction leaves behind in the
// DB's reused run lists: no references to its page buffers (so they are
// garbage once written), and no list at all after a commit too large to
// keep one for.
func TestRunListsReleased(t *testing.T) {
	db := openTestDB(t, nil)
	put := func(n, size int) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := range n {
				k := make([]byte, 8)
				binary.BigEndian.PutUint64(k, uint64(i))
				if err := b.Put(k, make([]byte, size)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	empty := func(what string) {
		t.Helper()
		for i, r := range db.treeRuns[:cap(db.treeRuns)] {
			if r.Data != nil {
				t.Fatalf("%s: tree run list slot %d still holds a page buffer", what, i)
			}
		}
	}

	put(10, 100)
	if cap(db.treeRuns) == 0 {
		t.Fatal("a small commit left no run list to reuse")
	}
	empty("small commit")

	// About 1,000-byte values, three to a 4 KiB leaf: thousands of runs.
	put(6000, 1000)
	if db.treeRuns != nil {
		t.Fatalf("a commit of thousands of runs left a list of capacity %d", cap(db.treeRuns))
	}
	empty("large commit")

	// A rolled-back transaction also gives its runs back.
	tx, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Bucket([]byte("b")).Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if tx.env.Runs != nil {
		t.Fatal("a rolled-back transaction still holds its run list")
	}
	empty("rollback")
	put(10, 100)
	empty("small commit after a large one")
}

// TestSparesReused checks that the buffers of written multi-page runs are
// kept for the next write transaction: a commit that rewrites a leaf of
// two pages (one 6,000-byte value) allocates far less than the 8 KiB a
// new buffer for it would take. Compaction steps, which rewrite packed
// leaves of up to eight pages, depend on it to allocate little. The
// commits here flush the file (NoJournal), so they write their pages at
// once; deferred pages (docs/design.md §3.9) keep their buffers.
func TestSparesReused(t *testing.T) {
	db := openTestDB(t, &Options{NoJournal: true})
	v := make([]byte, 6000)
	put := func() {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			v[0]++
			return b.Put([]byte("k"), v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		put()
	}
	if db.spares.Pages() == 0 {
		t.Fatal("no buffer kept after commits of a two-page leaf")
	}
	const commits = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range commits {
		put()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / commits; per >= 6<<10 {
		t.Fatalf("a commit rewriting a two-page leaf allocated %d bytes; a kept buffer would leave well under 6 KiB", per)
	}
}

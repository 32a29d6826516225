package rivet

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestDeferredPagesOutliveReaders: a value a reader got from a page held in
// the dirty table (docs/design.md §3.9) keeps its bytes while the reader
// is open, however many commits and sync points follow: the page's buffer
// goes back to the spares only once no reader that could have read it is
// left. The commits that follow rewrite the same leaf, so without that
// rule a recycled buffer would be overwritten under the reader.
func TestDeferredPagesOutliveReaders(t *testing.T) {
	for _, opts := range []*Options{{NoSync: true}, nil} {
		db := openTestDB(t, opts)
		// A fresh file's first commits are made durable by sync points
		// (the journal is trusted from the first one on).
		if err := db.Update(func(tx *Tx) error {
			_, err := tx.CreateBucket([]byte("b"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Sync(); err != nil {
			t.Fatal(err)
		}
		want := bytes.Repeat([]byte("v"), 200)
		if err := db.Update(func(tx *Tx) error { return tx.Bucket([]byte("b")).Put([]byte("k"), want) }); err != nil {
			t.Fatal(err)
		}
		if db.pager.DeferredPages() == 0 {
			t.Fatalf("%v: a one-key commit deferred no page", db.durability())
		}
		tx, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		// Ended before the cleanup's Close, which waits for readers, on
		// every path out of the test.
		defer func() { _ = tx.Rollback() }()
		got := tx.Bucket([]byte("b")).Get([]byte("k"))
		if !bytes.Equal(got, want) {
			t.Fatal("the reader does not see the deferred value")
		}
		for i := 0; i < 200; i++ {
			if err := db.Update(func(tx *Tx) error {
				return tx.Bucket([]byte("b")).Put([]byte("k"), bytes.Repeat([]byte{byte(i)}, 200))
			}); err != nil {
				t.Fatal(err)
			}
			if i%20 == 0 {
				if err := db.Sync(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if len(db.retired) == 0 && db.spares.Pages() == 0 {
			t.Fatal("no buffer of a deferred run came back: the test exercises nothing")
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("the open reader's value changed under it: %q", got[:8])
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoneWritesDeferredPagesBack: commits that wait for no flush hand the
// dirty table to a background write-back once it passes a quarter of its
// bound, so the table drains without a sync point and without a commit
// that writes every page while it holds the writer lock.
func TestNoneWritesDeferredPagesBack(t *testing.T) {
	db := openTestDB(t, &Options{NoSync: true})
	if err := db.Update(func(tx *Tx) error {
		_, err := tx.CreateBucket([]byte("b"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	quarter := maxDeferredBytes / 4 / int64(db.pageSize)
	value := bytes.Repeat([]byte("v"), 1024)
	passed := false
	for i := 0; i < 200_000 && !passed; i++ {
		if err := db.Update(func(tx *Tx) error {
			return tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "%08d", i), value)
		}); err != nil {
			t.Fatal(err)
		}
		passed = db.writingBack.Load() || db.pager.DeferredPages() > quarter
	}
	if !passed {
		t.Fatalf("the dirty table never passed a quarter of its bound (%d pages)", quarter)
	}
	deadline := time.Now().Add(30 * time.Second)
	for db.writingBack.Load() || db.pager.DeferredPages() > quarter {
		if time.Now().After(deadline) {
			t.Fatalf("%d pages still deferred after 30 s, quarter of the bound %d", db.pager.DeferredPages(), quarter)
		}
		time.Sleep(time.Millisecond)
	}
	if st := db.Stats(); st.PagesWritten < quarter/2 {
		t.Fatalf("%d pages written, want the table's pages (%d+)", st.PagesWritten, quarter/2)
	}
	mustCheck(t, db.DB)
}

// spreadCommit updates every step-th of keys keys ("k%06d") in one write
// transaction: each update lands in another leaf, so the commit makes far
// more than maxDeferredCommitPages pages.
func spreadCommit(t *testing.T, db *testDB, keys, step int, fill byte) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		for i := 0; i < keys; i += step {
			if err := b.Put([]byte(fmt.Sprintf("k%06d", i)), bytes.Repeat([]byte{fill}, 100)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// loadSpread makes bucket "b" of keys keys of 100 bytes and flushes it.
func loadSpread(t *testing.T, db *testDB, keys int) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := 0; i < keys; i++ {
			if err := b.Put([]byte(fmt.Sprintf("k%06d", i)), bytes.Repeat([]byte{'v'}, 100)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestJournaledCommitsDeferLargeCommits: a journaled Full commit that
// rewrote pages defers them to the next checkpoint however many there are
// (up to maxDeferredJournalPages), since the journal, not the file, makes
// it durable; a None commit of the same size writes them at commit, as it
// is mostly pages no later commit rewrites before a sync point that may
// be far away; a load that adds pages writes them at commit in both.
func TestJournaledCommitsDeferLargeCommits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   *Options
		defers bool
	}{
		{"journal", nil, true},
		{"none", &Options{NoSync: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDB(t, tc.opts)
			loadSpread(t, db, 20_000)
			// The first commit after the flush may make a sync point of
			// its own (the journal is trusted from one on).
			spreadCommit(t, db, 20_000, 1000, 'a')
			if err := db.Sync(); err != nil {
				t.Fatal(err)
			}
			written, deferred := db.Stats().PagesWritten, db.pager.DeferredPages()
			spreadCommit(t, db, 20_000, 100, 'b')
			wrote := db.Stats().PagesWritten - written
			grew := db.pager.DeferredPages() - deferred
			if tc.defers {
				if wrote != 0 || grew <= maxDeferredCommitPages {
					t.Fatalf("journaled commit: %d pages written at commit, %d deferred; want none written and more than %d deferred", wrote, grew, maxDeferredCommitPages)
				}
			} else if wrote <= maxDeferredCommitPages || grew != 0 {
				t.Fatalf("None commit: %d pages written at commit, %d deferred; want more than %d written and none deferred", wrote, grew, maxDeferredCommitPages)
			}
			// A load of new keys in key order adds pages and frees few:
			// no mode defers it.
			written, deferred = db.Stats().PagesWritten, db.pager.DeferredPages()
			if err := db.Update(func(tx *Tx) error {
				b := tx.Bucket([]byte("b"))
				for i := 0; i < 2000; i++ {
					if err := b.Put([]byte(fmt.Sprintf("z%06d", i)), bytes.Repeat([]byte{'z'}, 100)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if wrote, grew := db.Stats().PagesWritten-written, db.pager.DeferredPages()-deferred; wrote <= maxDeferredCommitPages || grew != 0 {
				t.Fatalf("load: %d pages written at commit, %d deferred; want more than %d written and none deferred", wrote, grew, maxDeferredCommitPages)
			}
			spreadCommit(t, db, 20_000, 100, 'c')
			if err := db.Sync(); err != nil {
				t.Fatal(err)
			}
			if n := db.pager.DeferredPages(); n != 0 {
				t.Fatalf("%d pages still deferred after Sync", n)
			}
			if err := db.View(func(tx *Tx) error {
				for i := 0; i < 20_000; i += 100 {
					if v := tx.Bucket([]byte("b")).Get([]byte(fmt.Sprintf("k%06d", i))); !bytes.Equal(v, bytes.Repeat([]byte{'c'}, 100)) {
						return fmt.Errorf("key %d: %.8q", i, v)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestJournalDefers: a small journaled commit always defers; a large one
// up to maxDeferredJournalPages, only if it freed at least half as many
// pages as it wrote, and only while the table stays under half its bound
// with it.
func TestJournalDefers(t *testing.T) {
	const ps = 4096
	half := int64(maxDeferredBytes / 2 / ps)
	for _, tc := range []struct {
		pages    int
		freed    uint64
		deferred int64
		want     bool
	}{
		{1, 0, 0, true},
		{maxDeferredCommitPages, 0, half * 3, true},
		{maxDeferredCommitPages + 1, maxDeferredCommitPages + 1, 0, true},
		{maxDeferredCommitPages + 1, 0, 0, false},
		{100, 50, 0, true},
		{100, 49, 0, false},
		{maxDeferredJournalPages, maxDeferredJournalPages, 0, true},
		{maxDeferredJournalPages + 1, maxDeferredJournalPages + 1, 0, false},
		{100, 100, half - 100, true},
		{100, 100, half - 99, false},
	} {
		if got := journalDefers(tc.pages, tc.freed, tc.deferred, ps); got != tc.want {
			t.Errorf("journalDefers(%d pages, %d freed, %d deferred) = %v, want %v", tc.pages, tc.freed, tc.deferred, got, tc.want)
		}
	}
}

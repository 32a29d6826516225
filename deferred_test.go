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

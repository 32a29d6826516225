package rivet

import (
	"bytes"
	"testing"
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

package rivet

import (
	"testing"
)

// TestEndedReadTxAfterStateReuse: a read transaction's state is recycled
// when it ends. Its handle, buckets and cursors must then behave as an
// ended transaction's — nil from every move, ErrTxClosed — and must not
// see the transaction that reuses the state, even while that one runs.
func TestEndedReadTxAfterStateReuse(t *testing.T) {
	db := openTestDB(t, nil)
	defer db.Close()
	put := func(k, v string) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("a"))
			if err != nil {
				return err
			}
			return b.Put([]byte(k), []byte(v))
		}); err != nil {
			t.Fatal(err)
		}
	}
	put("k1", "v1")
	for round := 0; round < 50; round++ {
		old, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		oldID := old.ID()
		rootCur := old.Cursor()
		b := old.Bucket([]byte("a"))
		bc := b.Cursor()
		if k, _ := bc.First(); string(k) != "k1" {
			t.Fatalf("live cursor: %q", k)
		}
		if k, _ := rootCur.First(); string(k) != "a" {
			t.Fatalf("live root cursor: %q", k)
		}
		if err := old.Rollback(); err != nil {
			t.Fatal(err)
		}
		// Begin again on this goroutine: sync.Pool hands the state just
		// put back to the next Get on the same P.
		cur, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := cur.Bucket([]byte("a")).Cursor().First(); string(k) != "k1" {
			t.Fatalf("new transaction: %q", k)
		}
		if k, _ := bc.First(); k != nil {
			t.Fatalf("cursor of the ended transaction moved to %q", k)
		}
		if k, _ := rootCur.Last(); k != nil {
			t.Fatalf("root cursor of the ended transaction moved to %q", k)
		}
		if rootCur.Bucket() != nil && rootCur.Bucket().Get([]byte("a")) != nil {
			t.Fatal("root cursor's bucket reads after its transaction ended")
		}
		if v := b.Get([]byte("k1")); v != nil {
			t.Fatalf("bucket of the ended transaction read %q", v)
		}
		if old.Bucket([]byte("a")) != nil || old.DB() != nil || old.Rollback() != ErrTxClosed {
			t.Fatal("ended transaction still answers")
		}
		if st := old.Stats(); old.ID() != oldID || old.Size() == 0 || st.GetCursorCount() != 2 {
			t.Fatalf("ended transaction's ID %d (was %d), Size %d, cursors %d", old.ID(), oldID, old.Size(), st.GetCursorCount())
		}
		if err := cur.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, db.DB)
}

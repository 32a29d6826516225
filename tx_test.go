package rivet

import (
	"fmt"
	"testing"

	"github.com/rivetkv/rivet/internal/btree"
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

// TestReadTxCursorStacksBounded opens many cursors in one read transaction:
// the transaction lends at most btree.MaxLentStacks stacks (the others are
// the cursors' own, which the garbage collector takes), and every cursor
// keeps its own position, whether its stack is lent or not.
func TestReadTxCursorStacksBounded(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	const keys = 3000
	key := func(i int) []byte { return []byte(fmt.Sprintf("%05d", i)) }
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range keys {
			if err := b.Put(key(i), key(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		// 40 cursors alive at once, at different places (lent and own
		// stacks mixed), then 10,000 short-lived ones.
		cursors := make([]*Cursor, 40)
		for i := range cursors {
			cursors[i] = b.Cursor()
			if k, _ := cursors[i].Seek(key(i * 50)); string(k) != string(key(i*50)) {
				return fmt.Errorf("cursor %d: Seek gave %q", i, k)
			}
		}
		for range 10_000 {
			if k, _ := b.Cursor().Seek(key(keys / 2)); k == nil {
				return fmt.Errorf("a short-lived cursor found nothing")
			}
		}
		if n := len(tx.envStore.CursorStacks); n > btree.MaxLentStacks {
			return fmt.Errorf("the transaction holds %d cursor stacks, want at most %d", n, btree.MaxLentStacks)
		}
		for step := 1; step <= 3; step++ {
			for i, c := range cursors {
				if k, _ := c.Next(); string(k) != string(key(i*50+step)) {
					return fmt.Errorf("cursor %d, step %d: Next gave %q, want %q", i, step, k, key(i*50+step))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTxForEachVisitsTopLevelValues: a plain value stored at the top level
// (through Tx.Cursor().Bucket(), which bbolt allows) is visited by
// Tx.ForEach with a nil bucket, as bbolt does.
func TestTxForEachVisitsTopLevelValues(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		if _, err := tx.CreateBucket([]byte("a")); err != nil {
			return err
		}
		if err := tx.Cursor().Bucket().Put([]byte("b"), []byte("value")); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte("c"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		var got []string
		if err := tx.ForEach(func(name []byte, b *Bucket) error {
			got = append(got, fmt.Sprintf("%s:%t", name, b != nil))
			return nil
		}); err != nil {
			return err
		}
		if want := "[a:true b:false c:true]"; fmt.Sprint(got) != want {
			t.Errorf("Tx.ForEach visited %v, want %s", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSequencesAndOnCommit(t *testing.T) {
	db := openTestDB(t, nil)
	committed := 0
	err := db.Update(func(tx *Tx) error {
		tx.OnCommit(func() { committed++ })
		b, _ := tx.CreateBucket([]byte("b"))
		for i := 1; i <= 3; i++ {
			if s, err := b.NextSequence(); err != nil || s != uint64(i) {
				return fmt.Errorf("NextSequence = %d, %v", s, err)
			}
		}
		return nil
	})
	if err != nil || committed != 1 {
		t.Fatalf("update: %v, handlers run %d", err, committed)
	}
	db.reopen()
	_ = db.Update(func(tx *Tx) error {
		tx.OnCommit(func() { committed++ })
		b := tx.Bucket([]byte("b"))
		if b.Sequence() != 3 {
			t.Errorf("sequence after reopen = %d", b.Sequence())
		}
		return b.SetSequence(1000)
	})
	_ = db.Update(func(tx *Tx) error {
		tx.OnCommit(func() { committed++ })
		if s := tx.Bucket([]byte("b")).Sequence(); s != 1000 {
			t.Errorf("sequence = %d", s)
		}
		return errRollback
	})
	if committed != 2 {
		t.Errorf("OnCommit ran %d times, want 2 (not on rollback)", committed)
	}
}

// TestNoopWriteTxnIDIsReused: a write transaction that changes nothing
// leaves no state, so the next one commits under the same id (Tx.ID's
// doc); ids of transactions that changed something increase.
func TestNoopWriteTxnIDIsReused(t *testing.T) {
	db := openTestDB(t, nil)
	id := func(fn func(*Tx) error) int {
		t.Helper()
		var got int
		if err := db.Update(func(tx *Tx) error { got = tx.ID(); return fn(tx) }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	noop := func(*Tx) error { return nil }
	put := func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}
	a := id(put)
	b := id(noop)
	c := id(put)
	d := id(put)
	if b != a+1 || c != b || d != c+1 {
		t.Fatalf("ids put %d, no-op %d, put %d, put %d; want n, n+1, n+1, n+2", a, b, c, d)
	}
}

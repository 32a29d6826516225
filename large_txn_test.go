package rivet

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// TestLargeRandomTxn puts tens of thousands of keys in random order in one
// transaction, so nodes pass the in-memory split bound many times over
// (internal/btree eager splits: new nodes without pages, a root that grows
// levels in memory), and mixes in Gets, overwrites, deletes that empty and
// merge the split nodes, cursor walks inside the transaction, nested
// buckets, a rollback, and a reopen. The content must equal the model's at
// every check, and Check must pass.
func TestLargeRandomTxn(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	n := 60_000
	if testing.Short() || raceEnabled {
		n = 12_000
	}
	db := openTestDB(t, &Options{PageSize: 1024 << rng.Intn(3)})
	model := newMBucket()
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%09d", i) }
	perm := rng.Perm(n)
	build := func(tx *Tx, m *mbucket) error {
		b, err := tx.CreateBucketIfNotExists([]byte("big"))
		if err != nil {
			return err
		}
		mb := newMBucket()
		m.sub["big"] = mb
		nested, err := b.CreateBucket([]byte("nested"))
		if err != nil {
			return err
		}
		mn := newMBucket()
		mb.sub["nested"] = mn
		for j, i := range perm {
			v := fmt.Appendf(nil, "v%d-%d", i, rng.Intn(1000))
			if err := b.Put(key(i), v); err != nil {
				return err
			}
			mb.kv[string(key(i))] = v
			if j%7 == 0 {
				if err := nested.Put(key(i), v); err != nil {
					return err
				}
				mn.kv[string(key(i))] = v
			}
			if j%1000 == 999 {
				// Reads in the middle of the splitting.
				for range 20 {
					k := key(perm[rng.Intn(j+1)])
					if got := b.Get(k); !bytes.Equal(got, mb.kv[string(k)]) {
						return fmt.Errorf("get %q after %d puts: %q, want %q", k, j+1, got, mb.kv[string(k)])
					}
				}
			}
		}
		// Nothing is spilled yet, so every split so far was made in
		// memory; n random puts must have made many.
		if st := tx.Stats(); st.GetSplit() < int64(n/1000) {
			return fmt.Errorf("%d in-memory splits for %d random puts", st.GetSplit(), n)
		}
		// A cursor walk over the unspilled tree, both directions.
		compareBucket(t, "big", b, mb)
		// Delete two thirds, in random order: emptied and underfilled
		// nodes, many of them never written, merge away.
		for _, i := range rng.Perm(n)[:2*n/3] {
			if err := b.Delete(key(i)); err != nil {
				return err
			}
			delete(mb.kv, string(key(i)))
		}
		// Overwrite some survivors.
		for range n / 10 {
			i := rng.Intn(n)
			if _, ok := mb.kv[string(key(i))]; ok {
				v := []byte("overwritten")
				if err := b.Put(key(i), v); err != nil {
					return err
				}
				mb.kv[string(key(i))] = v
			}
		}
		compareBucket(t, "big", b, mb)
		return nil
	}
	// First a rollback: nothing may remain of it.
	rolledBack := fmt.Errorf("roll back")
	if err := db.Update(func(tx *Tx) error {
		if err := build(tx, newMBucket()); err != nil {
			return err
		}
		return rolledBack
	}); err != rolledBack {
		t.Fatal(err)
	}
	compareDB(t, db.DB, model)
	mustCheck(t, db.DB)
	if err := db.Update(func(tx *Tx) error { return build(tx, model) }); err != nil {
		t.Fatal(err)
	}
	compareDB(t, db.DB, model)
	db.reopen()
	compareDB(t, db.DB, model)
	// A second large transaction on the committed tree: materialised nodes
	// (with pages) split eagerly too.
	if err := db.Update(func(tx *Tx) error {
		b := tx.Bucket([]byte("big"))
		mb := model.sub["big"]
		for _, i := range rng.Perm(n) {
			k := fmt.Appendf(nil, "key-%09d-2", i)
			if err := b.Put(k, k); err != nil {
				return err
			}
			mb.kv[string(k)] = k
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	compareDB(t, db.DB, model)
}

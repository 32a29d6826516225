package rivet

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// A walk in key order (a cursor pass, ForEach, Check, WalkPages) asks the
// memory map to read the leaves ahead, once per window of leaves, not per
// move; point reads (Get, Seek) ask for nothing. Counted through a
// CountingFS, whose mappings count the hints.
func TestReadaheadHints(t *testing.T) {
	mem := vfs.NewMem()
	counts := vfs.NewCounting(mem)
	db := countingDB(t, mem, counts, &Options{PageSize: 4096})
	defer func() {
		mustCheck(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	const keys = 6000
	key := func(i int) []byte { return []byte(fmt.Sprintf("rev%08d", i)) }
	rng := rand.New(rand.NewSource(1))
	for start := 0; start < keys; start += 1000 {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("key"))
			if err != nil {
				return err
			}
			for i := start; i < start+1000; i++ {
				if err := b.Put(key(i), make([]byte, 512+rng.Intn(3000))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var leaves int
	if err := db.View(func(tx *Tx) error {
		leaves = tx.Bucket([]byte("key")).Stats().LeafPageN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hints := func(what string, fn func(tx *Tx) error) int64 {
		t.Helper()
		before := counts.Snapshot()
		if err := db.View(fn); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		after := counts.Snapshot()
		n := after.WillNeedCalls - before.WillNeedCalls
		t.Logf("%s: %d hints for %d KiB (%d leaves)", what, n, (after.WillNeedBytes-before.WillNeedBytes)>>10, leaves)
		return n
	}

	if n := hints("Get and Seek", func(tx *Tx) error {
		b := tx.Bucket([]byte("key"))
		for i := 0; i < 2000; i++ {
			k := key(rng.Intn(keys))
			if b.Get(k) == nil {
				return fmt.Errorf("%s not found", k)
			}
			if got, _ := b.Cursor().Seek(k); string(got) != string(k) {
				return fmt.Errorf("Seek(%s) = %s", k, got)
			}
		}
		return nil
	}); n != 0 {
		t.Errorf("point reads gave %d read-ahead hints, want none", n)
	}

	walks := []struct {
		name string
		fn   func(tx *Tx) error
	}{
		{"cursor pass", func(tx *Tx) error {
			c := tx.Bucket([]byte("key")).Cursor()
			n := 0
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				n++
			}
			if n != keys {
				return fmt.Errorf("the pass saw %d keys, want %d", n, keys)
			}
			return nil
		}},
		{"backward pass", func(tx *Tx) error {
			c := tx.Bucket([]byte("key")).Cursor()
			n := 0
			for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
				n++
			}
			if n != keys {
				return fmt.Errorf("the pass saw %d keys, want %d", n, keys)
			}
			return nil
		}},
		{"ForEach", func(tx *Tx) error {
			return tx.Bucket([]byte("key")).ForEach(func(k, v []byte) error { return nil })
		}},
		{"Check", func(tx *Tx) error {
			for err := range tx.Check() {
				return err
			}
			return nil
		}},
		{"WalkPages", func(tx *Tx) error {
			return tx.WalkPages(func(PageUse) error { return nil })
		}},
	}
	for _, w := range walks {
		n := hints(w.name, w.fn)
		if n == 0 {
			t.Errorf("%s gave no read-ahead hint", w.name)
		}
		if n > int64(leaves)/8 {
			t.Errorf("%s gave %d hints for %d leaves: not once per window", w.name, n, leaves)
		}
	}
}

package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// The answers of bbolt v1.5 on edge inputs that the differential test
// against bbolt (bench/difftest) found rivet giving differently, and the
// bugs it found. Each is checked here without bbolt.

// TestEmptyNameOfEmptyBucket: DeleteBucket and MoveBucket with a nil or
// empty name answer ErrIncompatibleValue on an empty bucket (and an empty
// DB's top level), ErrBucketNotFound on a bucket that holds anything, as
// bbolt's do.
func TestEmptyNameOfEmptyBucket(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		for _, name := range [][]byte{nil, {}} {
			if err := tx.DeleteBucket(name); !errors.Is(err, ErrIncompatibleValue) {
				t.Errorf("Tx.DeleteBucket(%q) on an empty DB: %v, want ErrIncompatibleValue", name, err)
			}
		}
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		dst, err := tx.CreateBucket([]byte("dst"))
		if err != nil {
			return err
		}
		for _, name := range [][]byte{nil, {}} {
			if err := tx.DeleteBucket(name); !errors.Is(err, ErrBucketNotFound) {
				t.Errorf("Tx.DeleteBucket(%q) on a DB with buckets: %v, want ErrBucketNotFound", name, err)
			}
			if err := a.DeleteBucket(name); !errors.Is(err, ErrIncompatibleValue) {
				t.Errorf("DeleteBucket(%q) on an empty bucket: %v, want ErrIncompatibleValue", name, err)
			}
			if err := a.MoveBucket(name, dst); !errors.Is(err, ErrIncompatibleValue) {
				t.Errorf("MoveBucket(%q) out of an empty bucket: %v, want ErrIncompatibleValue", name, err)
			}
		}
		if err := a.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		for _, name := range [][]byte{nil, {}} {
			if err := a.DeleteBucket(name); !errors.Is(err, ErrBucketNotFound) {
				t.Errorf("DeleteBucket(%q) on a bucket with a key: %v, want ErrBucketNotFound", name, err)
			}
			if err := a.MoveBucket(name, dst); !errors.Is(err, ErrBucketNotFound) {
				t.Errorf("MoveBucket(%q) out of a bucket with a key: %v, want ErrBucketNotFound", name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPutNilReadsNilUntilCommit: a value put as nil reads back as nil in
// its transaction (Get and cursors, where a nil value looks like a nested
// bucket) and as empty, not nil, once committed, as in bbolt; one put as
// empty reads back empty throughout.
func TestPutNilReadsNilUntilCommit(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("nil"), nil); err != nil {
			return err
		}
		if err := b.Put([]byte("empty"), []byte{}); err != nil {
			return err
		}
		if v := b.Get([]byte("nil")); v != nil {
			t.Errorf("Get of a nil value in its transaction: %q, want nil", v)
		}
		if v := b.Get([]byte("empty")); v == nil || len(v) != 0 {
			t.Errorf("Get of an empty value in its transaction: %v (nil %t), want empty", v, v == nil)
		}
		if k, v := b.Cursor().Seek([]byte("nil")); string(k) != "nil" || v != nil {
			t.Errorf("Seek to a nil value in its transaction: %q=%v, want nil", k, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		for _, k := range []string{"nil", "empty"} {
			if v := b.Get([]byte(k)); v == nil || len(v) != 0 {
				t.Errorf("committed %s value: %v (nil %t), want empty", k, v, v == nil)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLongBucketNames: bucket names longer than MaxKeySize are accepted, as
// bbolt accepts them (MaxKeySize bounds the keys of values); they survive
// a reopen, separate branch keys on small pages, and free their pages when
// deleted.
func TestLongBucketNames(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	names := [][]byte{bytes.Repeat([]byte("n"), MaxKeySize+1), bytes.Repeat([]byte("m"), 100_000)}
	err := db.Update(func(tx *Tx) error {
		for i := range 2000 {
			if _, err := tx.CreateBucket(fmt.Appendf(nil, "b%05d", i)); err != nil {
				return err
			}
		}
		for _, n := range names {
			b, err := tx.CreateBucket(n)
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			if _, err := tx.Bucket([]byte("b01000")).CreateBucketIfNotExists(n); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("b00001")).Put(names[0], nil); !errors.Is(err, ErrKeyTooLarge) {
			t.Errorf("Put with a key over MaxKeySize: %v, want ErrKeyTooLarge", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.reopen()
	err = db.Update(func(tx *Tx) error {
		for _, n := range names {
			if b := tx.Bucket(n); b == nil || string(b.Get([]byte("k"))) != "v" {
				return fmt.Errorf("bucket with a %d-byte name lost", len(n))
			}
			if k, _ := tx.Cursor().Seek(n); !bytes.Equal(k, n) {
				return fmt.Errorf("Seek to a %d-byte name found %d bytes", len(n), len(k))
			}
			if err := tx.DeleteBucket(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMoveBucketIntoItselfNamesClash: moving a bucket into itself when it
// holds a nested bucket of its own name is ErrBucketExists (bbolt's
// destination check answers first); without the clash rivet refuses with
// ErrIncompatibleValue, where bbolt would move the bucket out of reach.
func TestMoveBucketIntoItselfNamesClash(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if _, err := b.CreateBucket([]byte("b")); err != nil {
			return err
		}
		if err := tx.MoveBucket([]byte("b"), nil, b); !errors.Is(err, ErrBucketExists) {
			t.Errorf("move b into itself, which holds b: %v, want ErrBucketExists", err)
		}
		c, err := tx.CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		if err := tx.MoveBucket([]byte("c"), nil, c); !errors.Is(err, ErrIncompatibleValue) {
			t.Errorf("move c into itself: %v, want ErrIncompatibleValue", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWritesThroughDeletedBucket: after DeleteBucket, writes through the
// deleted bucket's handle, or a handle of a bucket inside it, return
// ErrBucketNotFound (bbolt panics), and MoveBucket refuses it as source
// and as destination: before, a bucket moved into a deleted one was lost
// with its pages, and one moved out of it kept pages the deletion freed.
func TestWritesThroughDeletedBucket(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		d, err := tx.CreateBucket([]byte("d"))
		if err != nil {
			return err
		}
		inner, err := d.CreateBucket([]byte("inner"))
		if err != nil {
			return err
		}
		if err := inner.Put([]byte("k"), bytes.Repeat([]byte("v"), 5000)); err != nil {
			return err
		}
		_, err = tx.CreateBucket([]byte("a"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		d := tx.Bucket([]byte("d"))
		inner := d.Bucket([]byte("inner"))
		if err := tx.DeleteBucket([]byte("d")); err != nil {
			return err
		}
		later := d.Bucket([]byte("inner")) // opened through the deleted handle
		for _, b := range []*Bucket{d, inner, later} {
			if b == nil {
				return errors.New("a deleted bucket's handle reads nothing")
			}
			writes := map[string]error{
				"Put":          b.Put([]byte("x"), []byte("y")),
				"Delete":       b.Delete([]byte("k")),
				"CreateBucket": func() error { _, err := b.CreateBucket([]byte("n")); return err }(),
				"SetSequence":  b.SetSequence(7),
				"Cursor.Delete": func() error {
					c := b.Cursor()
					c.First()
					return c.Delete()
				}(),
			}
			for name, err := range writes {
				if !errors.Is(err, ErrBucketNotFound) {
					t.Errorf("%s through a deleted bucket: %v, want ErrBucketNotFound", name, err)
				}
			}
		}
		if err := tx.MoveBucket([]byte("a"), nil, d); !errors.Is(err, ErrBucketNotFound) {
			t.Errorf("MoveBucket into a deleted bucket: %v, want ErrBucketNotFound", err)
		}
		if err := d.MoveBucket([]byte("inner"), tx.Bucket([]byte("a"))); !errors.Is(err, ErrBucketNotFound) {
			t.Errorf("MoveBucket out of a deleted bucket: %v, want ErrBucketNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		if tx.Bucket([]byte("a")) == nil || tx.Bucket([]byte("d")) != nil {
			return errors.New("want a kept and d deleted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeleteBucketAfterMoves: DeleteBucket frees what the bucket holds when
// it is deleted: a nested bucket moved out of it earlier in the transaction
// keeps its pages (it used to be freed with its old parent, leaving pages
// both reachable and free), and one moved into it is freed with it (it
// used to leak). Every order ends with a file that passes Check.
func TestDeleteBucketAfterMoves(t *testing.T) {
	setup := func(t *testing.T) *testDB {
		db := openTestDB(t, &Options{PageSize: 1024})
		err := db.Update(func(tx *Tx) error {
			for _, name := range []string{"x", "y"} {
				p, err := tx.CreateBucket([]byte(name))
				if err != nil {
					return err
				}
				c, err := p.CreateBucket([]byte("child-of-" + name))
				if err != nil {
					return err
				}
				g, err := c.CreateBucket([]byte("grandchild"))
				if err != nil {
					return err
				}
				for i := range 200 {
					if err := g.Put(fmt.Appendf(nil, "k%03d", i), bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	cases := []struct {
		name string
		fn   func(tx *Tx) error
		want []string // top-level buckets left, with their children
	}{
		{"move out, delete the old parent", func(tx *Tx) error {
			if err := tx.MoveBucket([]byte("child-of-x"), tx.Bucket([]byte("x")), tx.Bucket([]byte("y"))); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("x"))
		}, []string{"y/child-of-x", "y/child-of-y"}},
		{"move in, delete the new parent", func(tx *Tx) error {
			if err := tx.MoveBucket([]byte("child-of-x"), tx.Bucket([]byte("x")), tx.Bucket([]byte("y"))); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("y"))
		}, []string{"x"}},
		{"change, move out, delete the old parent", func(tx *Tx) error {
			g := tx.Bucket([]byte("x")).Bucket([]byte("child-of-x")).Bucket([]byte("grandchild"))
			if err := g.Put([]byte("k000"), []byte("changed")); err != nil {
				return err
			}
			if err := tx.MoveBucket([]byte("child-of-x"), tx.Bucket([]byte("x")), nil); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("x"))
		}, []string{"child-of-x/grandchild", "y/child-of-y"}},
		{"delete a grandchild, move its parent in, delete the new parent", func(tx *Tx) error {
			if err := tx.Bucket([]byte("x")).Bucket([]byte("child-of-x")).DeleteBucket([]byte("grandchild")); err != nil {
				return err
			}
			if err := tx.MoveBucket([]byte("child-of-x"), tx.Bucket([]byte("x")), tx.Bucket([]byte("y"))); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("y"))
		}, []string{"x"}},
		{"move out and back, delete the parent", func(tx *Tx) error {
			x, y := tx.Bucket([]byte("x")), tx.Bucket([]byte("y"))
			if err := x.MoveBucket([]byte("child-of-x"), y); err != nil {
				return err
			}
			if err := y.MoveBucket([]byte("child-of-x"), x); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("x"))
		}, []string{"y/child-of-y"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := setup(t)
			if err := db.Update(c.fn); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db.DB)
			var got []string
			err := db.View(func(tx *Tx) error {
				return tx.ForEach(func(name []byte, b *Bucket) error {
					n := 0
					err := b.ForEachBucket(func(k []byte) error {
						n++
						got = append(got, string(name)+"/"+string(k))
						return nil
					})
					if n == 0 {
						got = append(got, string(name))
					}
					return err
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("buckets %v, want %v", got, c.want)
			}
			// The freed pages are reused by later commits without harm.
			for i := range 5 {
				mustPutOne(t, db.DB, "after", fmt.Sprint(i), string(bytes.Repeat([]byte("z"), 3000)))
			}
			db.reopen()
			mustCheck(t, db.DB)
		})
	}
}

// TestTxMoveBucketOfEndedTx: Tx.MoveBucket uses its transaction only for a
// nil source or destination, as bbolt's does: called on an ended
// transaction with two buckets of a live one, it moves between them; with
// a nil it returns ErrTxClosed.
func TestTxMoveBucketOfEndedTx(t *testing.T) {
	db := openTestDB(t, nil)
	ended, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ended.Rollback(); err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		src, err := tx.CreateBucket([]byte("src"))
		if err != nil {
			return err
		}
		dst, err := tx.CreateBucket([]byte("dst"))
		if err != nil {
			return err
		}
		if _, err := src.CreateBucket([]byte("child")); err != nil {
			return err
		}
		if err := ended.MoveBucket([]byte("child"), src, nil); !errors.Is(err, ErrTxClosed) {
			t.Errorf("ended Tx.MoveBucket to its top level: %v, want ErrTxClosed", err)
		}
		if err := ended.MoveBucket([]byte("child"), nil, dst); !errors.Is(err, ErrTxClosed) {
			t.Errorf("ended Tx.MoveBucket from its top level: %v, want ErrTxClosed", err)
		}
		if err := ended.MoveBucket([]byte("child"), src, dst); err != nil {
			return fmt.Errorf("ended Tx.MoveBucket between a live transaction's buckets: %w", err)
		}
		if src.Bucket([]byte("child")) != nil || dst.Bucket([]byte("child")) == nil {
			t.Error("the bucket did not move")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestZeroLengthAndMissingValues(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		if err := b.Put([]byte("empty"), []byte{}); err != nil {
			return err
		}
		return b.Put([]byte("nil"), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.reopen()
	_ = db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		for _, k := range []string{"empty", "nil"} {
			if v := b.Get([]byte(k)); v == nil || len(v) != 0 {
				t.Errorf("Get(%q) = %v, want an empty non-nil slice", k, v)
			}
		}
		if v := b.Get([]byte("missing")); v != nil {
			t.Errorf("Get(missing) = %v", v)
		}
		return nil
	})
}

func TestMoveBucket(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	err := db.Update(func(tx *Tx) error {
		src, _ := tx.CreateBucket([]byte("src"))
		dst, _ := tx.CreateBucket([]byte("dst"))
		child, _ := src.CreateBucket([]byte("child"))
		for i := 0; i < 200; i++ {
			if err := child.Put([]byte(fmt.Sprint(i)), bytes.Repeat([]byte("v"), 50)); err != nil {
				return err
			}
		}
		if err := src.MoveBucket([]byte("child"), src); !errors.Is(err, rerrors.ErrSameBuckets) {
			return fmt.Errorf("move into same bucket: %v", err)
		}
		return tx.MoveBucket([]byte("child"), src, dst)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.reopen()
	_ = db.View(func(tx *Tx) error {
		if tx.Bucket([]byte("src")).Bucket([]byte("child")) != nil {
			t.Error("child still in src")
		}
		c := tx.Bucket([]byte("dst")).Bucket([]byte("child"))
		if c == nil || c.Stats().KeyN != 200 {
			t.Errorf("child not moved whole: %v", c)
		}
		return nil
	})
	// Move back to the top level, in a separate txn from its creation.
	err = db.Update(func(tx *Tx) error {
		return tx.MoveBucket([]byte("child"), tx.Bucket([]byte("dst")), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if c := tx.Bucket([]byte("child")); c == nil || string(c.Get([]byte("7"))) != string(bytes.Repeat([]byte("v"), 50)) {
			t.Error("child not at top level")
		}
		return nil
	})
}

func TestLargeKeysAndValues(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 4096})
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 40<<20) // more than one 16 MiB extent: a chain
	rng.Read(big)
	key := bytes.Repeat([]byte("K"), MaxKeySize)
	err := db.Update(func(tx *Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		if err := b.Put(key, []byte("big key")); err != nil {
			return err
		}
		if err := b.Put([]byte("big"), big); err != nil {
			return err
		}
		return b.Put([]byte("mid"), big[:3000])
	})
	if err != nil {
		t.Fatal(err)
	}
	db.reopen()
	_ = db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		if got := b.Get(key); string(got) != "big key" {
			t.Errorf("big key: %q", got)
		}
		if got := b.Get([]byte("big")); !bytes.Equal(got, big) {
			t.Errorf("40 MiB value differs (%d bytes)", len(got))
		}
		if got := b.Get([]byte("mid")); !bytes.Equal(got, big[:3000]) {
			t.Errorf("3000-byte value differs")
		}
		return nil
	})
	// Overwrite and delete free the blob pages again (Check at the end
	// verifies nothing leaked).
	_ = db.Update(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		if err := b.Put([]byte("big"), []byte("small now")); err != nil {
			return err
		}
		return b.Delete([]byte("mid"))
	})
	mustCheck(t, db.DB)
}

// TestMoveBucketKeepsChangesOfSameTxn: a bucket changed and then moved in
// one transaction keeps the changes (bbolt v1.5 moves the last committed
// header and drops them; README "differences"). Inline and paged buckets.
func TestMoveBucketKeepsChangesOfSameTxn(t *testing.T) {
	for _, keys := range []int{2, 300} {
		db := openTestDB(t, &Options{PageSize: 4096})
		if err := db.Update(func(tx *Tx) error {
			src, err := tx.CreateBucket([]byte("src"))
			if err != nil {
				return err
			}
			if _, err := tx.CreateBucket([]byte("dst")); err != nil {
				return err
			}
			c, err := src.CreateBucket([]byte("child"))
			if err != nil {
				return err
			}
			for i := 0; i < keys; i++ {
				if err := c.Put([]byte(fmt.Sprintf("k%04d", i)), []byte("old")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *Tx) error {
			c := tx.Bucket([]byte("src")).Bucket([]byte("child"))
			if err := c.Put([]byte("new"), []byte("key")); err != nil {
				return err
			}
			if err := c.Delete([]byte("k0000")); err != nil {
				return err
			}
			if err := c.Put([]byte("k0001"), []byte("changed")); err != nil {
				return err
			}
			return tx.MoveBucket([]byte("child"), tx.Bucket([]byte("src")), tx.Bucket([]byte("dst")))
		}); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db.DB)
		db.reopen()
		if err := db.View(func(tx *Tx) error {
			if tx.Bucket([]byte("src")).Bucket([]byte("child")) != nil {
				return fmt.Errorf("the bucket is still in src")
			}
			c := tx.Bucket([]byte("dst")).Bucket([]byte("child"))
			if c == nil {
				return fmt.Errorf("the bucket is not in dst")
			}
			if v := c.Get([]byte("new")); string(v) != "key" {
				return fmt.Errorf("new key: %q", v)
			}
			if v := c.Get([]byte("k0000")); v != nil {
				return fmt.Errorf("deleted key: %q", v)
			}
			if v := c.Get([]byte("k0001")); string(v) != "changed" {
				return fmt.Errorf("changed key: %q", v)
			}
			if n := c.Stats().KeyN; n != keys {
				return fmt.Errorf("%d keys, want %d", n, keys)
			}
			return nil
		}); err != nil {
			t.Fatalf("%d keys: %v", keys, err)
		}
	}
}

// TestMoveBucketErrorsMatchBbolt checks MoveBucket's errors in bbolt's
// order (bbolt's movebucket_test.go): into a read-only transaction's bucket
// ErrTxNotWritable, across write transactions ErrDifferentDB.
func TestMoveBucketErrorsMatchBbolt(t *testing.T) {
	db := openTestDB(t, nil)
	other := openTestDB(t, nil)
	for _, d := range []*testDB{db, other} {
		if err := d.Update(func(tx *Tx) error {
			b, err := tx.CreateBucket([]byte("src"))
			if err != nil {
				return err
			}
			_, err = b.CreateBucket([]byte("child"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	rtx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback()
	otx, err := other.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	defer otx.Rollback()
	err = db.Update(func(tx *Tx) error {
		src := tx.Bucket([]byte("src"))
		if err := src.MoveBucket([]byte("child"), rtx.Bucket([]byte("src"))); !errors.Is(err, rerrors.ErrTxNotWritable) {
			t.Errorf("move into a read-only txn's bucket: %v, want ErrTxNotWritable", err)
		}
		if err := rtx.Bucket([]byte("src")).MoveBucket([]byte("child"), src); !errors.Is(err, rerrors.ErrTxNotWritable) {
			t.Errorf("move out of a read-only txn's bucket: %v, want ErrTxNotWritable", err)
		}
		if err := src.MoveBucket([]byte("child"), otx.Bucket([]byte("src"))); !errors.Is(err, rerrors.ErrDifferentDB) {
			t.Errorf("move into another DB's bucket: %v, want ErrDifferentDB", err)
		}
		if err := src.MoveBucket([]byte("child"), src); !errors.Is(err, rerrors.ErrSameBuckets) {
			t.Errorf("move into the same bucket: %v, want ErrSameBuckets", err)
		}
		if err := src.MoveBucket([]byte("missing"), nil); !errors.Is(err, rerrors.ErrTxClosed) {
			t.Errorf("move into a nil bucket: %v, want ErrTxClosed", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

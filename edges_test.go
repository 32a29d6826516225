package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// The answers of bbolt v1.5 on edge inputs that the differential test
// against bbolt (bench/difftest) found rivet giving differently, and the
// bugs it found. Each is checked here without bbolt.

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

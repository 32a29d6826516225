package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

func TestErrorsMatchTheErrorsPackage(t *testing.T) {
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		checks := []struct {
			name string
			err  error
			want error
		}{
			{"create existing", func() error { _, err := tx.CreateBucket([]byte("b")); return err }(), rerrors.ErrBucketExists},
			{"create empty name", func() error { _, err := tx.CreateBucket(nil); return err }(), rerrors.ErrBucketNameRequired},
			{"delete missing bucket", tx.DeleteBucket([]byte("nope")), rerrors.ErrBucketNotFound},
			{"put empty key", b.Put(nil, []byte("v")), rerrors.ErrKeyRequired},
			{"put huge key", b.Put(make([]byte, MaxKeySize+1), nil), rerrors.ErrKeyTooLarge},
		}
		if err := b.Put([]byte("plain"), []byte("v")); err != nil {
			return err
		}
		checks = append(checks,
			struct {
				name string
				err  error
				want error
			}{"create bucket over value", func() error { _, err := b.CreateBucket([]byte("plain")); return err }(), rerrors.ErrIncompatibleValue},
		)
		if _, err := b.CreateBucket([]byte("sub")); err != nil {
			return err
		}
		checks = append(checks,
			struct {
				name string
				err  error
				want error
			}{"put over bucket", b.Put([]byte("sub"), []byte("v")), rerrors.ErrIncompatibleValue},
			struct {
				name string
				err  error
				want error
			}{"delete bucket key", b.Delete([]byte("sub")), rerrors.ErrIncompatibleValue},
			struct {
				name string
				err  error
				want error
			}{"delete value as bucket", b.DeleteBucket([]byte("plain")), rerrors.ErrIncompatibleValue},
		)
		for _, c := range checks {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
			}
			// The deprecated root-package names are the same values.
			if c.want == rerrors.ErrBucketExists && !errors.Is(c.err, ErrBucketExists) {
				t.Errorf("%s: not ErrBucketExists via the root package", c.name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Writes in a read transaction.
	err = db.View(func(tx *Tx) error {
		if _, err := tx.CreateBucket([]byte("x")); !errors.Is(err, rerrors.ErrTxNotWritable) {
			t.Errorf("create in read tx: %v", err)
		}
		if err := tx.Bucket([]byte("b")).Put([]byte("k"), nil); !errors.Is(err, rerrors.ErrTxNotWritable) {
			t.Errorf("put in read tx: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Closed transactions.
	tx, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, rerrors.ErrTxClosed) {
		t.Errorf("commit after rollback: %v", err)
	}
	if err := tx.Rollback(); !errors.Is(err, rerrors.ErrTxClosed) {
		t.Errorf("second rollback: %v", err)
	}
	rtx, _ := db.Begin(false)
	if err := rtx.Commit(); !errors.Is(err, rerrors.ErrTxNotWritable) {
		t.Errorf("commit of read tx: %v", err)
	}
	_ = rtx.Rollback()
}

func TestClosedAndReadOnlyDB(t *testing.T) {
	db := openTestDB(t, nil)
	if err := db.Update(func(tx *Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	path := db.Path()
	db.checkAndClose()
	if _, err := (&DB{}).Begin(false); !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
		t.Errorf("begin on closed db: %v", err)
	}
	ro, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.IsReadOnly() {
		t.Error("IsReadOnly false")
	}
	if err := ro.Update(func(*Tx) error { return nil }); !errors.Is(err, rerrors.ErrDatabaseReadOnly) {
		t.Errorf("update on read-only db: %v", err)
	}
	// A second read-only open shares the file.
	ro2, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("second read-only open: %v", err)
	}
	if err := ro2.View(func(tx *Tx) error {
		if tx.Bucket([]byte("b")) == nil {
			return fmt.Errorf("bucket missing")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ro2.Close()
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.View(func(*Tx) error { return nil }); !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
		t.Errorf("view after close: %v", err)
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

func TestCursorDeleteWhileIterating(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	const n = 2000
	_ = db.Update(func(tx *Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		for i := 0; i < n; i++ {
			if err := b.Put([]byte(fmt.Sprintf("%06d", i)), []byte("value")); err != nil {
				return err
			}
		}
		return nil
	})
	// Delete every key through the cursor: none may be skipped.
	err := db.Update(func(tx *Tx) error {
		c := tx.Bucket([]byte("b")).Cursor()
		seen := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if want := fmt.Sprintf("%06d", seen); string(k) != want {
				return fmt.Errorf("cursor at %q, want %q", k, want)
			}
			if seen%3 != 0 {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			seen++
		}
		if seen != n {
			return fmt.Errorf("visited %d keys, want %d", seen, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if got := tx.Bucket([]byte("b")).Stats().KeyN; got != (n+2)/3 {
			t.Errorf("%d keys left, want %d", got, (n+2)/3)
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

// Regression: the cursor's key-order check (which stops walks over corrupt
// branch DAGs) reached back across Seek and across the ends of the range,
// so Seek past the end followed by Prev reported a false corruption.
func TestCursorMovesAcrossSeeksAndEnds(t *testing.T) {
	db := openTestDB(t, nil)
	_ = db.Update(func(tx *Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		for _, k := range []string{"a", "b", "c", "d"} {
			if err := b.Put([]byte(k), []byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	err := db.View(func(tx *Tx) error {
		c := tx.Bucket([]byte("b")).Cursor()
		steps := []struct {
			name string
			move func() ([]byte, []byte)
			want string
		}{
			{"Seek(a)", func() ([]byte, []byte) { return c.Seek([]byte("a")) }, "a"},
			{"Seek(zzz)", func() ([]byte, []byte) { return c.Seek([]byte("zzz")) }, ""},
			{"Prev", c.Prev, "d"},
			{"Prev", c.Prev, "c"},
			{"Seek(b)", func() ([]byte, []byte) { return c.Seek([]byte("b")) }, "b"},
			{"Prev", c.Prev, "a"},
			{"Prev", c.Prev, ""},
			// bbolt's ends (TestCursorEndsMatchBbolt): a move off either
			// end leaves the cursor on the end key.
			{"Next", c.Next, "b"},
			{"Last", c.Last, "d"},
			{"Next", c.Next, ""},
			{"Prev", c.Prev, "c"},
			{"First", c.First, "a"},
			{"Next", c.Next, "b"},
		}
		for i, s := range steps {
			k, _ := s.move()
			if string(k) != s.want {
				return fmt.Errorf("step %d %s: got %q, want %q", i, s.name, k, s.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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

package rivet

import (
	"errors"
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

package bbolt_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestSameValues: what a package importing go.etcd.io/bbolt gets through
// this module is rivet's own — a *bolt.DB is the *rivet.DB another package
// expects, and an error from either matches both names.
func TestSameValues(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var asRivet *rivet.DB = db // compiles only if the types are one
	if asRivet.Path() != db.Path() {
		t.Fatal("the alias is another value")
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket([]byte("b")); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte("b"))
		return err
	})
	if !errors.Is(err, bolt.ErrBucketExists) || !errors.Is(err, berrors.ErrBucketExists) || !errors.Is(err, rerrors.ErrBucketExists) {
		t.Fatalf("creating a bucket twice: %v, want ErrBucketExists under every name", err)
	}
	if bolt.DefaultOptions != rivet.DefaultOptions || bolt.MaxKeySize != rivet.MaxKeySize {
		t.Fatal("defaults differ from rivet's")
	}
}

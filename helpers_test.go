package rivet

import (
	"errors"
	"path/filepath"
	"testing"
)

// testDB is a DB opened for a test; when the test ends it is checked in
// full (tree and free-space maps) and closed.
type testDB struct {
	*DB
	t    testing.TB
	opts *Options
}

// openTestDB opens a fresh database file in the test's temp dir and
// registers a full Check + Close for the end of the test.
func openTestDB(t testing.TB, opts *Options) *testDB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := Open(path, 0o600, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	tdb := &testDB{DB: db, t: t, opts: opts}
	t.Cleanup(func() { tdb.checkAndClose() })
	return tdb
}

func (db *testDB) checkAndClose() {
	db.t.Helper()
	if db.DB == nil {
		return
	}
	if !db.isClosed() {
		mustCheck(db.t, db.DB)
		if err := db.DB.Close(); err != nil {
			db.t.Errorf("close: %v", err)
		}
	}
	db.DB = nil
}

// reopen closes and reopens the database file.
func (db *testDB) reopen() {
	db.t.Helper()
	mustCheck(db.t, db.DB)
	path := db.Path()
	if err := db.DB.Close(); err != nil {
		db.t.Fatalf("close: %v", err)
	}
	d, err := Open(path, 0o600, db.opts)
	if err != nil {
		db.t.Fatalf("reopen: %v", err)
	}
	db.DB = d
}

// mustCheck runs a full Check and fails the test on any problem.
func mustCheck(t testing.TB, db *DB) {
	t.Helper()
	err := db.View(func(tx *Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("check: %v", err)
	}
}

// memMapSize is the map reserve for databases on the in-memory file systems:
// there a "mapping" is a real allocation, so the 1 GiB default would cost
// an allocation of that size per Open.
const memMapSize = 1 << 20

// mustPutOne stores one key in a bucket, creating the bucket if needed, in
// its own transaction.
func mustPutOne(t testing.TB, db *DB, bucket, key, value string) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), []byte(value))
	}); err != nil {
		t.Fatal(err)
	}
}

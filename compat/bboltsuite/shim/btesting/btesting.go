// Package btesting is rivet's stand-in for bbolt's internal test helper
// package of the same name, written over rivet's public API so that bbolt's
// own black-box tests run against rivet unchanged (see ../../run.sh). Only
// the names bbolt v1.5.0's tests use are provided, with the behaviour those
// tests expect: a fresh file in a temporary directory, a full Check and
// Close when the test ends.
package btesting

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "github.com/rivetkv/rivet"
)

// DB is an open database plus what the helpers need to reopen it.
type DB struct {
	*bolt.DB
	path string
	opts *bolt.Options
	t    testing.TB
}

// MustCreateDB opens a new database in a temporary directory, and checks
// and closes it when the test ends. Strict mode (a full Check after every
// commit) is on when the environment sets STRICT_MODE=true, as in bbolt.
func MustCreateDB(t testing.TB) *DB { return MustCreateDBWithOption(t, nil) }

// MustCreateDBWithOption is MustCreateDB with options.
func MustCreateDBWithOption(t testing.TB, o *bolt.Options) *DB {
	return MustOpenDBWithOption(t, filepath.Join(t.TempDir(), "db"), o)
}

// MustOpenDBWithOption opens path with options, failing the test on error.
func MustOpenDBWithOption(t testing.TB, path string, o *bolt.Options) *DB {
	db, err := OpenDBWithOption(t, path, o)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return db
}

// OpenDBWithOption opens path with options and registers the end-of-test
// check and close.
func OpenDBWithOption(t testing.TB, path string, o *bolt.Options) (*DB, error) {
	d, err := bolt.Open(path, 0o600, o)
	if err != nil {
		return nil, err
	}
	db := &DB{DB: d, path: path, opts: o, t: t}
	db.StrictMode = strictMode()
	t.Cleanup(db.PostTestCleanup)
	return db, nil
}

// PostTestCleanup checks and closes the database if the test left it open.
func (db *DB) PostTestCleanup() {
	if db.DB != nil {
		db.MustCheck()
		db.MustClose()
	}
}

// Close closes the database; closing twice is not an error.
func (db *DB) Close() error {
	if db.DB == nil {
		return nil
	}
	err := db.DB.Close()
	db.DB = nil
	return err
}

// MustClose closes the database, failing the test on error.
func (db *DB) MustClose() {
	if err := db.Close(); err != nil {
		db.t.Fatalf("close: %v", err)
	}
}

// MustDeleteFile removes the database file.
func (db *DB) MustDeleteFile() {
	if err := os.Remove(db.path); err != nil {
		db.t.Fatalf("remove %s: %v", db.path, err)
	}
}

// SetOptions sets the options the next MustReopen uses.
func (db *DB) SetOptions(o *bolt.Options) { db.opts = o }

// MustReopen closes and reopens the database with its options.
func (db *DB) MustReopen() {
	if db.DB != nil {
		db.t.Fatalf("MustReopen of a database that is still open")
	}
	d, err := bolt.Open(db.path, 0o600, db.opts)
	if err != nil {
		db.t.Fatalf("reopen %s: %v", db.path, err)
	}
	db.DB = d
	db.StrictMode = strictMode()
}

func strictMode() bool { return strings.EqualFold(os.Getenv("STRICT_MODE"), "true") }

// MustCheck runs a full Check (free space included when no write
// transaction runs) and fails the test on any problem.
func (db *DB) MustCheck() {
	err := db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
			if len(errs) > 10 {
				break
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("check found %d problem(s), the first: %w", len(errs), errs[0])
		}
		return nil
	})
	if err != nil {
		db.t.Fatal(err)
	}
}

// Fill puts numTx transactions of numKeysPerTx keys into bucket, creating
// it if needed; keyGen and valueGen give the pairs.
func (db *DB) Fill(bucket []byte, numTx int, numKeysPerTx int,
	keyGen func(tx int, key int) []byte,
	valueGen func(tx int, key int) []byte) error {
	for i := 0; i < numTx; i++ {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucket)
			if err != nil {
				return err
			}
			for j := 0; j < numKeysPerTx; j++ {
				if err := b.Put(keyGen(i, j), valueGen(i, j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// CopyTempFile copies the database file to a temporary file and logs its
// name, for a failing test to leave evidence.
func (db *DB) CopyTempFile() {
	b, err := os.ReadFile(db.path)
	if err != nil {
		db.t.Fatal(err)
	}
	f, err := os.CreateTemp("", "rivet-bbolt-suite-")
	if err != nil {
		db.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		db.t.Fatal(err)
	}
	db.t.Logf("database copied to %s", f.Name())
}

// PrintStats logs the database's statistics.
func (db *DB) PrintStats() {
	db.t.Logf("%+v", db.Stats())
}

// ForceDisableStrictMode turns strict mode off for tests that build states
// strict mode would refuse.
func (db *DB) ForceDisableStrictMode() { db.StrictMode = false }

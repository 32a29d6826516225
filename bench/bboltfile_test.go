package bench

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// TestOpenBboltFileSaysSo opens real bbolt files — fresh, with data, with
// 4 KiB, 16 KiB and 64 KiB pages, and with bbolt's meta 0 destroyed — with
// rivet: Open must return rivet.ErrBboltFile (which also matches
// ErrInvalid), read-only or not, and leave the file as it was.
func TestOpenBboltFileSaysSo(t *testing.T) {
	for _, ps := range []int{4096, 16384, 65536} {
		for _, damage := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "bolt.db")
			bdb, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: ps})
			if err != nil {
				t.Fatal(err)
			}
			if err := bdb.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("b"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k"), []byte("v"))
			}); err != nil {
				t.Fatal(err)
			}
			if err := bdb.Close(); err != nil {
				t.Fatal(err)
			}
			if damage {
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(make([]byte, ps), 0); err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
			}
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{true, false} {
				db, err := rivet.Open(path, 0o600, &rivet.Options{ReadOnly: ro})
				if err == nil {
					_ = db.Close()
					t.Fatalf("page size %d, meta 0 destroyed %t, read-only %t: rivet opened a bbolt file", ps, damage, ro)
				}
				if err != rivet.ErrBboltFile || !errors.Is(err, rivet.ErrInvalid) {
					t.Errorf("page size %d, meta 0 destroyed %t, read-only %t: %v, want ErrBboltFile", ps, damage, ro, err)
				}
			}
			after, _ := os.ReadFile(path)
			if string(before) != string(after) {
				t.Errorf("page size %d: a failed Open changed the bbolt file", ps)
			}
		}
	}
}

package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	bolt "go.etcd.io/bbolt"
)

// TestOpenBboltFileSaysSo opens real bbolt files — fresh, with data, with
// 4 KiB, 16 KiB and 64 KiB pages, and with bbolt's meta 0 destroyed — with
// rivet: a writable Open must return rivet.ErrBboltFile (which also
// matches ErrInvalid); a read-only one reads the file (at meta 1 when meta
// 0 is gone, as bbolt does) and shows its contents. Neither may change the
// file.
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
			db, err := rivet.Open(path, 0o600, nil)
			if err == nil {
				_ = db.Close()
				t.Fatalf("page size %d, meta 0 destroyed %t: a writable Open opened a bbolt file", ps, damage)
			}
			if err != rivet.ErrBboltFile || !errors.Is(err, rerrors.ErrInvalid) {
				t.Errorf("page size %d, meta 0 destroyed %t: writable Open: %v, want ErrBboltFile", ps, damage, err)
			}
			db, err = rivet.Open(path, 0o600, &rivet.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("page size %d, meta 0 destroyed %t: read-only Open: %v", ps, damage, err)
			}
			var got string
			if err := db.View(func(tx *rivet.Tx) error {
				if b := tx.Bucket([]byte("b")); b != nil {
					got = string(b.Get([]byte("k")))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
			// With meta 0 gone the file is at bbolt's previous commit,
			// which held no bucket yet: as bbolt would open it.
			if want := map[bool]string{false: "v", true: ""}[damage]; got != want {
				t.Errorf("page size %d, meta 0 destroyed %t: read-only Open reads %q, want %q", ps, damage, got, want)
			}
			after, _ := os.ReadFile(path)
			if string(before) != string(after) {
				t.Errorf("page size %d: Open changed the bbolt file", ps)
			}
		}
	}
}

// TestCheckNotesDamagedNewestMeta: `rivet check` on a cleanly closed file
// whose newest meta has one byte flipped opens at the previous commit and
// must say so in a note, not print only "ok".
func TestCheckNotesDamagedNewestMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := db.Update(func(tx *rivet.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	txid := func(slot int) uint64 {
		b := img[slot*4096+16 : slot*4096+24]
		return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24
	}
	newest := 0
	if txid(1) > txid(0) {
		newest = 1
	}
	img[newest*4096+100] ^= 1
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	var notes []string
	n, err := rivetEngine{}.Check(path, func(e error) { notes = append(notes, e.Error()) })
	if err != nil || n != 0 {
		t.Fatalf("check: %d problems, %v", n, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "not the newest commit") || !strings.Contains(notes[0], "is damaged") {
		t.Fatalf("notes %q, want one saying the newest meta is damaged", notes)
	}
}

//go:build cgo && lmdb

package lmdb

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.mdb")
	env, err := Open(path, Options{MapSize: 64 << 20, MaxDBs: 4})
	if err != nil {
		t.Fatal(err)
	}
	var keys, vals [][]byte
	for i := range 100 {
		keys = append(keys, fmt.Appendf(nil, "k%03d", i))
		vals = append(vals, fmt.Appendf(nil, "v%d", i))
	}
	if err := env.Update(func(tx *Txn) error {
		d, err := tx.OpenDB([]byte("a"), true)
		if err != nil {
			return err
		}
		return tx.PutMany(d, keys, vals)
	}); err != nil {
		t.Fatal(err)
	}
	// A failing function aborts: nothing of it is visible.
	boom := errors.New("boom")
	if err := env.Update(func(tx *Txn) error {
		d, _ := tx.OpenDB([]byte("a"), false)
		if err := tx.DelMany(d, keys); err != nil {
			return err
		}
		return boom
	}); err != boom {
		t.Fatalf("Update returned %v", err)
	}
	if err := env.Update(func(tx *Txn) error {
		d, _ := tx.OpenDB([]byte("a"), false)
		return tx.DelMany(d, [][]byte{keys[0], []byte("missing")})
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := Open(path, Options{ReadOnly: true, MapSize: 64 << 20, MaxDBs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	err = ro.View(func(tx *Txn) error {
		d, err := tx.OpenDB([]byte("a"), false)
		if err != nil {
			return err
		}
		found, err := tx.GetMany(d, append(keys[:3:3], []byte("nope")))
		if err != nil || found != 2 { // keys[0] was deleted
			t.Errorf("GetMany = %d, %v; want 2", found, err)
		}
		pairs, err := tx.ScanMany(d, [][]byte{[]byte("k0"), []byte("k095"), []byte("z")}, 10)
		if err != nil || pairs != 10+5 {
			t.Errorf("ScanMany = %d, %v; want 15", pairs, err)
		}
		_, err = tx.OpenDB([]byte("b"), false)
		if err == nil || !strings.Contains(err.Error(), "dbi_open") {
			t.Errorf("opening a missing database: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if Version() == "" {
		t.Error("no library version")
	}
}

package rivet

import (
	"path/filepath"
	"testing"
)

// TestCompactIntoTopLevelValue: a plain value at the top level (which
// Tx.ForEach visits with a nil bucket, as bbolt's does) is copied as it is,
// beside the buckets, instead of stopping the copy.
func TestCompactIntoTopLevelValue(t *testing.T) {
	dir := t.TempDir()
	src, err := Open(filepath.Join(dir, "src"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Update(func(tx *Tx) error {
		if err := tx.Cursor().Bucket().Put([]byte("a-top"), []byte("plain")); err != nil {
			return err
		}
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	dst, err := Open(filepath.Join(dir, "dst"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := CompactInto(dst, src, 1<<20); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, dst)
	if err := dst.View(func(tx *Tx) error {
		if v := tx.Cursor().Bucket().Get([]byte("a-top")); string(v) != "plain" {
			t.Errorf("top-level value after the copy: %q", v)
		}
		if b := tx.Bucket([]byte("b")); b == nil || string(b.Get([]byte("k"))) != "v" {
			t.Errorf("bucket b after the copy: %v", b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

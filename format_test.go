package rivet

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

var writeFixtures = flag.Bool("rivet.writefixtures", false, "write testdata/format<N>.db with this build's format (only when the format version changes)")

// fixtureUpdates builds the content of the format fixtures: buckets with
// plain values, a nested bucket, an empty bucket, sequences, values stored
// in multi-page leaves and out of line (blobs), and enough keys for branch
// pages (1 KiB pages).
func fixtureUpdates(tx *Tx) error {
	a, err := tx.CreateBucket([]byte("a"))
	if err != nil {
		return err
	}
	for i := 0; i < 300; i++ {
		if err := a.Put([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("value %d", i))); err != nil {
			return err
		}
	}
	if err := a.SetSequence(42); err != nil {
		return err
	}
	n, err := a.CreateBucket([]byte("nested"))
	if err != nil {
		return err
	}
	for i := 0; i < 10; i++ {
		if err := n.Put([]byte(fmt.Sprintf("n%d", i)), []byte{byte(i)}); err != nil {
			return err
		}
	}
	if _, err := tx.CreateBucket([]byte("empty")); err != nil {
		return err
	}
	big, err := tx.CreateBucket([]byte("big"))
	if err != nil {
		return err
	}
	if err := big.Put([]byte("blob"), bytes.Repeat([]byte("B"), 20000)); err != nil {
		return err
	}
	if err := big.Put([]byte("mid"), bytes.Repeat([]byte("M"), 3000)); err != nil {
		return err
	}
	return nil
}

// fixtureWant is what fixtureUpdates leaves, as dumpDB flattens it.
func fixtureWant(t *testing.T) map[string]string {
	t.Helper()
	db := openTestDB(t, &Options{PageSize: 1024})
	if err := db.Update(fixtureUpdates); err != nil {
		t.Fatal(err)
	}
	d, err := dumpDB(db.DB)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWriteFixture writes testdata/format<N>.db when -rivet.writefixtures
// is given. Run it once per format version, with the build that writes it,
// and commit the file: later builds must keep opening it.
func TestWriteFixture(t *testing.T) {
	if !*writeFixtures {
		t.Skip("only with -rivet.writefixtures")
	}
	path := filepath.Join("testdata", fmt.Sprintf("format%d.db", page.FormatVersion))
	_ = os.Remove(path)
	db, err := Open(path, 0o644, &Options{PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fixtureUpdates); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// TestOpenOlderFormats opens every committed fixture (testdata/format*.db,
// written by the build of that format): read-only it holds exactly what
// fixtureUpdates wrote and passes Check; writable it takes a commit, after
// which both metas' format is this build's or the file's older one (the
// commit rewrote one meta), passes Check and still holds everything.
func TestOpenOlderFormats(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "format*.db"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures (%v)", err)
	}
	want := fixtureWant(t)
	for _, src := range paths {
		img, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		ro, err := Open(path, 0o600, &Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: read-only Open: %v", src, err)
		}
		checkNamed(t, src, ro)
		got, err := dumpDB(ro)
		if err != nil {
			t.Fatal(err)
		}
		_ = ro.Close()
		if !sameDump(got, want) {
			t.Fatalf("%s holds different data: %s", src, describeDiff(got, want))
		}
		db, err := Open(path, 0o600, nil)
		if err != nil {
			t.Fatalf("%s: Open: %v", src, err)
		}
		if err := db.Update(func(tx *Tx) error { return tx.Bucket([]byte("a")).Put([]byte("new"), []byte("key")) }); err != nil {
			t.Fatalf("%s: commit: %v", src, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err = Open(path, 0o600, nil)
		if err != nil {
			t.Fatalf("%s: reopen: %v", src, err)
		}
		checkNamed(t, src+" after a commit", db)
		got, err = dumpDB(db)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		want["a/\x00new"] = "key"
		if !sameDump(got, want) {
			t.Fatalf("%s after a commit: %s", src, describeDiff(got, want))
		}
		delete(want, "a/\x00new")
		img, _ = os.ReadFile(path)
		newest := uint32(0)
		for slot := 0; slot < 2; slot++ {
			if v := uint32(img[slot*1024+4]) | uint32(img[slot*1024+5])<<8; v > newest {
				newest = v
			}
		}
		if newest != page.FormatVersion {
			t.Errorf("%s: after a commit the newest meta is format %d, want %d", src, newest, page.FormatVersion)
		}
		t.Logf("%s: opened, read, checked, committed (now format %d)", src, newest)
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// migrateFixture builds a bbolt file with what a migration must carry:
// buckets nested three levels deep, sequences, empty buckets (top-level
// and nested), empty values, a 1 MiB value and 20,000 keys. It returns
// the file's path.
func migrateFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src.bbolt")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		users, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		if err := users.SetSequence(42); err != nil {
			return err
		}
		for i := range 20000 {
			if err := users.Put(fmt.Appendf(nil, "user%06d", i), fmt.Appendf(nil, "name-%d", i*7)); err != nil {
				return err
			}
		}
		if err := users.Put([]byte("empty-value"), []byte{}); err != nil {
			return err
		}
		logs, err := users.CreateBucket([]byte("logs"))
		if err != nil {
			return err
		}
		if err := logs.SetSequence(7); err != nil {
			return err
		}
		deep, err := logs.CreateBucket([]byte("deep"))
		if err != nil {
			return err
		}
		if err := deep.SetSequence(1 << 40); err != nil {
			return err
		}
		for i := range 100 {
			if err := deep.Put(fmt.Appendf(nil, "d%03d", i), bytes.Repeat([]byte{byte(i)}, i)); err != nil {
				return err
			}
		}
		if _, err := logs.CreateBucket([]byte("empty-nested")); err != nil {
			return err
		}
		if err := logs.Put([]byte("big"), bytes.Repeat([]byte("0123456789abcdef"), 1<<16)); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("empty")); err != nil {
			return err
		}
		seqOnly, err := tx.CreateBucket([]byte("seq-only"))
		if err != nil {
			return err
		}
		return seqOnly.SetSequence(99)
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// boltDump lists a bbolt file's contents, one line per bucket (with its
// sequence) and per key (with its value), independently of the code under
// test.
func boltDump(t *testing.T, path string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	var walk func(b *bolt.Bucket, path string) error
	walk = func(b *bolt.Bucket, path string) error {
		out = append(out, fmt.Sprintf("B %s seq=%d", path, b.Sequence()))
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(b.Bucket(k), path+"/"+string(k))
			}
			out = append(out, fmt.Sprintf("K %s %q %x", path, k, v))
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b, string(name)) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rivetDump is boltDump for a rivet file.
func rivetDump(t *testing.T, path string) []string {
	t.Helper()
	db, err := rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	var walk func(b *rivet.Bucket, path string) error
	walk = func(b *rivet.Bucket, path string) error {
		out = append(out, fmt.Sprintf("B %s seq=%d", path, b.Sequence()))
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(b.Bucket(k), path+"/"+string(k))
			}
			out = append(out, fmt.Sprintf("K %s %q %x", path, k, v))
			return nil
		})
	}
	err = db.View(func(tx *rivet.Tx) error {
		return tx.ForEach(func(name []byte, b *rivet.Bucket) error { return walk(b, string(name)) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: line %d is %.200s, want %.200s", what, i, got[i], want[i])
		}
	}
}

func rivetCheckFile(t *testing.T, path string) {
	t.Helper()
	db, err := rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *rivet.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("check %s: %v", path, err)
	}
}

func boltCheckFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("bbolt check %s: %v", path, err)
	}
}

// TestImportExportRoundTrip: bbolt -> rivet -> bbolt keeps every bucket,
// key, value and sequence; both copies pass their engine's Check; the
// sources are left byte for byte as they were.
func TestImportExportRoundTrip(t *testing.T) {
	src := migrateFixture(t)
	want := boltDump(t, src)
	srcSum := fileDigest(t, src)
	dir := t.TempDir()
	mid := filepath.Join(dir, "mid.rivet")
	back := filepath.Join(dir, "back.bbolt")

	// A small --tx-size makes the copy commit many times, mid-bucket and
	// three levels down, so reopening the bucket path is exercised.
	out, errOut, code := runBin(t, "import", "--tx-size", "64KiB", "--page-size", "4096", src, mid)
	wantCode(t, code, 0, out, errOut)
	if !strings.Contains(out, "imported 20,102 keys in 6 buckets") || !strings.Contains(out, ": digest ") {
		t.Fatalf("import output:\n%s", out)
	}
	if fileDigest(t, src) != srcSum {
		t.Fatal("import changed its source file")
	}
	rivetCheckFile(t, mid)
	sameLines(t, "rivet copy", rivetDump(t, mid), want)
	if left, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}

	midSum := fileDigest(t, mid)
	out, errOut, code = runBin(t, "export", mid, back)
	wantCode(t, code, 0, out, errOut)
	if !strings.Contains(out, "exported 20,102 keys in 6 buckets") {
		t.Fatalf("export output:\n%s", out)
	}
	if fileDigest(t, mid) != midSum {
		t.Fatal("export changed its source file")
	}
	boltCheckFile(t, back)
	sameLines(t, "bbolt round trip", boltDump(t, back), want)

	// The two digests printed agree with rivet verify's, across formats.
	out, errOut, code = runBin(t, "verify", src, back)
	wantCode(t, code, 0, out, errOut)
	if !strings.Contains(out, "identical: digest") {
		t.Fatalf("verify output:\n%s", out)
	}
}

func TestImportRefusals(t *testing.T) {
	src := migrateFixture(t)
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst.rivet")
	if err := os.WriteFile(dst, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBin(t, "import", src, dst)
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "already exists: pass --force") {
		t.Fatalf("stderr:\n%s", errOut)
	}
	if b, _ := os.ReadFile(dst); string(b) != "precious" {
		t.Fatal("refused import touched DST")
	}

	// Wrong format: SRC is not a bbolt file (a rivet file, then garbage).
	out, errOut, code = runBin(t, "import", "--force", src, dst)
	wantCode(t, code, 0, out, errOut)
	out, errOut, code = runBin(t, "import", dst, filepath.Join(dir, "x.rivet"))
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "is a rivet file: rivet import reads bbolt files") {
		t.Fatalf("stderr:\n%s", errOut)
	}
	out, errOut, code = runBin(t, "export", src, filepath.Join(dir, "x.bbolt"))
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "is a bbolt file: rivet export reads rivet files") {
		t.Fatalf("stderr:\n%s", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.bbolt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused export left DST behind: %v", err)
	}
	// SRC and DST the same file, even with --force.
	out, errOut, code = runBin(t, "import", "--force", src, src)
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "same file") {
		t.Fatalf("stderr:\n%s", errOut)
	}
	out, errOut, code = runBin(t, "import", "--tx-size", "0", src, filepath.Join(dir, "y.rivet"))
	wantCode(t, code, 2, out, errOut)
}

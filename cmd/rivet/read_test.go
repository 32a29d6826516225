package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// fixtureTx is the part of a write transaction fixtures need, the same
// for both engines.
type fixtureTx interface {
	create(path ...string) fixtureBucket
}

type fixtureBucket interface {
	put(k, v []byte)
	setSequence(n uint64)
}

// fillFixture writes the read commands' fixture: two top-level buckets, a
// nested bucket two levels down, a binary key and value, an empty value,
// a sequence.
func fillFixture(t *testing.T, tx fixtureTx) {
	users := tx.create("users")
	users.put([]byte("alice"), []byte("admin"))
	users.put([]byte("bob"), []byte("user"))
	users.put([]byte("carol"), []byte{})
	users.setSequence(42)
	sess := tx.create("users", "sessions")
	sess.put([]byte{0x00, 0x01}, []byte{0xff, 0xfe, '\n'})
	deep := tx.create("users", "sessions", "deep")
	deep.put([]byte("k"), []byte("v"))
	logs := tx.create("logs")
	for i := 0; i < 50; i++ {
		logs.put([]byte(fmt.Sprintf("log%03d", i)), []byte(strings.Repeat("x", i)))
	}
}

// makeFixture creates the fixture file in format and returns its path.
func makeFixture(t *testing.T, format string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), format+".db")
	switch format {
	case formatRivet:
		db, err := rivet.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *rivet.Tx) error { fillFixture(t, rivetFixture{t, tx}); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	case formatBbolt:
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error { fillFixture(t, boltFixture{t, tx}); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

type rivetFixture struct {
	t  *testing.T
	tx *rivet.Tx
}

func (f rivetFixture) create(path ...string) fixtureBucket {
	b, err := f.tx.CreateBucketIfNotExists([]byte(path[0]))
	for _, p := range path[1:] {
		if err != nil {
			break
		}
		b, err = b.CreateBucketIfNotExists([]byte(p))
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return rivetFixtureBucket{f.t, b}
}

type rivetFixtureBucket struct {
	t *testing.T
	b *rivet.Bucket
}

func (b rivetFixtureBucket) put(k, v []byte) {
	if err := b.b.Put(k, v); err != nil {
		b.t.Fatal(err)
	}
}
func (b rivetFixtureBucket) setSequence(n uint64) {
	if err := b.b.SetSequence(n); err != nil {
		b.t.Fatal(err)
	}
}

type boltFixture struct {
	t  *testing.T
	tx *bolt.Tx
}

func (f boltFixture) create(path ...string) fixtureBucket {
	b, err := f.tx.CreateBucketIfNotExists([]byte(path[0]))
	for _, p := range path[1:] {
		if err != nil {
			break
		}
		b, err = b.CreateBucketIfNotExists([]byte(p))
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return boltFixtureBucket{f.t, b}
}

type boltFixtureBucket struct {
	t *testing.T
	b *bolt.Bucket
}

func (b boltFixtureBucket) put(k, v []byte) {
	if err := b.b.Put(k, v); err != nil {
		b.t.Fatal(err)
	}
}
func (b boltFixtureBucket) setSequence(n uint64) {
	if err := b.b.SetSequence(n); err != nil {
		b.t.Fatal(err)
	}
}

// TestReadCommands runs every read command on a rivet and a bbolt fixture:
// the output holds what the fixture holds, the exit codes are 0, 1 and 2
// where they should be, and the file's bytes are unchanged.
func TestReadCommands(t *testing.T) {
	for _, format := range []string{formatRivet, formatBbolt} {
		t.Run(format, func(t *testing.T) {
			path := makeFixture(t, format)
			before := fileDigest(t, path)
			ok := func(args ...string) string {
				t.Helper()
				out, errOut, code := runBin(t, args...)
				wantCode(t, code, 0, out, errOut)
				return out
			}
			fails := func(want int, msg string, args ...string) {
				t.Helper()
				out, errOut, code := runBin(t, args...)
				wantCode(t, code, want, out, errOut)
				if !strings.Contains(errOut, msg) || strings.Count(strings.TrimSpace(errOut), "\n") > 2 || strings.Contains(errOut, "goroutine") {
					t.Errorf("rivet %v: stderr %q, want one line containing %q", args, errOut, msg)
				}
			}

			if got := ok("buckets", path); got != "logs\nusers\n" {
				t.Errorf("buckets: %q", got)
			}
			if got := ok("buckets", path, "users"); got != "sessions\n" {
				t.Errorf("buckets users: %q", got)
			}
			rec := ok("buckets", "-r", path)
			for _, want := range []string{"users  (3 keys, sequence 42)\n", "  sessions  (1 keys, sequence 0)\n", "    deep  (1 keys, sequence 0)\n", "logs  (50 keys"} {
				if !strings.Contains(rec, want) {
					t.Errorf("buckets -r lacks %q:\n%s", want, rec)
				}
			}
			if got := ok("keys", path, "users"); got != "alice\nbob\ncarol\nsessions (bucket)\n" {
				t.Errorf("keys users: %q", got)
			}
			if got := ok("keys", "--prefix", "log04", "--limit", "3", path, "logs"); got != "log040\nlog041\nlog042\n" {
				t.Errorf("keys --prefix --limit: %q", got)
			}
			if got := ok("keys", "--values", path, "users", "sessions"); got != "0x0001 = 0xfffe0a\ndeep (bucket)\n" {
				t.Errorf("keys --values of binary entries: %q", got)
			}
			if got := ok("keys", "--format", "ascii", "--values", path, "users", "sessions"); got != `\x00\x01 = \xff\xfe\n`+"\ndeep (bucket)\n" {
				t.Errorf("keys --format ascii: %q", got)
			}
			if got := ok("get", path, "users", "alice"); got != "admin\n" {
				t.Errorf("get: %q", got)
			}
			if got := ok("get", "--format", "raw", "--parse-format", "hex", path, "7573657273", "73657373696f6e73", "0001"); got != "\xff\xfe\n" {
				t.Errorf("get raw by hex path: %q", got)
			}
			if got := ok("get", "--format", "json", path, "users", "sessions", "deep", "k"); got != `{"key":"k","value":"v"}`+"\n" {
				t.Errorf("get json: %q", got)
			}
			if got := ok("get", path, "users", "carol"); got != "\n" {
				t.Errorf("get of an empty value: %q", got)
			}
			fails(1, "key not found: users/dave", "get", path, "users", "dave")
			fails(1, "bucket not found: nope", "keys", path, "nope")
			fails(1, "is a bucket", "get", path, "users", "sessions")
			fails(2, "requires at least 3 arg", "get", path, "users")
			fails(2, "--format", "keys", "--format", "bogus", path, "users")
			fails(2, "not hex", "get", "--parse-format", "hex", path, "zz", "k")

			dump := ok("dump", path)
			for _, want := range []string{"bucket users (sequence 42)\n  alice = admin\n", "  bucket sessions (sequence 0)\n    0x0001 = 0xfffe0a\n    bucket deep (sequence 0)\n      k = v\n", "  log049 = " + strings.Repeat("x", 49)} {
				if !strings.Contains(dump, want) {
					t.Errorf("dump lacks %q:\n%s", want, dump)
				}
			}
			if strings.Count(dump, " = ") != 3+1+1+50 {
				t.Errorf("dump has %d entries, want 55", strings.Count(dump, " = "))
			}
			lines := strings.Split(strings.TrimSpace(ok("dump", "--format", "json", path, "users")), "\n")
			if len(lines) != 1+3+1+1+1+1 {
				t.Errorf("dump json of users: %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			for _, l := range lines {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Errorf("dump json line %q: %v", l, err)
				}
			}
			if !strings.Contains(strings.Join(lines, "\n"), `{"bucket":["users","sessions"],"key_hex":"0001","value_hex":"fffe0a"}`) {
				t.Errorf("dump json lacks the binary entry:\n%s", strings.Join(lines, "\n"))
			}

			var structure struct {
				Name     string
				KeyN     int
				Children []struct {
					Name string
					KeyN int
				} `json:"buckets"`
			}
			if err := json.Unmarshal([]byte(ok("inspect", path)), &structure); err != nil {
				t.Fatal(err)
			}
			if structure.Name != "root" || len(structure.Children) != 2 || structure.Children[0].Name != "logs" || structure.Children[0].KeyN != 50 || structure.Children[1].KeyN != 3 {
				t.Errorf("inspect: %+v", structure)
			}

			info := ok("info", path)
			for _, want := range []string{"format             " + format, "top-level buckets  2"} {
				if !strings.Contains(info, want) {
					t.Errorf("info lacks %q:\n%s", want, info)
				}
			}
			if format == formatRivet && strings.Count(info, "meta ") != 2 {
				t.Errorf("info does not describe both metas:\n%s", info)
			}
			if after := fileDigest(t, path); after != before {
				t.Fatalf("read commands changed the file: %s -> %s", before, after)
			}
		})
	}
}

// TestDetectionReadsBothMetas: one flipped byte in meta 0's magic leaves
// the file recognised through meta 1, for both formats.
func TestDetectionReadsBothMetas(t *testing.T) {
	for _, format := range []string{formatRivet, formatBbolt} {
		t.Run(format, func(t *testing.T) {
			path := makeFixture(t, format)
			off := int64(0)
			if format == formatBbolt {
				off = 16
				// bbolt alternates metas: one more commit puts the
				// fixture's state in both, so that falling back to meta
				// 1 still shows the buckets.
				db, err := bolt.Open(path, 0o600, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("logs")).Put([]byte("z"), nil) }); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte{0}
			if _, err := f.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0x40
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got, err := detectFormat(path)
			if err != nil || got != format {
				t.Fatalf("detectFormat = %q, %v; want %s", got, err, format)
			}
			out, errOut, code := runBin(t, "buckets", path)
			wantCode(t, code, 0, out, errOut)
			if out != "logs\nusers\n" {
				t.Errorf("buckets after meta 0 damage: %q", out)
			}
		})
	}
}

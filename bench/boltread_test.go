package bench

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// TestBboltFilesReadOnly opens every shape bbolt made (1 to 64 KiB pages)
// read-only with rivet and compares it with bbolt's own view of the same
// file: the whole stream of buckets, keys, values and sequences; each
// bucket's Stats counts and Inspect; random cursor moves and Gets done in
// lockstep on both; the transaction's ID and Size. Nothing may change the
// file.
func TestBboltFilesReadOnly(t *testing.T) {
	for _, s := range boltShapes() {
		t.Run(s.String(), func(t *testing.T) {
			path := s.make(t, t.TempDir())
			before, _ := os.ReadFile(path)
			want := boltDigest(t, path)
			bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer bdb.Close()
			rdb, err := rivet.Open(path, 0o600, &rivet.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			if got := rivetDigest(t, rdb); got.Sum() != want.Sum() {
				t.Fatalf("rivet sees %d buckets, %d keys, %s; bbolt %d, %d, %s", got.Buckets, got.Keys, got.Sum(), want.Buckets, want.Keys, want.Sum())
			}
			rng := rand.New(rand.NewSource(int64(len(before))))
			ops := 0
			err = bdb.View(func(btx *bolt.Tx) error {
				return rdb.View(func(rtx *rivet.Tx) error {
					if btx.ID() != rtx.ID() || btx.Size() != rtx.Size() {
						return fmt.Errorf("ID %d, Size %d; bbolt's %d, %d", rtx.ID(), rtx.Size(), btx.ID(), btx.Size())
					}
					for err := range rtx.Check() {
						return fmt.Errorf("Check: %w", err)
					}
					return btx.ForEach(func(name []byte, bb *bolt.Bucket) error {
						n, err := compareBuckets(rng, string(name), bb, rtx.Bucket(name))
						ops += n
						return err
					})
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Fatal("reading with rivet changed the bbolt file")
			}
			t.Logf("%d buckets, %d keys; %d cursor moves and Gets compared with bbolt", want.Buckets, want.Keys, ops)
		})
	}
}

// compareBuckets compares a bucket, and its nested buckets, as bbolt and
// rivet show it, and returns the operations compared.
func compareBuckets(rng *rand.Rand, name string, bb *bolt.Bucket, rb *rivet.Bucket) (int, error) {
	if rb == nil {
		return 0, fmt.Errorf("%s: rivet has no such bucket", name)
	}
	if bb.Sequence() != rb.Sequence() {
		return 0, fmt.Errorf("%s: sequence %d, bbolt's %d", name, rb.Sequence(), bb.Sequence())
	}
	bs, rs := bb.Stats(), rb.Stats()
	type pair struct {
		what string
		r, b int
	}
	for _, p := range []pair{
		{"KeyN", rs.KeyN, bs.KeyN}, {"BucketN", rs.BucketN, bs.BucketN}, {"InlineBucketN", rs.InlineBucketN, bs.InlineBucketN},
		{"Depth", rs.Depth, bs.Depth}, {"LeafPageN", rs.LeafPageN, bs.LeafPageN}, {"BranchPageN", rs.BranchPageN, bs.BranchPageN},
		{"LeafOverflowN", rs.LeafOverflowN, bs.LeafOverflowN}, {"BranchOverflowN", rs.BranchOverflowN, bs.BranchOverflowN},
		{"LeafAlloc", rs.LeafAlloc, bs.LeafAlloc}, {"BranchAlloc", rs.BranchAlloc, bs.BranchAlloc},
	} {
		if p.r != p.b {
			return 0, fmt.Errorf("%s: Stats.%s %d, bbolt's %d", name, p.what, p.r, p.b)
		}
	}
	if fmt.Sprint(rb.Inspect()) != fmt.Sprint(bb.Inspect()) {
		return 0, fmt.Errorf("%s: Inspect %v, bbolt's %v", name, rb.Inspect(), bb.Inspect())
	}
	var keys [][]byte
	_ = bb.ForEach(func(k, _ []byte) error {
		keys = append(keys, k)
		return nil
	})
	ops := 0
	bc, rc := bb.Cursor(), rb.Cursor()
	for i := 0; i < 300; i++ {
		var bk, bv, rk, rv []byte
		op := rng.Intn(7)
		var arg []byte
		switch op {
		case 0:
			bk, bv = bc.First()
			rk, rv = rc.First()
		case 1:
			bk, bv = bc.Last()
			rk, rv = rc.Last()
		case 2, 3:
			bk, bv = bc.Next()
			rk, rv = rc.Next()
		case 4:
			bk, bv = bc.Prev()
			rk, rv = rc.Prev()
		case 5, 6:
			arg = make([]byte, rng.Intn(9))
			rng.Read(arg)
			if len(keys) > 0 && rng.Intn(2) == 0 {
				arg = append([]byte(nil), keys[rng.Intn(len(keys))]...)
				if rng.Intn(2) == 0 {
					arg = append(arg, 0)
				}
			}
			if op == 5 {
				bk, bv = bc.Seek(arg)
				rk, rv = rc.Seek(arg)
			} else {
				bk, bv = arg, bb.Get(arg)
				rk, rv = arg, rb.Get(arg)
			}
		}
		ops++
		if !bytes.Equal(bk, rk) || !bytes.Equal(bv, rv) || (bv == nil) != (rv == nil) {
			return ops, fmt.Errorf("%s: op %d (%q): rivet %q (%d bytes, nil %t), bbolt %q (%d bytes, nil %t)",
				name, op, arg, rk, len(rv), rv == nil, bk, len(bv), bv == nil)
		}
	}
	err := bb.ForEachBucket(func(k []byte) error {
		n, err := compareBuckets(rng, name+"/"+string(k), bb.Bucket(k), rb.Bucket(k))
		ops += n
		return err
	})
	return ops, err
}

// TestBboltFilesConvert converts every shape at Open (Options.ConvertBbolt)
// and compares the result with bbolt's view of the original: same stream;
// the backup is the original, byte for byte, and bbolt still opens and
// checks it.
func TestBboltFilesConvert(t *testing.T) {
	for _, s := range boltShapes() {
		t.Run(s.String(), func(t *testing.T) {
			path := s.make(t, t.TempDir())
			orig, _ := os.ReadFile(path)
			want := boltDigest(t, path)
			db, err := rivet.Open(path, 0o600, &rivet.Options{ConvertBbolt: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := rivetDigest(t, db); got.Sum() != want.Sum() {
				t.Fatalf("converted: %d buckets, %d keys, %s; bbolt %d, %d, %s", got.Buckets, got.Keys, got.Sum(), want.Buckets, want.Keys, want.Sum())
			}
			if err := db.View(func(tx *rivet.Tx) error {
				for err := range tx.Check() {
					return err
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			backup := path + rivet.BboltBackupSuffix
			if b, err := os.ReadFile(backup); err != nil || !bytes.Equal(b, orig) {
				t.Fatalf("backup: %v; the original: %t", err, bytes.Equal(b, orig))
			}
			bdb, err := bolt.Open(backup, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer bdb.Close()
			if err := bdb.View(func(tx *bolt.Tx) error {
				for err := range tx.Check() {
					return err
				}
				return nil
			}); err != nil {
				t.Fatalf("bbolt's check of the backup: %v", err)
			}
			fi, _ := os.Stat(path)
			t.Logf("%d-byte bbolt file converted into a %d-byte rivet file", len(orig), fi.Size())
		})
	}
}

// TestBboltCopyOpensInBbolt: Tx.WriteTo of a bbolt file opened read-only
// in rivet writes a file bbolt opens, checks and reads the same.
func TestBboltCopyOpensInBbolt(t *testing.T) {
	s := boltShape{name: "mixed", pageSize: 4096, fill: fillMixed}
	path := s.make(t, t.TempDir())
	want := boltDigest(t, path)
	db, err := rivet.Open(path, 0o600, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cp := filepath.Join(t.TempDir(), "copy.bbolt")
	if err := db.View(func(tx *rivet.Tx) error { return tx.CopyFile(cp, 0o600) }); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(cp, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("bbolt's check of the copy: %v", err)
	}
	// bbolt writes to the copy as to any of its files.
	if err := bdb.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("written by bbolt"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = bdb.Close()
	got := boltDigest(t, cp)
	if got.Buckets != want.Buckets+1 || got.Keys != want.Keys {
		t.Fatalf("copy after bbolt's write: %d buckets, %d keys; want %d, %d", got.Buckets, got.Keys, want.Buckets+1, want.Keys)
	}
}

// TestBboltPageSizeRivetCannotServe: a bbolt file of 128 KiB pages (bbolt
// takes any power of two; rivet serves 1 to 64 KiB) is refused by a
// read-only Open and by a conversion, with an error that names the page
// size, and is left as it was.
func TestBboltPageSizeRivetCannotServe(t *testing.T) {
	s := boltShape{name: "big pages", pageSize: 128 << 10, fill: fillDeep}
	path := s.make(t, t.TempDir())
	before, _ := os.ReadFile(path)
	for _, opts := range []*rivet.Options{{ReadOnly: true}, {ConvertBbolt: true}} {
		_, err := rivet.Open(path, 0o600, opts)
		if !errors.Is(err, rivet.ErrBboltFile) || !strings.Contains(err.Error(), "131072-byte pages") {
			t.Fatalf("%+v: %v, want ErrBboltFile naming the page size", opts, err)
		}
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("the bbolt file changed")
	}
	if _, err := os.Stat(path + rivet.BboltBackupSuffix); !os.IsNotExist(err) {
		t.Fatalf("a backup was made: %v", err)
	}
}

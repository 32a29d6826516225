package bench

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
	bolt "go.etcd.io/bbolt"
)

// updateBoltfiles rewrites the bbolt files the library's tests read
// (internal/boltfile/testdata), made here by bbolt v1.5 itself.
var updateBoltfiles = flag.Bool("rivet.update-boltfiles", false, "rewrite internal/boltfile/testdata from bbolt")

// boltShape is a bbolt file of one shape, made by bbolt v1.5.
type boltShape struct {
	name           string
	pageSize       int
	noFreelistSync bool
	// testdata: small enough to commit for the library's tests.
	testdata bool
	fill     func(db *bolt.DB) error
}

// boltShapes are the files the read-only view and the conversion are
// compared with bbolt on: empty, nested and inline buckets, sequences,
// values spanning overflow pages, freed pages, branch levels, odd keys and
// empty values, at 1, 4, 16 and 64 KiB pages.
func boltShapes() []boltShape {
	var shapes []boltShape
	for _, ps := range []int{1024, 4096, 16384, 65536} {
		small := ps <= 4096
		shapes = append(shapes,
			boltShape{name: "empty", pageSize: ps, testdata: small, fill: func(*bolt.DB) error { return nil }},
			boltShape{name: "mixed", pageSize: ps, testdata: small, fill: fillMixed},
			boltShape{name: "freed", pageSize: ps, testdata: ps == 4096, fill: fillFreed},
			boltShape{name: "wide", pageSize: ps, fill: fillWide},
		)
	}
	shapes = append(shapes,
		boltShape{name: "nofreelist", pageSize: 4096, noFreelistSync: true, testdata: true, fill: fillFreed},
		boltShape{name: "inline", pageSize: 4096, testdata: true, fill: fillInline},
		boltShape{name: "deep", pageSize: 4096, testdata: true, fill: fillDeep},
		boltShape{name: "overflow", pageSize: 4096, fill: fillOverflow},
	)
	return shapes
}

func (s boltShape) String() string {
	return fmt.Sprintf("%s-%dk", s.name, s.pageSize/1024)
}

// make writes the shape's file into dir and returns its path.
func (s boltShape) make(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, s.String()+".bbolt")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: s.pageSize, NoFreelistSync: s.noFreelistSync})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.fill(db); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func boltKey(i int) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, uint64(i)*2654435761%1000003)
	return k
}

// fillMixed: a bit of everything in a few transactions.
func fillMixed(db *bolt.DB) error {
	rng := rand.New(rand.NewSource(1))
	if err := db.Update(func(tx *bolt.Tx) error {
		a, err := tx.CreateBucket([]byte("alpha"))
		if err != nil {
			return err
		}
		for i := 0; i < 500; i++ {
			v := make([]byte, rng.Intn(200))
			rng.Read(v)
			if err := a.Put(boltKey(i), v); err != nil {
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
		if _, err := n.NextSequence(); err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if err := n.Put([]byte{byte(i)}, []byte("small")); err != nil {
				return err
			}
		}
		if _, err := a.CreateBucket([]byte("empty nested")); err != nil {
			return err
		}
		big, err := tx.CreateBucket([]byte("big values"))
		if err != nil {
			return err
		}
		for i := 0; i < 5; i++ {
			v := bytes.Repeat([]byte{byte('a' + i)}, db.Info().PageSize*(i+1)+17)
			if err := big.Put([]byte{byte(i)}, v); err != nil {
				return err
			}
		}
		odd, err := tx.CreateBucket([]byte{0})
		if err != nil {
			return err
		}
		for _, k := range [][]byte{{0}, {0, 0}, {0xff}, {0xff, 0xff, 0xff}, []byte("key with spaces")} {
			if err := odd.Put(k, nil); err != nil {
				return err
			}
		}
		_, err = tx.CreateBucket([]byte("zz empty top"))
		return err
	}); err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		a := tx.Bucket([]byte("alpha"))
		for i := 0; i < 500; i += 7 {
			if err := a.Delete(boltKey(i)); err != nil {
				return err
			}
		}
		return a.Put([]byte("after"), []byte("second txn"))
	})
}

// fillFreed: many keys, then half deleted and a bucket dropped, so the
// freelist holds pages.
func fillFreed(db *bolt.DB) error {
	for round := 0; round < 4; round++ {
		if err := db.Update(func(tx *bolt.Tx) error {
			for _, name := range []string{"keep", "drop"} {
				b, err := tx.CreateBucketIfNotExists([]byte(name))
				if err != nil {
					return err
				}
				for i := 0; i < 300; i++ {
					if err := b.Put(boltKey(round*300+i), bytes.Repeat([]byte{byte(i)}, 60)); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte("drop")); err != nil {
			return err
		}
		b := tx.Bucket([]byte("keep"))
		for i := 0; i < 1200; i += 2 {
			if err := b.Delete(boltKey(i)); err != nil {
				return err
			}
		}
		return nil
	})
}

// fillWide: enough keys for branch pages two levels deep.
func fillWide(db *bolt.DB) error {
	for s := 0; s < 20000; s += 5000 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("wide"))
			if err != nil {
				return err
			}
			for i := s; i < s+5000; i++ {
				if err := b.Put(boltKey(i), []byte(fmt.Sprintf("value %d", i))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// fillInline: many small nested buckets (inline), some empty, with
// sequences, beside a paged one.
func fillInline(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		top, err := tx.CreateBucket([]byte("containers"))
		if err != nil {
			return err
		}
		for i := 0; i < 300; i++ {
			c, err := top.CreateBucket([]byte(fmt.Sprintf("c%04d", i)))
			if err != nil {
				return err
			}
			if i%3 == 0 {
				continue // an empty inline bucket
			}
			if err := c.SetSequence(uint64(i)); err != nil {
				return err
			}
			for j := 0; j < i%5; j++ {
				if err := c.Put([]byte(fmt.Sprintf("label%d", j)), []byte("x")); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// fillDeep: buckets nested twelve deep, each with a key and a sequence.
func fillDeep(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("level0"))
		if err != nil {
			return err
		}
		for d := 1; d <= 12; d++ {
			if err := b.Put([]byte("k"), []byte(fmt.Sprint(d))); err != nil {
				return err
			}
			if err := b.SetSequence(uint64(d * 1000)); err != nil {
				return err
			}
			if b, err = b.CreateBucket([]byte(fmt.Sprintf("level%d", d))); err != nil {
				return err
			}
		}
		return nil
	})
}

// fillOverflow: values of 1 byte to 1 MiB, so leaves span many pages.
func fillOverflow(db *bolt.DB) error {
	rng := rand.New(rand.NewSource(3))
	return db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("blobs"))
		if err != nil {
			return err
		}
		for i, n := range []int{1, 4000, 4096, 9000, 65536, 300000, 1 << 20} {
			v := make([]byte, n)
			rng.Read(v)
			if err := b.Put([]byte{byte(i)}, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// boltView adapts a bbolt bucket (or a transaction's root) to inspect.WalkBucket.
type boltView struct {
	tx *bolt.Tx
	b  *bolt.Bucket
}

func (v boltView) ForEach(fn func(k, val []byte, isBucket bool) error) error {
	if v.b == nil {
		return v.tx.ForEach(func(name []byte, _ *bolt.Bucket) error { return fn(name, nil, true) })
	}
	return v.b.ForEach(func(k, val []byte) error {
		return fn(k, val, val == nil && v.b.Bucket(k) != nil)
	})
}

func (v boltView) Bucket(name []byte) inspect.WalkBucket {
	var c *bolt.Bucket
	if v.b == nil {
		c = v.tx.Bucket(name)
	} else {
		c = v.b.Bucket(name)
	}
	if c == nil {
		return nil
	}
	return boltView{tx: v.tx, b: c}
}

func (v boltView) Sequence() uint64 {
	if v.b == nil {
		return 0
	}
	return v.b.Sequence()
}

// rivetView adapts a rivet bucket (or a transaction's root) to inspect.WalkBucket.
type rivetView struct {
	tx *rivet.Tx
	b  *rivet.Bucket
}

func (v rivetView) ForEach(fn func(k, val []byte, isBucket bool) error) error {
	if v.b == nil {
		return v.tx.ForEach(func(name []byte, _ *rivet.Bucket) error { return fn(name, nil, true) })
	}
	return v.b.ForEach(func(k, val []byte) error {
		return fn(k, val, val == nil && v.b.Bucket(k) != nil)
	})
}

func (v rivetView) Bucket(name []byte) inspect.WalkBucket {
	var c *rivet.Bucket
	if v.b == nil {
		c = v.tx.Bucket(name)
	} else {
		c = v.b.Bucket(name)
	}
	if c == nil {
		return nil
	}
	return rivetView{tx: v.tx, b: c}
}

func (v rivetView) Sequence() uint64 {
	if v.b == nil {
		return 0
	}
	return v.b.Sequence()
}

// boltDigest is the digest of bbolt's own view of the file at path.
func boltDigest(t testing.TB, path string) *inspect.Digest {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var d *inspect.Digest
	if err := db.View(func(tx *bolt.Tx) error {
		d, err = inspect.DigestOf(boltView{tx: tx})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// rivetDigest is the digest of what db's newest state holds.
func rivetDigest(t testing.TB, db *rivet.DB) *inspect.Digest {
	t.Helper()
	var d *inspect.Digest
	if err := db.View(func(tx *rivet.Tx) error {
		var err error
		d, err = inspect.DigestOf(rivetView{tx: tx})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWriteBboltTestdata rewrites internal/boltfile/testdata: the small
// shapes, each with the digest and counts of bbolt's own view beside it,
// which the library's tests (that cannot import bbolt) compare with.
// Run with -rivet.update-boltfiles.
func TestWriteBboltTestdata(t *testing.T) {
	if !*updateBoltfiles {
		t.Skip("run with -rivet.update-boltfiles to rewrite internal/boltfile/testdata")
	}
	dir := filepath.Join("..", "internal", "boltfile", "testdata")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range boltShapes() {
		if !s.testdata {
			continue
		}
		path := s.make(t, dir)
		d := boltDigest(t, path)
		info := fmt.Sprintf("%s %d %d %d\n", d.Sum(), d.Buckets, d.Keys, d.Bytes)
		if err := os.WriteFile(path+".digest", []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(path)
		t.Logf("%s: %d bytes, %d buckets, %d keys", path, fi.Size(), d.Buckets, d.Keys)
	}
}

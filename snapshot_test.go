package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// snapshotView is everything a read transaction can report about its
// snapshot: its contents (blob values included), Check's findings, every
// top-level bucket's Stats, Inspect, Size and a WriteTo image.
type snapshotView struct {
	dump    map[string]string
	check   []error
	stats   map[string]BucketStats
	inspect BucketStructure
	size    int64
	image   []byte
}

func viewSnapshot(t *testing.T, tx *Tx) snapshotView {
	t.Helper()
	var v snapshotView
	var err error
	if v.dump, err = dumpTx(tx); err != nil {
		t.Fatalf("read the snapshot: %v", err)
	}
	for err := range tx.Check() {
		v.check = append(v.check, err)
	}
	v.stats = map[string]BucketStats{}
	if err := tx.ForEach(func(name []byte, b *Bucket) error {
		v.stats[string(name)] = b.Stats()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v.inspect = tx.Inspect()
	v.size = tx.Size()
	var buf bytes.Buffer
	if _, err := tx.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	v.image = buf.Bytes()
	return v
}

// TestOldSnapshotSeesNothingNewer is the audit of issue 9 item 4: state
// newer than a reader's snapshot must not leak into anything the reader
// sees or writes out. A read transaction is held open while 60 commits
// overwrite, delete and re-add keys, blob values and nested buckets, each
// commit a sync point (so region maps are rewritten in both slots and the
// meta slots alternate many times), the file grows and is remapped. Every
// 10 commits the old transaction's contents, Check, bucket Stats, Inspect,
// Size and WriteTo image must equal what it reported first — the image
// byte for byte — and at the end the image must open as a database holding
// the snapshot, pass Check and take a write.
func TestOldSnapshotSeesNothingNewer(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	db := openTestDB(t, &Options{PageSize: 1024, InitialMmapSize: 1 << 20})
	value := func(n int) []byte {
		v := make([]byte, n)
		rng.Read(v)
		return v
	}
	mutate := func(tx *Tx, round int) error {
		for _, name := range []string{"plain", "blobs"} {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			for i := 0; i < 40; i++ {
				k := []byte(fmt.Sprintf("k%03d", rng.Intn(120)))
				switch {
				case rng.Intn(4) == 0:
					if err := b.Delete(k); err != nil {
						return err
					}
				case name == "blobs":
					// Over a quarter page: stored out of line.
					if err := b.Put(k, value(300+rng.Intn(3000))); err != nil {
						return err
					}
				default:
					if err := b.Put(k, value(1+rng.Intn(100))); err != nil {
						return err
					}
				}
			}
			if _, err := b.NextSequence(); err != nil {
				return err
			}
		}
		nested := []byte(fmt.Sprintf("nested%d", round%3))
		if tx.Bucket(nested) != nil && rng.Intn(2) == 0 {
			return tx.DeleteBucket(nested)
		}
		b, err := tx.CreateBucketIfNotExists(nested)
		if err != nil {
			return err
		}
		c, err := b.CreateBucketIfNotExists([]byte("child"))
		if err != nil {
			return err
		}
		return c.Put([]byte(fmt.Sprint(round)), value(500))
	}
	for round := 0; round < 10; round++ {
		if err := db.Update(func(tx *Tx) error { return mutate(tx, round) }); err != nil {
			t.Fatal(err)
		}
	}

	old, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Rollback() }()
	first := viewSnapshot(t, old)
	if len(first.check) != 0 {
		t.Fatalf("the snapshot fails Check before anything changed: %v", errors.Join(first.check...))
	}
	headSize := func() (n int64) {
		_ = db.View(func(tx *Tx) error { n = tx.Size(); return nil })
		return n
	}
	startSize := headSize()
	for round := 10; round < 70; round++ {
		if err := db.Update(func(tx *Tx) error { return mutate(tx, round) }); err != nil {
			t.Fatal(err)
		}
		if round%10 != 9 {
			continue
		}
		now := viewSnapshot(t, old)
		if len(now.check) != 0 {
			t.Fatalf("after %d commits: Check in the old transaction: %v", round-9, errors.Join(now.check...))
		}
		if !sameDump(first.dump, now.dump) {
			t.Fatalf("after %d commits: the old transaction reads different data: %s", round-9, describeDiff(first.dump, now.dump))
		}
		if !reflect.DeepEqual(first.stats, now.stats) {
			t.Fatalf("after %d commits: bucket Stats changed:\nfirst %+v\nnow   %+v", round-9, first.stats, now.stats)
		}
		if !reflect.DeepEqual(first.inspect, now.inspect) {
			t.Fatalf("after %d commits: Inspect changed:\nfirst %+v\nnow   %+v", round-9, first.inspect, now.inspect)
		}
		if first.size != now.size {
			t.Fatalf("after %d commits: Size %d, first %d", round-9, now.size, first.size)
		}
		if !bytes.Equal(first.image, now.image) {
			t.Fatalf("after %d commits: the WriteTo image changed (%d bytes, first %d)", round-9, len(now.image), len(first.image))
		}
	}
	t.Logf("the head state grew from %d to %d bytes while the old transaction was open (map reserve %d)", startSize, headSize(), 1<<20)
	if err := old.Rollback(); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "copy")
	if err := os.WriteFile(path, first.image, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("open the old snapshot's image: %v", err)
	}
	defer c.Close()
	checkNamed(t, "copy of the old snapshot", c)
	got, err := dumpDB(c)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDump(first.dump, got) {
		t.Fatalf("the copy holds different data: %s", describeDiff(first.dump, got))
	}
	if err := c.Update(func(tx *Tx) error { return mutate(tx, 99) }); err != nil {
		t.Fatalf("write into the copy: %v", err)
	}
	checkNamed(t, "copy after a write", c)
}

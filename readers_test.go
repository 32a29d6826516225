package rivet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// TestReadersSeeTheirSnapshot: readers that began at different commits keep
// seeing exactly their snapshot while a writer keeps committing (and frees
// and reuses pages under them).
func TestReadersSeeTheirSnapshot(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	const keys = 300
	put := func(gen int) {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := 0; i < keys; i++ {
				v := make([]byte, 40)
				binary.BigEndian.PutUint64(v, uint64(gen))
				if err := b.Put([]byte(fmt.Sprintf("%05d", i)), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	var txs []*Tx
	for gen := 1; gen <= 5; gen++ {
		tx, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		put(gen)
	}
	// A concurrent writer keeps going while the readers verify.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := 100; ; gen++ {
			select {
			case <-stop:
				return
			default:
			}
			put(gen)
		}
	}()
	for round := 0; round < 3; round++ {
		for i, tx := range txs {
			want := uint64(i) // reader i began before generation i+1 was written
			n := 0
			err := tx.Bucket([]byte("b")).ForEach(func(k, v []byte) error {
				if got := binary.BigEndian.Uint64(v); got != want {
					return fmt.Errorf("reader %d saw generation %d at %s", i, got, k)
				}
				n++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != keys {
				t.Fatalf("reader %d saw %d keys", i, n)
			}
		}
	}
	close(stop)
	wg.Wait()
	for _, tx := range txs {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentReadersAndWriter runs readers in parallel with a writer that
// grows the file well past the first memory map, under -race.
func TestConcurrentReadersAndWriter(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 4096, InitialMmapSize: 1 << 16})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := db.View(func(tx *Tx) error {
					b := tx.Bucket([]byte("data"))
					if b == nil {
						return nil
					}
					var last uint64
					return b.ForEach(func(k, v []byte) error {
						n := binary.BigEndian.Uint64(k)
						if n != last {
							return fmt.Errorf("gap: key %d after %d", n, last)
						}
						last = n + 1
						if len(v) != 512 {
							return fmt.Errorf("value of %d is %d bytes", n, len(v))
						}
						return nil
					})
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	next := uint64(0)
	for i := 0; i < 60; i++ {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("data"))
			if err != nil {
				return err
			}
			for j := 0; j < 100; j++ {
				k := make([]byte, 8)
				binary.BigEndian.PutUint64(k, next)
				next++
				if err := b.Put(k, make([]byte, 512)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestReadersSeeWrittenPages: readers running alongside the kill workload's
// writer (in-process, no kills) never see the counter go back or a bucket
// vanish, with and without NoSync. Regression test for a reader being
// handed a NoSync commit before its pages were written: commit published
// the new state (db.cur = head) for Periodic and None ahead of WriteRuns, so
// a View begun in between read pages not yet written and saw seq/n missing.
func TestReadersSeeWrittenPages(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%t", noSync), func(t *testing.T) {
			txns := uint64(200) // a flush each
			if noSync {
				txns = 1000
			}
			path := filepath.Join(t.TempDir(), "readers.db")
			db, err := Open(path, 0o600, &Options{PageSize: 1024, NoSync: noSync})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			stop := make(chan struct{})
			errc := make(chan error, 2)
			for range 2 {
				go func() {
					var last uint64
					for {
						select {
						case <-stop:
							errc <- nil
							return
						default:
						}
						err := db.View(func(tx *Tx) error {
							n, err := killCounter(tx)
							if err != nil {
								return err
							}
							if n < last {
								return fmt.Errorf("reader at tx %d saw txn %d after txn %d", tx.ID(), n, last)
							}
							last = n
							return nil
						})
						if err != nil {
							errc <- err
							return
						}
					}
				}()
			}
			for i := uint64(1); i <= txns; i++ {
				ops := killTxn(1, i)
				if err := db.Update(func(tx *Tx) error { return applyKillOps(tx, ops) }); err != nil {
					t.Fatal(err)
				}
				if noSync && i%8 == 0 {
					if err := db.Sync(); err != nil {
						t.Fatal(err)
					}
				}
				if i%64 == 0 && len(errc) > 0 {
					break
				}
			}
			close(stop)
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			mustCheck(t, db)
		})
	}
}

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

// TestOldSnapshotSeesNothingNewer: state newer than a reader's snapshot
// must not leak into anything the reader sees or writes out. A read
// transaction is held open while 60 commits overwrite, delete and re-add
// keys, blob values and nested buckets, each commit a sync point (so region
// maps are rewritten in both slots and the meta slots alternate many
// times), the file grows and is remapped. Every 10 commits the old
// transaction's contents, Check, bucket Stats, Inspect, Size and WriteTo
// image must equal what it reported first — the image byte for byte — and
// at the end the image must open as a database holding the snapshot, pass
// Check and take a write.
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

// TestReaderStats: the counters read transactions and commits keep
// without db.mu — TxN, OpenTxN, the read transactions' TxStats and
// Commits — count exactly, while readers, a writer and Stats run at once,
// and keep their values after Close.
func TestReaderStats(t *testing.T) {
	db := openTestDB(t, nil)
	put := func(i int) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	before := db.Stats()
	put(0)
	old, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	put(1)
	cur, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	if s := db.Stats(); s.OpenTxN != 2 || s.TxN-before.TxN != 2 || s.Commits-before.Commits != 2 {
		t.Fatalf("two readers open on two states after two commits: OpenTxN %d, TxN +%d, Commits +%d", s.OpenTxN, s.TxN-before.TxN, s.Commits-before.Commits)
	}
	for _, tx := range []*Tx{old, cur} {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if s := db.Stats(); s.OpenTxN != 0 {
		t.Fatalf("OpenTxN %d after both readers ended", s.OpenTxN)
	}

	const readers, views, commits = 4, 500, 50
	start := db.Stats()
	var wg sync.WaitGroup
	cursors := make([]int64, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range views {
				if err := db.View(func(tx *Tx) error {
					tx.Bucket([]byte("b")).Cursor().First()
					cursors[r] += tx.Stats().CursorCount
					return nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			if s := db.Stats(); s.OpenTxN < 0 || s.OpenTxN > readers {
				t.Errorf("OpenTxN %d with %d readers", s.OpenTxN, readers)
				return
			}
		}
	}()
	for i := range commits {
		put(2 + i)
	}
	wg.Wait()
	end := db.Stats()
	d := end.Sub(&start)
	var wantCursors int64
	for _, c := range cursors {
		wantCursors += c
	}
	if d.TxN != readers*views || d.Commits != commits || end.OpenTxN != 0 {
		t.Fatalf("TxN +%d (want %d), Commits +%d (want %d), OpenTxN %d (want 0)", d.TxN, readers*views, d.Commits, commits, end.OpenTxN)
	}
	// Each put's write transaction creates cursors of its own.
	if got := d.TxStats.GetCursorCount(); wantCursors < readers*views || got < wantCursors {
		t.Fatalf("CursorCount +%d, the read transactions alone made %d (at least %d)", got, wantCursors, readers*views)
	}
	if d.TxStats.GetWrite() < commits {
		t.Fatalf("Write +%d over %d commits", d.TxStats.GetWrite(), commits)
	}

	mustCheck(t, db.DB)
	last := db.Stats()
	if err := db.DB.Close(); err != nil {
		t.Fatal(err)
	}
	closed := db.Stats()
	if closed.TxN != last.TxN || closed.Commits != last.Commits || closed.OpenTxN != 0 || closed.TxStats != last.TxStats {
		t.Fatalf("Close changed the counters: TxN %d -> %d, Commits %d -> %d, OpenTxN %d", last.TxN, closed.TxN, last.Commits, closed.Commits, closed.OpenTxN)
	}
}

package difftest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The exported fields of bbolt's DB, Bucket and Tx, changed on an open
// database: each test makes the same steps on bbolt v1.5.0 and on rivet and
// requires the same outcomes (and, where both have a counter to show it,
// the same effect).

// fieldPair is a bbolt DB and a rivet DB opened alike, each also as the
// harness's DB for the steps both engines share.
type fieldPair struct {
	bolt    *bolt.DB
	rivet   *rivet.DB
	engines []fieldSide
}

// fieldSide is one engine of a fieldPair.
type fieldSide struct {
	name string
	db   DB
	path string
}

func openFieldPair(t *testing.T, noSync bool) *fieldPair {
	t.Helper()
	dir := t.TempDir()
	bp, rp := filepath.Join(dir, "bbolt.db"), filepath.Join(dir, "rivet.db")
	bdb, err := bolt.Open(bp, 0o600, &bolt.Options{NoSync: noSync, PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := rivet.Open(rp, 0o600, &rivet.Options{NoSync: noSync, PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	p := &fieldPair{bolt: bdb, rivet: rdb, engines: []fieldSide{
		{"bbolt", gDB[*bolt.DB, *bolt.Tx, *bolt.Bucket, *bolt.Cursor]{bdb, boltKit}, bp},
		{"rivet", gDB[*rivet.DB, *rivet.Tx, *rivet.Bucket, *rivet.Cursor]{rdb, rivetKit}, rp},
	}}
	t.Cleanup(func() {
		_ = bdb.Close()
		_ = rdb.Close()
	})
	return p
}

// putValues stores n values of size bytes under keys prefix000000... in
// bucket "data", in one write transaction; before runs first inside it.
func putValues(db DB, prefix string, n, size int, before func()) error {
	return db.Update(func(tx Tx) error {
		if before != nil {
			before()
		}
		b, err := tx.CreateBucketIfNotExists([]byte("data"))
		if err != nil {
			return err
		}
		v := bytes.Repeat([]byte{'v'}, size)
		for i := range n {
			if err := b.Put(fmt.Appendf(nil, "%s%06d", prefix, i), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func countKeys(db DB, bucket string) (int, error) {
	n := 0
	err := db.View(func(tx Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}

func fileSizeOf(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestFieldMaxSizeOnOpenDB: DB.MaxSize set on an open DB caps the growth of
// the next write transaction, set between transactions or inside one
// (bbolt reads it whenever it allocates past the end of the file), and
// clearing it lifts the cap, in both engines.
func TestFieldMaxSizeOnOpenDB(t *testing.T) {
	p := openFieldPair(t, true)
	setMaxSize := map[string]func(int){
		"bbolt": func(n int) { p.bolt.MaxSize = n },
		"rivet": func(n int) { p.rivet.MaxSize = n },
	}
	var outcomes []string
	for _, e := range p.engines {
		set := setMaxSize[e.name]
		if err := putValues(e.db, "a", 100, 100, nil); err != nil {
			t.Fatal(err)
		}
		capped := fileSizeOf(t, e.path)
		set(int(capped))
		err1 := putValues(e.db, "b", 2000, 2000, nil)
		grewPastCap := fileSizeOf(t, e.path) > capped
		set(0)
		err2 := putValues(e.db, "b", 2000, 2000, nil)
		grown := fileSizeOf(t, e.path)
		err3 := putValues(e.db, "c", 4000, 2000, func() { set(int(grown)) })
		grewPastCap = grewPastCap || fileSizeOf(t, e.path) > grown
		set(0)
		n, err := countKeys(e.db, "data")
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("over the cap: %s; cap cleared: %s; cap set inside: %s; grew past a cap: %t; keys: %d",
			classify(err1), classify(err2), classify(err3), grewPastCap, n)
		t.Logf("%s: %s (file %d KiB, then %d KiB)", e.name, out, capped>>10, grown>>10)
		if !errors.Is(err1, berrors.ErrMaxSizeReached) && !errors.Is(err1, rerrors.ErrMaxSizeReached) {
			t.Errorf("%s: a commit past a MaxSize set on the open DB: %v, want ErrMaxSizeReached", e.name, err1)
		}
		outcomes = append(outcomes, out)
	}
	if outcomes[0] != outcomes[1] {
		t.Fatalf("outcomes differ:\n  bbolt: %s\n  rivet: %s", outcomes[0], outcomes[1])
	}
}

// TestFieldNoSyncOnOpenDB: DB.NoSync changed on an open DB, between
// transactions and inside one, leaves every commit's outcome and the
// reopened contents the same in both engines. rivet's flush counter shows
// that it reads the field at each commit; bbolt's fdatasync (tx.go, at
// commit) cannot be counted from inside the process.
func TestFieldNoSyncOnOpenDB(t *testing.T) {
	p := openFieldPair(t, false)
	setNoSync := map[string]func(bool){
		"bbolt": func(v bool) { p.bolt.NoSync = v },
		"rivet": func(v bool) { p.rivet.NoSync = v },
	}
	steps := []struct {
		between, inside *bool
		rivetFlushes    int64
	}{
		{nil, nil, 1},
		{ptr(true), nil, 0},
		{ptr(false), nil, 1},
		{nil, ptr(true), 0},
		{nil, ptr(false), 1},
	}
	var outcomes []string
	for _, e := range p.engines {
		set := setNoSync[e.name]
		var out []string
		for i, s := range steps {
			if s.between != nil {
				set(*s.between)
			}
			// A journaled commit flushes the journal, not the file.
			s0 := p.rivet.Stats()
			before := s0.Flushes + s0.JournalWrites
			err := putValues(e.db, fmt.Sprintf("s%d-", i), 10, 100, func() {
				if s.inside != nil {
					set(*s.inside)
				}
			})
			out = append(out, classify(err))
			if e.name == "rivet" {
				s1 := p.rivet.Stats()
				if got := s1.Flushes + s1.JournalWrites - before; got != s.rivetFlushes {
					t.Errorf("rivet: step %d made %d flushes, want %d", i, got, s.rivetFlushes)
				}
			}
		}
		n, err := countKeys(e.db, "data")
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, fmt.Sprintf("%v keys=%d", out, n))
	}
	if outcomes[0] != outcomes[1] {
		t.Fatalf("outcomes differ:\n  bbolt: %s\n  rivet: %s", outcomes[0], outcomes[1])
	}
}

func ptr[T any](v T) *T { return &v }

// TestFieldStrictModeOnOpenDB: DB.StrictMode set on an open DB makes the
// next commit check the whole file: with a key of a bucket the commit does
// not touch damaged on disk, both engines commit without StrictMode and
// refuse the commit with it (bbolt by panicking with the check's
// findings, rivet with an error).
func TestFieldStrictModeOnOpenDB(t *testing.T) {
	p := openFieldPair(t, true)
	// Bucket "a" gets one leaf page (too big to be inline), "b" a key.
	for _, e := range p.engines {
		err := e.db.Update(func(tx Tx) error {
			a, err := tx.CreateBucket([]byte("a"))
			if err != nil {
				return err
			}
			for i := range 20 {
				if err := a.Put(fmt.Appendf(nil, "key%04d", i), bytes.Repeat([]byte("v"), 100)); err != nil {
					return err
				}
			}
			b, err := tx.CreateBucket([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var roots [2]uint64
	if err := p.bolt.View(func(tx *bolt.Tx) error { roots[0] = uint64(tx.Bucket([]byte("a")).Root()); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := p.rivet.View(func(tx *rivet.Tx) error { roots[1] = uint64(tx.Bucket([]byte("a")).Root()); return nil }); err != nil {
		t.Fatal(err)
	}
	// Both files are mapped shared: the damage is what the next check
	// reads. "key0001" becomes "zzz0001", after its successor: keys out of
	// order for bbolt's check, a checksum mismatch for rivet's. rivet
	// keeps a small commit's pages in memory until its next sync point
	// (docs/design.md §3.9): Sync puts them in the file first.
	if err := p.rivet.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, e := range p.engines {
		damageKey(t, e.path, roots[i]*4096, []byte("key0001"), []byte("zzz0001"))
	}
	putB := func(db DB) (out string) {
		defer func() {
			if r := recover(); r != nil {
				out = "refused (panic)"
			}
		}()
		err := db.Update(func(tx Tx) error { return tx.Bucket([]byte("b")).Put([]byte("new"), []byte("v")) })
		if err != nil {
			return "refused (error)"
		}
		return "committed"
	}
	var outcomes [2][2]string
	for i, e := range p.engines {
		outcomes[i][0] = putB(e.db)
	}
	p.bolt.StrictMode = true
	p.rivet.StrictMode = true
	for i, e := range p.engines {
		outcomes[i][1] = putB(e.db)
	}
	t.Logf("without StrictMode, then with it: bbolt %v, rivet %v", outcomes[0], outcomes[1])
	for i, e := range p.engines {
		if outcomes[i][0] != "committed" || outcomes[i][1] == "committed" {
			t.Errorf("%s: %v, want committed without StrictMode and refused with it", e.name, outcomes[i])
		}
	}
}

// damageKey replaces the bytes old, found in the page at offset off of the
// file at path, with new (as long).
func damageKey(t *testing.T, path string, off uint64, old, new []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, int64(off)); err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(buf, old)
	if i < 0 {
		t.Fatalf("%s: %q not in the page at %d", path, old, off)
	}
	if _, err := f.WriteAt(new, int64(off)+int64(i)); err != nil {
		t.Fatal(err)
	}
}

// TestFieldBatchOnOpenDB: DB.MaxBatchSize and DB.MaxBatchDelay are read by
// each Batch call in both engines: with a delay far past the test's
// timeout, three concurrent calls share one transaction when the size is 3
// (the size starts the batch) and run in three when it is 1; with a short
// delay, one call returns at once.
func TestFieldBatchOnOpenDB(t *testing.T) {
	p := openFieldPair(t, true)
	set := map[string]func(size int, delay time.Duration){
		"bbolt": func(s int, d time.Duration) { p.bolt.MaxBatchSize, p.bolt.MaxBatchDelay = s, d },
		"rivet": func(s int, d time.Duration) { p.rivet.MaxBatchSize, p.rivet.MaxBatchDelay = s, d },
	}
	batch := map[string]func(fn func(id int, put func([]byte) error) error) error{
		"bbolt": func(fn func(int, func([]byte) error) error) error {
			return p.bolt.Batch(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("batch"))
				if err != nil {
					return err
				}
				return fn(tx.ID(), func(k []byte) error { return b.Put(k, []byte("v")) })
			})
		},
		"rivet": func(fn func(int, func([]byte) error) error) error {
			return p.rivet.Batch(func(tx *rivet.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("batch"))
				if err != nil {
					return err
				}
				return fn(tx.ID(), func(k []byte) error { return b.Put(k, []byte("v")) })
			})
		},
	}
	steps := []struct {
		size  int
		delay time.Duration
		calls int
		want  int // transactions
	}{
		{3, time.Hour, 3, 1},
		{1, time.Hour, 3, 3},
		{1000, time.Millisecond, 1, 1},
	}
	for _, e := range p.engines {
		for _, s := range steps {
			set[e.name](s.size, s.delay)
			ids := map[int]bool{}
			var mu sync.Mutex
			errs := make(chan error, s.calls)
			for i := range s.calls {
				go func() {
					errs <- batch[e.name](func(id int, put func([]byte) error) error {
						mu.Lock()
						ids[id] = true
						mu.Unlock()
						return put(fmt.Appendf(nil, "%s-%d-%d", e.name, time.Now().UnixNano(), i))
					})
				}()
			}
			timeout := time.After(30 * time.Second)
			for range s.calls {
				select {
				case err := <-errs:
					if err != nil {
						t.Fatal(err)
					}
				case <-timeout:
					t.Fatalf("%s: Batch calls did not return within 30 s (MaxBatchSize %d, MaxBatchDelay %s)", e.name, s.size, s.delay)
				}
			}
			if len(ids) != s.want {
				t.Errorf("%s: MaxBatchSize %d, MaxBatchDelay %s: %d calls ran in %d transactions, want %d", e.name, s.size, s.delay, s.calls, len(ids), s.want)
			}
		}
	}
}

// TestFieldFillPercentInTx: Bucket.FillPercent set after the puts of a
// transaction, before its commit, decides how full the commit packs the
// leaves it splits (both engines read it when they spill): keys put in
// random order take fewer leaves with 1.0 than with the default 0.5.
func TestFieldFillPercentInTx(t *testing.T) {
	leaves := func(fill float64) [2]int {
		p := openFieldPair(t, true)
		var n [2]int
		keys := make([][]byte, 3000)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "key%06d", (i*7919)%len(keys))
		}
		err := p.bolt.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("b"))
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Put(k, bytes.Repeat([]byte("v"), 50)); err != nil {
					return err
				}
			}
			b.FillPercent = fill
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = p.rivet.Update(func(tx *rivet.Tx) error {
			b, err := tx.CreateBucket([]byte("b"))
			if err != nil {
				return err
			}
			for _, k := range keys {
				if err := b.Put(k, bytes.Repeat([]byte("v"), 50)); err != nil {
					return err
				}
			}
			b.FillPercent = fill
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.bolt.View(func(tx *bolt.Tx) error { n[0] = tx.Bucket([]byte("b")).Stats().LeafPageN; return nil })
		_ = p.rivet.View(func(tx *rivet.Tx) error { n[1] = tx.Bucket([]byte("b")).Stats().LeafPageN; return nil })
		return n
	}
	half, full := leaves(0.5), leaves(1.0)
	for i, name := range []string{"bbolt", "rivet"} {
		ratio := float64(full[i]) / float64(half[i])
		t.Logf("%s: %d leaves with FillPercent 0.5, %d with 1.0 set before commit (%.2fx)", name, half[i], full[i], ratio)
		if ratio > 0.8 {
			t.Errorf("%s: FillPercent 1.0 set before the commit left %d leaves against %d (%.2fx), want fewer than 0.8x", name, full[i], half[i], ratio)
		}
	}
}

// TestFieldsWithoutEffectOnOpenDB: the fields that rivet accepts and
// ignores (NoFreelistSync, FreelistType, NoGrowSync, PreLoadFreelist,
// MmapFlags, AllocSize) changed on open DBs of both engines: commits that
// grow the files past 16 MiB and a reopen leave the same contents. (Mlock
// is left out: bbolt would lock the map, which needs RLIMIT_MEMLOCK.)
func TestFieldsWithoutEffectOnOpenDB(t *testing.T) {
	p := openFieldPair(t, true)
	for _, db := range []*bolt.DB{p.bolt} {
		db.NoFreelistSync, db.FreelistType, db.NoGrowSync, db.PreLoadFreelist = true, bolt.FreelistMapType, true, false
		db.MmapFlags, db.AllocSize = mmapFlag, 1<<20
	}
	r := p.rivet
	r.NoFreelistSync, r.FreelistType, r.NoGrowSync, r.PreLoadFreelist = true, rivet.FreelistMapType, true, false
	r.MmapFlags, r.AllocSize = mmapFlag, 1<<20
	var dumps []string
	for _, e := range p.engines {
		for i := range 5 {
			if err := putValues(e.db, fmt.Sprintf("r%d-", i), 1000, 4000, nil); err != nil {
				t.Fatalf("%s: %v", e.name, err)
			}
		}
	}
	if err := p.bolt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.rivet.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range []engine{boltEngine, rivetEngine} {
		db, err := e.open(filepath.Join(filepath.Dir(p.engines[0].path), e.name+".db"), true, 4096)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dump(db)
		_ = db.Close()
		if err != nil {
			t.Fatal(err)
		}
		dumps = append(dumps, d)
	}
	if dumps[0] != dumps[1] {
		t.Fatal("the databases differ after commits made with the fields changed")
	}
	if n := bytes.Count([]byte(dumps[0]), []byte("\n")); n < 5000 {
		t.Fatalf("the walk has %d lines, want the 5,000 keys", n)
	}
}

package rivet

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/vfs"
)

var copyRoundsFlag = flag.Int("rivet.copyrounds", 1, "repetitions of TestConcurrentCopyConsistentRead")

// copySnapshot is an open transaction kept for copying later, with the
// model of the state it sees.
type copySnapshot struct {
	tx      *Tx
	model   *mbucket
	commits int // commits made since it began
}

// madeCopy is a copy written during a test, with the state it must hold.
type madeCopy struct {
	path  string
	model *mbucket
	how   string
	age   int // commits between the snapshot and the copy
}

// TestCopyModel makes random commits while holding read transactions of
// random age, copies the state of some of them (WriteTo into a file, into
// a buffer, CopyFile, and from inside a write transaction), and then checks
// every copy: it opens without recovery, passes Check, holds exactly its
// snapshot's data, takes 1,000 write transactions (every one a sync point,
// so region maps and deltas are written over the copy's), passes Check
// again and holds the snapshot plus exactly those writes, also after a
// reopen. Copies of snapshots older than many sync points are the case
// where the source's map slots have since been rewritten.
func TestCopyModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	ps := 1024 << rng.Intn(3)
	db := openTestDB(t, &Options{PageSize: ps})
	dir := t.TempDir()
	model := newMBucket()
	commits, maxCopies, writes := 150, 10, 1000
	if testing.Short() || raceEnabled {
		commits, maxCopies, writes = 60, 4, 300
	}
	var open []*copySnapshot
	var copies []madeCopy
	copyOf := func(s *copySnapshot) {
		path := filepath.Join(dir, fmt.Sprintf("copy-%d", len(copies)))
		how := []string{"CopyFile", "WriteTo(file)", "WriteTo(buffer)"}[rng.Intn(3)]
		var err error
		switch how {
		case "CopyFile":
			err = s.tx.CopyFile(path, 0o600)
		case "WriteTo(file)":
			var f *os.File
			if f, err = os.Create(path); err == nil {
				var n int64
				n, err = s.tx.WriteTo(f)
				if err == nil && n != s.tx.Size() {
					err = fmt.Errorf("WriteTo wrote %d bytes, tx.Size() is %d", n, s.tx.Size())
				}
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		default:
			var buf bytes.Buffer
			if _, err = s.tx.WriteTo(&buf); err == nil {
				err = os.WriteFile(path, buf.Bytes(), 0o600)
			}
		}
		if err != nil {
			t.Fatalf("%s of a snapshot %d commits old: %v", how, s.commits, err)
		}
		copies = append(copies, madeCopy{path: path, model: s.model, how: how, age: s.commits})
	}
	// The elder snapshot stays open from the first commit to the end and is
	// always copied, so every run (the race detector's short one too) has
	// a copy older than every sync point but the last few dozen.
	elderTx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	elder := &copySnapshot{tx: elderTx, model: model.clone()}
	for i := 0; i < commits; i++ {
		next := model.clone()
		rollback := rng.Intn(10) == 0
		err := db.Update(func(tx *Tx) error {
			if len(copies) < maxCopies && rng.Intn(25) == 0 {
				// A copy from a write transaction holds the state it began
				// with, not its uncommitted changes.
				if err := randomOps(t, rng, tx, next, 1+rng.Intn(10), ps); err != nil {
					return err
				}
				copyOf(&copySnapshot{tx: tx, model: model.clone()})
				copies[len(copies)-1].how += " in a write txn"
			}
			if err := randomOps(t, rng, tx, next, 1+rng.Intn(40), ps); err != nil {
				return err
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		if rollback != (err == errRollback) || (!rollback && err != nil) {
			t.Fatalf("txn %d: %v", i, err)
		}
		if !rollback {
			model = next
			for _, s := range open {
				s.commits++
			}
			elder.commits++
		}
		if rng.Intn(4) == 0 && len(open) < 6 {
			tx, err := db.Begin(false)
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, &copySnapshot{tx: tx, model: model.clone()})
		}
		if len(open) > 0 && len(copies) < maxCopies && rng.Intn(10) == 0 {
			// Half the time the oldest snapshot: the source's map slots
			// and metas have been rewritten many times since it began.
			j := rng.Intn(len(open))
			if rng.Intn(2) == 0 {
				j = 0
			}
			s := open[j]
			copyOf(s)
			if rng.Intn(2) == 0 {
				_ = s.tx.Rollback()
				open = append(open[:j], open[j+1:]...)
			}
		}
	}
	for _, s := range open {
		if len(copies) < maxCopies {
			copyOf(s)
		}
		_ = s.tx.Rollback()
	}
	copyOf(elder)
	_ = elder.tx.Rollback()
	for _, c := range copies {
		verifyCopy(t, rng, c, ps, writes)
	}
	ages := copyAges(copies)
	t.Logf("page size %d: %d copies verified, snapshot ages (commits) %v", ps, len(copies), ages)
	if slices.Max(ages) < 10 {
		t.Fatalf("no copy of a snapshot 10 or more commits old (seed %d)", seed)
	}
}

func copyAges(cs []madeCopy) []int {
	var ages []int
	for _, c := range cs {
		ages = append(ages, c.age)
	}
	return ages
}

// verifyCopy opens one copy and checks it as TestCopyModel describes.
func verifyCopy(t *testing.T, rng *rand.Rand, c madeCopy, ps, writes int) {
	t.Helper()
	what := fmt.Sprintf("copy %s (%s, snapshot %d commits old)", filepath.Base(c.path), c.how, c.age)
	db, err := Open(c.path, 0o600, nil)
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer db.Close()
	if rec := db.Recovery(); rec.FellBack || rec.PagesVerified != 0 {
		t.Fatalf("%s: open recovered (%+v); a copy needs no recovery", what, rec)
	}
	if db.pageSize != ps {
		t.Fatalf("%s: page size %d, source %d", what, db.pageSize, ps)
	}
	checkNamed(t, what+" as copied", db)
	compareDB(t, db, c.model)
	model := c.model
	for i := 0; i < writes; i++ {
		next := model.clone()
		if err := db.Update(func(tx *Tx) error {
			return randomOps(t, rng, tx, next, 1+rng.Intn(4), ps)
		}); err != nil {
			t.Fatalf("%s: write txn %d: %v", what, i, err)
		}
		model = next
		if i%250 == 0 {
			checkNamed(t, fmt.Sprintf("%s after %d writes", what, i+1), db)
		}
	}
	checkNamed(t, fmt.Sprintf("%s after %d writes", what, writes), db)
	compareDB(t, db, model)
	if err := db.Close(); err != nil {
		t.Fatalf("%s: close: %v", what, err)
	}
	if db, err = Open(c.path, 0o600, nil); err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	checkNamed(t, what+" reopened", db)
	compareDB(t, db, model)
}

// checkNamed runs a full Check, naming what is checked in the failure.
func checkNamed(t *testing.T, what string, db *DB) {
	t.Helper()
	err := db.View(func(tx *Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("%s: check: %v", what, err)
	}
}

// TestCopyAfterFreeingCommits: three one-key commits (each frees the pages
// the one before wrote, so the source's meta carries a free-space delta)
// and a copy. A copy whose meta kept the source's delta on top of maps
// rebuilt from the tree would free those pages twice, fail Check and
// refuse every write transaction with ErrCorrupt; the copy's meta is
// built field by field so that it cannot.
func TestCopyAfterFreeingCommits(t *testing.T) {
	// Without the journal, so that each commit is a sync point whose meta
	// readers see, delta included.
	db := openTestDB(t, &Options{NoJournal: true})
	for i := 0; i < 3; i++ {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte{byte(i)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	if d := db.readers.Current().Delta; len(d) == 0 {
		t.Fatalf("the source's meta has no delta; the test no longer covers the case")
	}
	path := filepath.Join(t.TempDir(), "copy")
	if err := db.View(func(tx *Tx) error { return tx.CopyFile(path, 0o600) }); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.readers.Current().Delta) != 0 {
		t.Errorf("the copy's meta has a delta of %d runs", len(c.readers.Current().Delta))
	}
	checkNamed(t, "copy", c)
	if err := c.Update(func(tx *Tx) error { return tx.Bucket([]byte("b")).Put([]byte("x"), []byte("y")) }); err != nil {
		t.Fatalf("write into the copy: %v", err)
	}
	checkNamed(t, "copy after a write", c)
}

// TestConcurrentCopyConsistentRead follows bbolt's
// TestDB_Concurrent_WriteTo_and_ConsistentRead: 50 write transactions, and
// during each of them 5 read transactions begin and, from their own
// goroutines after a random delay, copy their snapshot and read it. Every
// copy must open, pass Check and hold the data its transaction read; the
// reads of one round must agree. -rivet.copyrounds repeats the whole test
// (CI runs it 100 times in a row).
func TestConcurrentCopyConsistentRead(t *testing.T) {
	for round := 0; round < *copyRoundsFlag; round++ {
		concurrentCopyRound(t, round)
		if t.Failed() {
			t.Fatalf("failed in repetition %d", round)
		}
	}
	t.Logf("%d repetitions passed", *copyRoundsFlag)
}

func concurrentCopyRound(t *testing.T, rep int) {
	db := openTestDB(t, &Options{PageSize: 4096})
	const wtxs, rtxs = 50, 5
	bucket := []byte("data")
	dir := t.TempDir()
	var mu sync.Mutex
	reads := map[int][]map[string]string{}
	var wg sync.WaitGroup
	read := func(round, j int, tx *Tx, rng *rand.Rand) {
		defer wg.Done()
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
		path := filepath.Join(dir, fmt.Sprintf("%d-%d-%d", rep, round, j))
		if err := tx.CopyFile(path, 0o600); err != nil {
			t.Errorf("copy: %v", err)
		}
		data := map[string]string{}
		if err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			data[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Errorf("read: %v", err)
		}
		if err := tx.Rollback(); err != nil {
			t.Errorf("rollback: %v", err)
		}
		mu.Lock()
		reads[round] = append(reads[round], data)
		mu.Unlock()
		c, err := Open(path, 0o600, &Options{PageSize: 4096})
		if err != nil {
			t.Errorf("open copy: %v", err)
			return
		}
		defer c.Close()
		if err := c.View(func(tx *Tx) error {
			var errs []error
			for err := range tx.Check() {
				errs = append(errs, err)
			}
			got := map[string]string{}
			if err := tx.Bucket(bucket).ForEach(func(k, v []byte) error {
				got[string(k)] = string(v)
				return nil
			}); err != nil {
				errs = append(errs, err)
			}
			if !sameDump(got, data) {
				errs = append(errs, fmt.Errorf("copy holds %v, its transaction read %v", got, data))
			}
			return errors.Join(errs...)
		}); err != nil {
			t.Errorf("copy %s: %v", filepath.Base(path), err)
		}
		if err := c.Update(func(tx *Tx) error { return tx.Bucket(bucket).Put([]byte("after"), []byte("copy")) }); err != nil {
			t.Errorf("write into copy %s: %v", filepath.Base(path), err)
		}
	}
	if err := db.Update(func(tx *Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(int64(rep)))
	for i := 0; i < wtxs; i++ {
		tx, err := db.Begin(true)
		if err != nil {
			t.Fatal(err)
		}
		b := tx.Bucket(bucket)
		for j := 0; j < rtxs; j++ {
			rtx, err := db.Begin(false)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go read(i, j, rtx, rand.New(rand.NewSource(rng.Int63())))
			for k := 0; k < 10; k++ {
				key, value := fmt.Sprintf("key_%d", rng.Intn(10)), fmt.Sprintf("value_%d", rng.Intn(100))
				if err := b.Put([]byte(key), []byte(value)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for round, rs := range reads {
		for i := 1; i < len(rs); i++ {
			if !sameDump(rs[0], rs[i]) {
				t.Errorf("round %d: read %d saw %v, read 0 saw %v", round, i, rs[i], rs[0])
			}
		}
	}
	db.checkAndClose()
}

// TestCopyFileCrash crashes the machine (CrashFS) at every I/O operation of
// CopyFile calls made while the source keeps committing. In every image the
// source opens, passes Check and holds every acknowledged commit, and the
// copy either is refused as not a database (ErrInvalid: its metas never
// became durable) or opens, passes Check and holds exactly its snapshot —
// never a copy that opens with pages missing.
func TestCopyFileCrash(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	crashRng := randv2.New(randv2.NewPCG(uint64(seed), 2))
	cfs := vfs.NewCrashable()
	copying := false
	type image struct {
		fs       *vfs.CrashFS
		source   map[string]string // the last acknowledged state
		snapshot map[string]string // what the copy must hold if it opens
		previous map[string]string // what else it may hold (see below)
	}
	var images []image
	var source, snapshot, previous map[string]string
	copyOp := 0
	hook := &hookFS{FS: cfs, beforeOn: func(name, _ string) {
		if copying {
			opts := vfs.DefaultCrashOptions
			opts.KeepProbability = rng.Float64()
			img := image{fs: cfs.Crash(crashRng, opts), source: source, snapshot: snapshot}
			if copyOp == 0 {
				// Before the flush of the truncation, the previous copy
				// at the path may survive whole (the source's writes of
				// its deferred pages come before it).
				img.previous = previous
			}
			images = append(images, img)
			if name == "/copy" {
				copyOp++
			}
		}
	}}
	db, err := openFS(hook, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	model := newMBucket()
	copies := 12
	if testing.Short() || raceEnabled {
		copies = 5
	}
	for c := 0; c < copies; c++ {
		for i := 0; i < 5+rng.Intn(10); i++ {
			next := model.clone()
			if err := db.Update(func(tx *Tx) error { return randomOps(t, rng, tx, next, 1+rng.Intn(30), 1024) }); err != nil {
				t.Fatal(err)
			}
			model = next
		}
		tx, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		if snapshot, err = dumpDB(db); err != nil {
			t.Fatal(err)
		}
		// A commit between the snapshot and the copy: the copy must still
		// hold the snapshot.
		next := model.clone()
		if err := db.Update(func(tx *Tx) error { return randomOps(t, rng, tx, next, 1+rng.Intn(30), 1024) }); err != nil {
			t.Fatal(err)
		}
		model = next
		if source, err = dumpDB(db); err != nil {
			t.Fatal(err)
		}
		copying, copyOp = true, 0
		err = tx.copyFile(hook, "/copy", 0o600)
		copying = false
		if err != nil {
			t.Fatalf("copy %d: %v", c, err)
		}
		previous = snapshot
		_ = tx.Rollback()
	}
	refused, previousKept, whole := 0, 0, 0
	for i, img := range images {
		src, err := openFS(img.fs, "/db", 0o600, &Options{InitialMmapSize: memMapSize})
		if err != nil {
			t.Fatalf("image %d: source: open: %v", i, err)
		}
		checkNamed(t, fmt.Sprintf("image %d: source", i), src)
		if got, err := dumpDB(src); err != nil || !sameDump(got, img.source) {
			t.Fatalf("image %d: source does not hold its last acknowledged commit (%v): %s", i, err, describeDiff(got, img.source))
		}
		_ = src.Close()
		cp, err := openFS(img.fs, "/copy", 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
		if errors.Is(err, ErrInvalid) || errors.Is(err, os.ErrNotExist) {
			// No meta yet, or no file: the first copy's name is durable
			// only once CopyFile flushed the directory.
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("image %d: copy: open: %v (want ErrInvalid or a whole copy)", i, err)
		}
		checkNamed(t, fmt.Sprintf("image %d: copy", i), cp)
		got, err := dumpDB(cp)
		if err == nil && img.previous != nil && sameDump(got, img.previous) {
			_ = cp.Close()
			previousKept++
			continue
		}
		if err != nil || !sameDump(got, img.snapshot) {
			t.Fatalf("image %d: copy opens but does not hold its snapshot (%v): %s", i, err, describeDiff(got, img.snapshot))
		}
		_ = cp.Close()
		whole++
	}
	t.Logf("%d crash images during %d copies: %d copies refused as incomplete, %d whole, %d the previous copy (crash before the truncation's flush)", len(images), copies, refused, whole, previousKept)
	if refused == 0 || whole == 0 {
		t.Fatalf("the crash points missed a case: %d refused, %d whole", refused, whole)
	}
}

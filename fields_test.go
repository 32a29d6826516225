package rivet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// putValues stores n values of size bytes under keys prefix0000... in bucket
// "data", in one write transaction; before runs first inside it.
func putValues(db *DB, prefix string, n, size int, before func()) error {
	return db.Update(func(tx *Tx) error {
		if before != nil {
			before()
		}
		b, err := tx.CreateBucketIfNotExists([]byte("data"))
		if err != nil {
			return err
		}
		v := make([]byte, size)
		for i := range n {
			if err := b.Put(fmt.Appendf(nil, "%s%06d", prefix, i), v); err != nil {
				return err
			}
		}
		return nil
	})
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestMaxSizeChangedAfterOpen: DB.MaxSize set on an open DB caps the next
// write transaction's growth, whether it is set between transactions or
// inside one (bbolt reads it whenever it allocates past the end); a commit
// refused for size leaves the DB usable, and clearing the field lifts the
// cap for the next transaction.
func TestMaxSizeChangedAfterOpen(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 4096})
	if err := putValues(db.DB, "a", 100, 100, nil); err != nil {
		t.Fatal(err)
	}
	capped := fileSize(t, db.Path())

	db.MaxSize = int(capped)
	err := putValues(db.DB, "b", 2000, 1000, nil)
	if !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("2 MB past a MaxSize of the file's size (%d bytes): %v, want ErrMaxSizeReached", capped, err)
	}
	if got := fileSize(t, db.Path()); got > capped {
		t.Fatalf("file grew to %d bytes past MaxSize %d", got, capped)
	}
	if db.Stats().Latched {
		t.Fatal("a commit refused for size latched the DB")
	}
	// Small writes still fit the file's free pages under the cap.
	if err := putValues(db.DB, "a", 10, 100, nil); err != nil {
		t.Fatalf("small update under the cap: %v", err)
	}

	db.MaxSize = 0
	if err := putValues(db.DB, "b", 2000, 1000, nil); err != nil {
		t.Fatalf("after clearing MaxSize: %v", err)
	}
	grown := fileSize(t, db.Path())
	if grown <= capped {
		t.Fatalf("file is %d bytes after 2 MB more, was %d", grown, capped)
	}

	// Set inside the transaction: the commit reads it.
	err = putValues(db.DB, "c", 2000, 1000, func() { db.MaxSize = int(grown) })
	if !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("MaxSize set inside the transaction: %v, want ErrMaxSizeReached", err)
	}
	if got := fileSize(t, db.Path()); got > grown {
		t.Fatalf("file grew to %d bytes past MaxSize %d", got, grown)
	}
	db.MaxSize = 0
	if err := db.View(func(tx *Tx) error {
		if n := tx.Bucket([]byte("data")).Stats().KeyN; n != 2100 {
			return fmt.Errorf("%d keys, want 2100", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNoSyncChangedAfterOpen: DB.NoSync set on an open DB decides whether
// the next commit flushes, whether it is set between transactions or inside
// one (bbolt reads it as it commits).
func TestNoSyncChangedAfterOpen(t *testing.T) {
	db := openTestDB(t, nil)
	flushesOf := func(setInside *bool) int64 {
		t.Helper()
		s0 := db.Stats()
		before := s0.Flushes + s0.JournalWrites
		if err := db.Update(func(tx *Tx) error {
			if setInside != nil {
				db.NoSync = *setInside
			}
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte(time.Now().String()))
		}); err != nil {
			t.Fatal(err)
		}
		// A journaled commit flushes the journal, not the file.
		s := db.Stats()
		return s.Flushes + s.JournalWrites - before
	}
	yes, no := true, false
	if n := flushesOf(nil); n != 1 {
		t.Fatalf("a Full commit made %d flushes, want 1", n)
	}
	db.NoSync = true
	if n := flushesOf(nil); n != 0 {
		t.Fatalf("a commit after NoSync = true made %d flushes, want 0", n)
	}
	db.NoSync = false
	if n := flushesOf(nil); n != 1 {
		t.Fatalf("a commit after NoSync = false made %d flushes, want 1", n)
	}
	if n := flushesOf(&yes); n != 0 {
		t.Fatalf("a commit that set NoSync = true inside made %d flushes, want 0", n)
	}
	if n := flushesOf(&no); n != 1 {
		t.Fatalf("a commit that set NoSync = false inside made %d flushes, want 1", n)
	}
}

// TestNoSyncClearedUnderPeriodic: a DB opened with Periodic durability and
// NoSync does not flush on its own while NoSync is set, and starts its
// periodic flushes once the program clears NoSync.
func TestNoSyncClearedUnderPeriodic(t *testing.T) {
	db := openTestDB(t, &Options{Durability: Periodic(5 * time.Millisecond), NoSync: true})
	opened := db.Stats().Flushes // creating the file flushes
	mustPutOne(t, db.DB, "b", "k", "v1")
	time.Sleep(50 * time.Millisecond)
	if n := db.Stats().Flushes - opened; n != 0 {
		t.Fatalf("%d flushes under NoSync, want 0", n)
	}
	db.NoSync = false
	mustPutOne(t, db.DB, "b", "k", "v2")
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().Flushes == opened {
		if time.Now().After(deadline) {
			t.Fatal("no periodic flush 10 s after NoSync was cleared")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStrictModeChangedAfterOpen: DB.StrictMode set on an open DB makes the
// next commit check the whole file and fail on a damaged page that the
// commit itself never touched; without it the same commit succeeds.
func TestStrictModeChangedAfterOpen(t *testing.T) {
	path := pagesDB(t)
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var leaf PageUse
	_ = db.View(func(tx *Tx) error {
		for _, u := range collectPages(t, tx) {
			if u.Kind == PageLeaf && bucketIs(u, "a") && leaf.ID == 0 {
				leaf = u
			}
		}
		return nil
	})
	if leaf.ID == 0 {
		t.Fatal("no leaf of bucket a")
	}
	// The file is mapped shared: the damage is what the next check reads.
	damage(t, path, page.ID(leaf.ID), pagesPS-100)
	putB := func() error {
		return db.Update(func(tx *Tx) error {
			return tx.Bucket([]byte("b")).Put([]byte("new"), []byte("v"))
		})
	}
	if err := putB(); err != nil {
		t.Fatalf("commit without StrictMode: %v", err)
	}
	db.StrictMode = true
	if err := putB(); err == nil {
		t.Fatal("commit with StrictMode set after Open passed over a damaged leaf")
	}
}

// TestBatchFieldsChangedAfterOpen: each Batch call reads MaxBatchSize and
// MaxBatchDelay as it is made.
func TestBatchFieldsChangedAfterOpen(t *testing.T) {
	db := openTestDB(t, nil)
	// A delay far past the test's timeout: only the size can start the
	// batch, so three calls that return share one transaction.
	db.MaxBatchDelay = time.Hour
	db.MaxBatchSize = 3
	if ids := timedBatches(t, db.DB, 3); len(ids) != 1 {
		t.Fatalf("MaxBatchSize 3: 3 calls ran in %d transactions, want 1", len(ids))
	}
	db.MaxBatchSize = 1
	if ids := timedBatches(t, db.DB, 3); len(ids) != 3 {
		t.Fatalf("MaxBatchSize 1: 3 calls ran in %d transactions, want 3", len(ids))
	}
	db.MaxBatchSize = 1000
	db.MaxBatchDelay = time.Millisecond
	if ids := timedBatches(t, db.DB, 1); len(ids) != 1 {
		t.Fatalf("one call ran in %d transactions", len(ids))
	}
}

// TestBatchQueued: with MaxBatchDelay zero or below, no call waits for
// more calls: the first runs at once, and the calls made while it runs
// share the next transactions, at most MaxBatchSize each (a value each
// call reads).
func TestBatchQueued(t *testing.T) {
	db := openTestDB(t, nil)
	for _, c := range []struct {
		size, calls, want int
		delay             time.Duration
	}{
		{3, 4, 2, 0},     // the first, then three
		{3, 5, 3, 0},     // the first, three, one
		{1, 3, 3, -1},    // one each
		{1000, 6, 2, 0},  // the first, then five
		{1000, 1, 1, -1}, // the first
	} {
		db.MaxBatchSize, db.MaxBatchDelay = c.size, c.delay
		if ids := concurrentBatches(t, db.DB, c.calls); len(ids) != c.want {
			t.Fatalf("MaxBatchSize %d: %d calls ran in %d transactions, want %d", c.size, c.calls, len(ids), c.want)
		}
	}
}

// timedBatches runs n Batch calls at once, each storing one key, and
// returns the set of transaction ids they ran in. It fails the test if they
// have not all returned within 30 s.
func timedBatches(t *testing.T, db *DB, n int) map[int]bool {
	t.Helper()
	results := make(chan batchResult, n)
	for i := range n {
		go func() { results <- putInBatch(db, i) }()
	}
	return batchIDs(t, results, n)
}

// concurrentBatches makes n Batch calls, each storing one key, while a
// write transaction holds the writer lock: the first call starts its batch
// at once and waits for the lock, and the others queue behind it. Once all
// have queued it ends the transaction and returns the set of transaction
// ids the calls ran in. It fails the test if they have not all returned
// within 30 s.
func concurrentBatches(t *testing.T, db *DB, n int) map[int]bool {
	t.Helper()
	// The goroutine that ran the last batch may not have let go of the
	// turn yet; the first call below must find no batch running.
	deadline := time.Now().Add(30 * time.Second)
	for {
		db.batchMu.Lock()
		running := db.batchRunning
		db.batchMu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a batch still runs after 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	held, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan batchResult, n)
	for i := range n {
		go func() { results <- putInBatch(db, i) }()
	}
	deadline = time.Now().Add(30 * time.Second)
	for queued := -1; queued != n-1; {
		if time.Now().After(deadline) {
			_ = held.Rollback()
			t.Fatalf("%d of %d Batch calls queued within 30 s", queued+1, n)
		}
		time.Sleep(time.Millisecond)
		db.batchMu.Lock()
		queued = -1
		if db.batchRunning {
			queued = 0
			for _, b := range db.batches {
				queued += len(b.calls)
			}
		}
		db.batchMu.Unlock()
	}
	if err := held.Rollback(); err != nil {
		t.Fatal(err)
	}
	return batchIDs(t, results, n)
}

type batchResult struct {
	id  int
	err error
}

// putInBatch stores one key through Batch and returns the id of the
// transaction it ran in.
func putInBatch(db *DB, i int) batchResult {
	var id int
	err := db.Batch(func(tx *Tx) error {
		id = tx.ID()
		b, err := tx.CreateBucketIfNotExists([]byte("batch"))
		if err != nil {
			return err
		}
		return b.Put(fmt.Appendf(nil, "%d-%d", time.Now().UnixNano(), i), []byte("v"))
	})
	return batchResult{id, err}
}

// batchIDs collects n results and returns the set of transaction ids. It
// fails the test if they have not all come within 30 s.
func batchIDs(t *testing.T, results <-chan batchResult, n int) map[int]bool {
	t.Helper()
	ids := map[int]bool{}
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case r := <-results:
			if r.err != nil {
				t.Fatal(r.err)
			}
			ids[r.id] = true
		case <-timeout:
			t.Fatal("Batch calls did not return within 30 s")
		}
	}
	return ids
}

// TestNegativeMaxSize: a negative MaxSize means no cap, as in bbolt (which
// tests MaxSize > 0), at Open and on an open DB.
func TestNegativeMaxSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "neg.db")
	db, err := Open(path, 0o600, &Options{MaxSize: -1})
	if err != nil {
		t.Fatalf("Open with MaxSize -1: %v", err)
	}
	defer db.Close()
	if err := putValues(db, "a", 2000, 1000, nil); err != nil {
		t.Fatal(err)
	}
	db.MaxSize = -5
	if err := putValues(db, "b", 2000, 1000, nil); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
}

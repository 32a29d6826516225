package rivet

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/vfs"
)

// gateFS lets a test hold every flush until it says so, and choose what the
// flush returns.
type gateFS struct {
	vfs.FS
	mu      sync.Mutex
	gate    chan error // when non-nil, Sync waits for a value and returns it
	entered chan struct{}
	delay   time.Duration
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, fs: g}, nil
}

type gateFile struct {
	vfs.File
	fs *gateFS
}

func (f *gateFile) Sync(kind vfs.SyncKind) error {
	f.fs.mu.Lock()
	gate, entered, delay := f.fs.gate, f.fs.entered, f.fs.delay
	f.fs.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if gate != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		if err := <-gate; err != nil {
			return err
		}
	}
	return f.File.Sync(kind)
}

// TestGroupCommitNeverEarly: while a flush is held, no Update returns; when
// the flush fails, every transaction that waited on it fails and the DB
// latches; none of them survives a power loss.
func TestGroupCommitNeverEarly(t *testing.T) {
	crash := vfs.NewCrashable()
	g := &gateFS{FS: crash}
	db, err := openFS(g, "/db", 0o600, &Options{InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("before"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	gate := make(chan error)
	entered := make(chan struct{}, 16)
	g.mu.Lock()
	g.gate, g.entered = gate, entered
	g.mu.Unlock()

	const n = 8
	var returned atomic.Int32
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			err := db.Update(func(tx *Tx) error {
				return tx.Bucket([]byte("b")).Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"))
			})
			returned.Add(1)
			errs <- err
		}(i)
	}
	<-entered // the first sync point is flushing
	// Let every other commit reach its in-memory commit and start waiting.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		db.writer.Lock()
		head := db.head.Txid
		db.writer.Unlock()
		if head >= uint64(2+n) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if r := returned.Load(); r != 0 {
		t.Fatalf("%d Updates returned while the flush was still running", r)
	}
	// Readers in Full mode see only durable state.
	_ = db.View(func(tx *Tx) error {
		if v := tx.Bucket([]byte("b")).Get([]byte("k0")); v != nil {
			t.Errorf("a reader saw a transaction that is not durable")
		}
		return nil
	})
	gate <- syscall.EIO
	// Any flush after the failure must not be reached: the DB is latched.
	go func() {
		for range entered {
			gate <- syscall.EIO
		}
	}()
	for i := 0; i < n; i++ {
		if err := <-errs; !errors.Is(err, rerrors.ErrLatched) || !errors.Is(err, syscall.EIO) {
			t.Errorf("Update after the failed flush: %v, want EIO and ErrLatched", err)
		}
	}
	_ = db.Close()
	close(entered)

	rdb, err := openFS(crash.CrashKeepNone(), "/db", 0o600, &Options{InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	mustCheck(t, rdb)
	_ = rdb.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		if b.Get([]byte("before")) == nil {
			t.Error("the durable commit before the failure is gone")
		}
		for i := 0; i < n; i++ {
			if b.Get([]byte(fmt.Sprintf("k%d", i))) != nil {
				t.Errorf("k%d survived although its flush failed", i)
			}
		}
		return nil
	})
}

// TestDurabilityModesFlushCount: flushes per 1,000 commits in each mode.
func TestDurabilityModesFlushCount(t *testing.T) {
	for _, tc := range []struct {
		d         Durability
		noJournal bool
		min, max  int64
	}{
		{Full, false, 1000, 1000},
		{Full, true, 1000, 1000},
		{Barrier, false, 1000, 1000},
		{Periodic(time.Hour), false, 0, 5},
		{None, false, 0, 5},
	} {
		name := tc.d.String()
		if tc.noJournal {
			name += "NoJournal"
		}
		t.Run(name, func(t *testing.T) {
			db, err := openFS(vfs.NewMem(), "/db", 0o600, &Options{Durability: tc.d, InitialMmapSize: memMapSize, NoJournal: tc.noJournal})
			if err != nil {
				t.Fatal(err)
			}
			before := db.Stats()
			for i := 0; i < 1000; i++ {
				if err := db.Update(func(tx *Tx) error {
					b, err := tx.CreateBucketIfNotExists([]byte("b"))
					if err != nil {
						return err
					}
					return b.Put([]byte(fmt.Sprint(i)), []byte("v"))
				}); err != nil {
					t.Fatal(err)
				}
			}
			s := db.Stats()
			// A journaled commit flushes the journal instead of the file.
			d := s.Sub(&before)
			flushes := d.Flushes + d.JournalWrites
			t.Logf("%s: %d flushes per 1,000 commits (%d of the journal)", name, flushes, d.JournalWrites)
			if !tc.noJournal && tc.d == Full && d.JournalWrites < 990 {
				t.Errorf("%d journal writes, want every commit but the first few", d.JournalWrites)
			}
			if flushes < tc.min || flushes > tc.max {
				t.Fatalf("%d flushes, want [%d, %d]", flushes, tc.min, tc.max)
			}
			// Sync makes everything durable in every mode.
			if err := db.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := db.Stats().Flushes - s.Flushes; tc.d.mode >= modePeriodic && got != 1 {
				t.Fatalf("Sync made %d flushes, want 1", got)
			}
			mustCheck(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNoneModeGrowthIsBounded: in None mode (and Periodic), pages freed since
// the last sync point wait for the next one; early sync points (background
// past the soft limit, blocking past twice it) keep the file from growing
// with the churn.
func TestNoneModeGrowthIsBounded(t *testing.T) {
	db, err := openFS(vfs.NewMem(), "/db", 0o600, &Options{Durability: None, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const commits = 20000
	v := make([]byte, 2000) // a blob: every overwrite frees and allocates a page
	for i := 0; i < commits; i++ {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("hot"), v); err != nil {
				return err
			}
			return b.Put([]byte(fmt.Sprint(i%50)), []byte("small"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	s := db.Stats()
	db.writer.Lock()
	hwm := db.head.HWM
	db.writer.Unlock()
	t.Logf("%d commits: HWM %d pages, %d flushes", commits, hwm, s.Flushes)
	// Each commit frees about 3 pages: without early sync points the file
	// would reach about 60,000 pages. The bound is twice the soft limit
	// (4,096 pages) plus what is live and in flight.
	if hwm > 3*4096 {
		t.Fatalf("file grew to %d pages; early sync points should bound it near 2x4,096", hwm)
	}
	if s.Flushes > commits/500 {
		t.Fatalf("%d flushes for %d commits in None mode", s.Flushes, commits)
	}
	mustCheck(t, db)
}

// TestGroupCommitFillsFlushes: with N writers making durable one-key
// commits on a disk whose flush takes 2 ms, every commit is made and a
// flush covers at least N/2 commits on average: the writers that committed
// during one flush share the next, and writers queued for the writer lock
// commit before a sync point starts, so they share it too.
func TestGroupCommitFillsFlushes(t *testing.T) {
	for _, workers := range []int{4, 16} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			g := &gateFS{FS: vfs.NewMem(), delay: 2 * time.Millisecond}
			db, err := openFS(g, "/db", 0o600, &Options{InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *Tx) error {
				_, err := tx.CreateBucket([]byte("b"))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			each := 640 / workers
			before := db.Stats()
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := 0; i < each; i++ {
						if err := db.Update(func(tx *Tx) error {
							return tx.Bucket([]byte("b")).Put([]byte(fmt.Sprintf("%02d-%04d", w, i)), []byte("v"))
						}); err != nil {
							t.Error(err)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			d := db.Stats()
			d = d.Sub(&before)
			if d.Commits != int64(workers*each) {
				t.Fatalf("%d commits, want %d", d.Commits, workers*each)
			}
			perFlush := float64(d.Commits) / float64(d.Flushes)
			t.Logf("%d writers: %d commits, %d flushes, %.1f commits per flush", workers, d.Commits, d.Flushes, perFlush)
			if perFlush < float64(workers)/2 {
				t.Errorf("%.1f commits per flush with %d writers, want >= %d", perFlush, workers, workers/2)
			}
			mustCheck(t, db)
		})
	}
}

// TestReaderBegunAsSyncFinishesKeepsItsPages replays the interleaving that
// corrupted a reader in a 1 GiB bench run: a sync point's finishSync has
// set db.durable but not yet db.cur; a write transaction has taken the
// oldest snapshot still seen (no reader open) but not yet the steady txid;
// a reader then begins on the older db.cur. The writer must not reuse the
// pages that reader still sees (freed by the transaction the sync point
// made durable), and the reader reads its whole snapshot unchanged.
func TestReaderBegunAsSyncFinishesKeepsItsPages(t *testing.T) {
	db := openTestDB(t, &Options{NoJournal: true}) // Full: readers see a commit at its sync point
	val := func(gen, i int) []byte { return []byte(fmt.Sprintf("%d-%05d-%0480d", gen, i, i)) }
	put := func(tx *Tx, gen int) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		for i := 0; i < 400; i++ {
			if err := b.Put([]byte(fmt.Sprintf("k%05d", i)), val(gen, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := db.Update(func(tx *Tx) error { return put(tx, 0) }); err != nil {
		t.Fatal(err)
	}
	want, err := dumpDB(db.DB)
	if err != nil {
		t.Fatal(err)
	}
	var inSync, inBegin atomic.Bool
	gap, syncGo := make(chan struct{}), make(chan struct{})
	atOldest, beginGo := make(chan struct{}), make(chan struct{})
	db.hooks = &dbHooks{
		afterDurable: func() {
			if inSync.CompareAndSwap(true, false) {
				close(gap)
				<-syncGo
			}
		},
		beginRWOldest: func() {
			if inBegin.CompareAndSwap(true, false) {
				close(atOldest)
				<-beginGo
			}
		},
	}
	inSync.Store(true)
	errA := make(chan error, 1)
	go func() { errA <- db.Update(func(tx *Tx) error { return put(tx, 1) }) }() // frees every leaf of gen 0
	<-gap
	inBegin.Store(true)
	errW := make(chan error, 1)
	go func() { errW <- db.Update(func(tx *Tx) error { return put(tx, 2) }) }() // allocates as many
	<-atOldest
	reader, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	close(beginGo)
	// Let the writer write its pages (it then waits for the sync point
	// held in the gap): it has once the writer lock is free again.
	for {
		if db.writer.TryLock() {
			if db.Stats().Commits >= 3 {
				db.writer.Unlock()
				break
			}
			db.writer.Unlock()
		}
		time.Sleep(time.Millisecond)
	}
	close(syncGo)
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	if err := <-errW; err != nil {
		t.Fatal(err)
	}
	got, err := dumpTx(reader)
	if err != nil || !sameDump(got, want) {
		t.Fatalf("the reader's snapshot changed under it (%v): %s", err, describeDiff(got, want))
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	db.hooks = nil
}

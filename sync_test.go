package rivet

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// waitbackFS gives the database file a WaitWriteback that counts its
// calls, as an OS file on Linux has (sync_file_range).
type waitbackFS struct {
	vfs.FS
	calls atomic.Int64
}

func (w *waitbackFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil || name != "/db" {
		return f, err
	}
	return &waitbackFile{File: f, calls: &w.calls}, nil
}

type waitbackFile struct {
	vfs.File
	calls *atomic.Int64
}

func (f *waitbackFile) WaitWriteback(off, n int64) error {
	f.calls.Add(1)
	return nil
}

// TestPaceCheckpoint: a background sync point writes its deferred pages
// back piece by piece, waiting for each (docs/design.md §3.9), and stops
// pausing while a sync point is waited for, the journal is behind its
// checkpoints, or Close is under way.
func TestPaceCheckpoint(t *testing.T) {
	fs := &waitbackFS{FS: vfs.NewCrashable()}
	db := openCheckedFS(t, fs, &Options{PageSize: 1024, InitialMmapSize: memMapSize})

	paces := func(what string, want bool) {
		t.Helper()
		before := fs.calls.Load()
		db.paceCheckpoint(0, 4096)
		if got := fs.calls.Load() > before; got != want {
			t.Errorf("%s: paced %v, want %v", what, got, want)
		}
	}
	paces("nobody waiting", true)
	db.syncWaiters.Add(1)
	paces("a sync point waited for", false)
	db.syncWaiters.Add(-1)
	db.jbehind.Store(true)
	paces("the journal behind its checkpoints", false)
	db.jbehind.Store(false)

	// A background sync point after journaled commits, which deferred
	// their pages, paces them.
	journalPuts(t, db, 0, 100)
	if db.pager.DeferredPages() == 0 {
		t.Fatal("no deferred pages after 100 journaled one-key commits")
	}
	before := fs.calls.Load()
	db.startBackgroundSync(db.headTxid())
	db.bgSyncs.Wait()
	if fs.calls.Load() == before {
		t.Error("the background sync point did not pace its pages")
	}
	if db.pager.DeferredPages() != 0 {
		t.Errorf("%d pages still deferred after the sync point", db.pager.DeferredPages())
	}

	db.closing.Store(true)
	paces("closing", false)
	db.closing.Store(false)
}

// TestBackgroundSyncTakesUpRequests: a background sync point asked for
// while another runs is not dropped: the running one covers it when it is
// done.
func TestBackgroundSyncTakesUpRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var blocking atomic.Bool
	fs := &hookFS{FS: vfs.NewCrashable(), beforeOn: func(name, op string) {
		if name == "/db" && op == "sync" && blocking.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
	}}
	db := openCheckedFS(t, fs, &Options{PageSize: 1024, InitialMmapSize: memMapSize, Durability: None})
	// The flush Open may run in the background is not the one to block.
	db.bgSyncs.Wait()
	put := func(i int) uint64 {
		t.Helper()
		mustPutOne(t, db, "b", fmt.Sprint(i), "v")
		return db.headTxid()
	}
	durable := func() uint64 {
		db.syncMu.Lock()
		defer db.syncMu.Unlock()
		return db.durable
	}

	first := put(1)
	blocking.Store(true)
	db.startBackgroundSync(first)
	<-entered // the first sync point is in its flush
	second := put(2)
	db.startBackgroundSync(second)
	close(release)
	db.bgSyncs.Wait()
	if got := durable(); got < second {
		t.Fatalf("durable txid %d after both requests, want %d: the second request was dropped", got, second)
	}
}

// openCheckedFS opens /db on fs; the test's cleanup checks and closes it.
func openCheckedFS(t *testing.T, fs vfs.FS, opts *Options) *DB {
	t.Helper()
	db, err := openFS(fs, "/db", 0o600, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mustCheck(t, db)
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// TestSyncWritesDeferredBeforeLock: what commits defer while a sync
// point's leader writes the dirty table without the writer lock is written
// by further sweeps, so the leader leaves at most a piece for prepareSync
// to write under the lock.
func TestSyncWritesDeferredBeforeLock(t *testing.T) {
	db := openTestDB(t, nil)
	loadSpread(t, db, 20_000)
	spreadCommit(t, db, 20_000, 1000, 'a')
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	spreadCommit(t, db, 20_000, 100, 'b')
	if db.pager.DeferredPages() <= deferredPiecePages {
		t.Fatalf("%d pages deferred before the sweep, want more than a piece", db.pager.DeferredPages())
	}
	calls := 0
	db.writeDeferredUnlocked(func(lo, hi int64) {
		calls++
		if calls == 1 {
			// A commit that lands while the first sweep runs.
			spreadCommit(t, db, 20_000, 100, 'c')
		}
	})
	if calls == 0 {
		t.Fatal("the first sweep ran nothing between pieces")
	}
	if n := db.pager.DeferredPages(); n > deferredPiecePages {
		t.Fatalf("%d pages left for the writer lock, want at most %d", n, deferredPiecePages)
	}
}

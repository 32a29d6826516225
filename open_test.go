package rivet

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/vfs"
)

// TestOpenFlushesRecoveredStateInBackground: after a process crash, a
// writable Open returns without waiting for the flush that makes the state
// it recovered from the page cache durable. Until that flush is done no
// byte of the file changes, a write that comes meanwhile (here a sync
// point) waits for it, and Sync flushes on its own.
func TestOpenFlushesRecoveredStateInBackground(t *testing.T) {
	opts := &Options{PageSize: 1024, InitialMmapSize: memMapSize, Durability: None}
	crash := vfs.NewCrashable()
	db, err := openFS(crash, "/db", 0o600, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustPutOne(t, db, "b", fmt.Sprint(i), "v")
		if i == 10 {
			// A sync point's meta, not a clean-close one: Open must flush.
			if err := db.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	// The process dies: the page cache, and so every write, survives.
	image := crash.CrashKeepAll()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var (
		flushing            = make(chan struct{})
		release             = make(chan struct{})
		blocked, wroteEarly atomic.Bool
		once                sync.Once
		syncs               atomic.Int64
	)
	fs := &hookFS{FS: image, beforeOn: func(name, op string) {
		if name != "/db" {
			return
		}
		if op == "sync" {
			syncs.Add(1)
		}
		switch {
		case op == "sync" && !blocked.Load():
			once.Do(func() {
				blocked.Store(true)
				close(flushing)
				<-release
			})
		case op == "write" && blocked.Load():
			select {
			case <-release:
			default:
				wroteEarly.Store(true)
			}
		}
	}}
	opened := make(chan *DB, 1)
	go func() {
		db, err := openFS(fs, "/db", 0o600, opts)
		if err != nil {
			t.Error(err)
		}
		opened <- db
	}()
	var rdb *DB
	select {
	case rdb = <-opened:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Open did not return while the flush of the recovered state was held")
	}
	if rdb == nil {
		close(release)
		t.FailNow()
	}
	select {
	case <-flushing:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Open started no flush of the state it recovered")
	}
	if err := rdb.View(func(tx *Tx) error {
		if v := tx.Bucket([]byte("b")).Get([]byte("19")); string(v) != "v" {
			return fmt.Errorf("key 19 reads %q while the flush runs", v)
		}
		return nil
	}); err != nil {
		close(release)
		t.Fatal(err)
	}
	// Sync must not take the recovered state for flushed while its flush
	// runs: it flushes on its own.
	before := syncs.Load()
	if err := rdb.Sync(); err != nil {
		close(release)
		t.Fatal(err)
	}
	if syncs.Load() == before {
		close(release)
		t.Fatal("Sync returned without a flush while the recovered state's flush was still running")
	}
	mustPutOne(t, rdb, "b", "20", "v")
	synced := make(chan error, 1)
	go func() { synced <- rdb.Sync() }()
	select {
	case err := <-synced:
		close(release)
		t.Fatalf("a sync point finished (%v) before the flush of the recovered state", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if wroteEarly.Load() {
		t.Fatal("the file was written before the flush of the recovered state finished")
	}
	mustCheck(t, rdb)
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
}

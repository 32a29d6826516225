package rivet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/vfs"
)

// TestWriteOrFlushFailureLatches: a failed write or flush fails its commit
// with that error, every later write fails with ErrLatched until the DB is
// reopened, readers keep working, and a reopen shows the last durable state.
func TestWriteOrFlushFailureLatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault vfs.Fault
	}{
		{"flush EIO", vfs.Fault{Op: vfs.OpSync, Err: syscall.EIO}},
		{"write ENOSPC, short", vfs.Fault{Op: vfs.OpWrite, Err: syscall.ENOSPC, ShortWrite: 100}},
		{"second write EIO", vfs.Fault{Op: vfs.OpWrite, Nth: 2, Err: syscall.EIO}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfs := vfs.NewCrashable()
			ffs := vfs.NewFaulty(cfs)
			db, err := openFS(ffs, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatal(err)
			}
			put := func(k string) error {
				return db.Update(func(tx *Tx) error {
					b, err := tx.CreateBucketIfNotExists([]byte("b"))
					if err != nil {
						return err
					}
					return b.Put([]byte(k), make([]byte, 300))
				})
			}
			if err := put("durable"); err != nil {
				t.Fatal(err)
			}
			if db.Stats().Latched {
				t.Fatal("Stats.Latched before any fault")
			}
			ffs.Arm(tc.fault)
			err = put("failed")
			if !errors.Is(err, tc.fault.Err) || !errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("commit during the fault: %v, want %v and ErrLatched", err, tc.fault.Err)
			}
			ffs.Disarm()
			if err := put("after"); !errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("commit after the fault: %v, want ErrLatched", err)
			}
			if err := db.Sync(); !errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("Sync after the fault: %v, want ErrLatched", err)
			}
			if !db.Stats().Latched {
				t.Fatal("Stats.Latched not set while the DB refuses writes")
			}
			// Readers still see the last committed state.
			err = db.View(func(tx *Tx) error {
				b := tx.Bucket([]byte("b"))
				if b.Get([]byte("durable")) == nil || b.Get([]byte("failed")) != nil {
					return fmt.Errorf("reader sees the wrong state")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// What survives a power loss right now: only flushed data.
			crashed := cfs.CrashKeepNone()
			rdb, err := openFS(crashed, "/db", 0o600, &Options{InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatalf("reopen after the fault: %v", err)
			}
			defer rdb.Close()
			mustCheck(t, rdb)
			err = rdb.View(func(tx *Tx) error {
				b := tx.Bucket([]byte("b"))
				if b == nil || b.Get([]byte("durable")) == nil {
					return fmt.Errorf("the commit before the fault is lost")
				}
				if b.Get([]byte("failed")) != nil || b.Get([]byte("after")) != nil {
					return fmt.Errorf("a failed commit is visible")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.Update(func(tx *Tx) error {
				return tx.Bucket([]byte("b")).Put([]byte("new"), []byte("v"))
			}); err != nil {
				t.Fatalf("write after reopen: %v", err)
			}
		})
	}
}

// TestBatch: concurrent Batch calls share transactions, each call's error
// reaches only its caller, and a failing function is retried alone (bbolt's
// semantics, which is why Batch functions must be idempotent).
func TestBatch(t *testing.T) {
	db := openTestDB(t, nil)
	if err := db.Update(func(tx *Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	db.MaxBatchSize = 10
	var calls atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 40)
	failing := errors.New("this one fails")
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = db.Batch(func(tx *Tx) error {
				calls.Add(1)
				if i == 13 {
					return failing
				}
				return tx.Bucket([]byte("b")).Put([]byte(fmt.Sprintf("%02d", i)), []byte("v"))
			})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if i == 13 {
			if !errors.Is(err, failing) {
				t.Errorf("call 13: %v, want its own error", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	_ = db.View(func(tx *Tx) error {
		n := tx.Bucket([]byte("b")).Stats().KeyN
		if n != 39 {
			t.Errorf("%d keys after the batches, want 39", n)
		}
		return nil
	})
	if c := calls.Load(); c < 41 {
		t.Errorf("%d function calls; the failing one must have run again alone", c)
	}
	if s := db.Stats(); s.Commits >= 40 {
		t.Errorf("%d commits for 40 Batch calls: nothing was batched", s.Commits)
	}
}

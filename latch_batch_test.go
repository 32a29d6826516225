package rivet

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/vfs"
)

// TestFlushFailureLatches: a failed flush fails its commit with that
// error, every later write fails with ErrLatched until the DB is reopened,
// readers keep working, and a reopen shows the last durable state.
func TestFlushFailureLatches(t *testing.T) {
	for _, errno := range []error{syscall.EIO, syscall.ENOSPC} {
		t.Run(errno.Error(), func(t *testing.T) {
			cfs := vfs.NewCrashable()
			ffs := vfs.NewFaulty(cfs)
			db, err := openFS(ffs, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatal(err)
			}
			if err := putValue(db, "durable"); err != nil {
				t.Fatal(err)
			}
			if db.Stats().Latched {
				t.Fatal("Stats.Latched before any fault")
			}
			ffs.Arm(vfs.Fault{Op: vfs.OpSync, Err: errno})
			err = putValue(db, "failed")
			if !errors.Is(err, errno) || !errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("commit during the fault: %v, want %v and ErrLatched", err, errno)
			}
			ffs.Disarm()
			if err := putValue(db, "after"); !errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("commit after the fault: %v, want ErrLatched", err)
			}
			if err := db.Sync(); !errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("Sync after the fault: %v, want ErrLatched", err)
			}
			if !db.Stats().Latched {
				t.Fatal("Stats.Latched not set while the DB refuses writes")
			}
			// Readers still see the last durable state.
			if err := wantKeys(db, "durable"); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// What survives a power loss right now: only flushed data.
			rdb, err := openFS(cfs.CrashKeepNone(), "/db", 0o600, &Options{InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatalf("reopen after the fault: %v", err)
			}
			defer rdb.Close()
			mustCheck(t, rdb)
			if err := wantKeys(rdb, "durable"); err != nil {
				t.Fatal(err)
			}
			if err := putValue(rdb, "new"); err != nil {
				t.Fatalf("write after reopen: %v", err)
			}
		})
	}
}

// TestWriteFailureRollsBack: a failed write — of the commit's pages, of a
// region map or of the meta, whole or short — fails its commit with the
// OS error and rolls it back; the DB does not latch, readers see the state
// before it, the next commit succeeds, and after a power loss the file
// holds every commit that succeeded and none that failed.
func TestWriteFailureRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault vfs.Fault
	}{
		{"first write ENOSPC, short", vfs.Fault{Op: vfs.OpWrite, Err: syscall.ENOSPC, ShortWrite: 100}},
		{"second write EIO", vfs.Fault{Op: vfs.OpWrite, Nth: 2, Err: syscall.EIO}},
		{"grow ENOSPC", vfs.Fault{Op: vfs.OpTruncate, Err: syscall.ENOSPC}},
		{"every write ENOSPC twice", vfs.Fault{Op: vfs.OpWrite, Err: syscall.ENOSPC, Persist: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfs := vfs.NewCrashable()
			ffs := vfs.NewFaulty(cfs)
			db, err := openFS(ffs, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := putValue(db, "durable"); err != nil {
				t.Fatal(err)
			}
			// A transaction that changes nothing first, so that the
			// releases its Begin makes are done before the state is taken.
			if err := db.Update(func(*Tx) error { return nil }); err != nil {
				t.Fatal(err)
			}
			before := db.Stats()
			spaceBefore := db.space.Stats()
			headBefore := db.head
			ffs.Arm(tc.fault)
			if tc.fault.Op == vfs.OpTruncate {
				// Growth: a value larger than the file.
				err = db.Update(func(tx *Tx) error {
					return tx.Bucket([]byte("b")).Put([]byte("failed"), make([]byte, 64<<10))
				})
			} else {
				err = putValue(db, "failed")
			}
			if !errors.Is(err, tc.fault.Err) || errors.Is(err, rerrors.ErrLatched) {
				t.Fatalf("commit during the fault: %v, want %v and no latch", err, tc.fault.Err)
			}
			if tc.fault.Persist {
				if err := putValue(db, "failed2"); !errors.Is(err, tc.fault.Err) {
					t.Fatalf("second commit during the fault: %v, want %v", err, tc.fault.Err)
				}
			}
			if ffs.Injected() == 0 {
				t.Fatal("the fault never fired")
			}
			ffs.Disarm()
			after := db.Stats()
			if after.Latched || after.Commits != before.Commits {
				t.Fatalf("after the failed commit: latched %v, commits %d (before %d)", after.Latched, after.Commits, before.Commits)
			}
			if db.head != headBefore {
				t.Fatalf("head moved from txn %d to %d", headBefore.Txid, db.head.Txid)
			}
			sa := db.space.Stats()
			if sa.HWM != spaceBefore.HWM || sa.FreePages != spaceBefore.FreePages || sa.PendingPages != spaceBefore.PendingPages || sa.AllocatablePages != spaceBefore.AllocatablePages {
				t.Fatalf("free-space map after the failed commit %+v, before %+v", sa, spaceBefore)
			}
			if err := wantKeys(db, "durable"); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
			if err := putValue(db, "after"); err != nil {
				t.Fatalf("commit after the fault: %v", err)
			}
			if err := wantKeys(db, "durable", "after"); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
			rdb, err := openFS(cfs.CrashKeepNone(), "/db", 0o600, &Options{InitialMmapSize: memMapSize})
			if err != nil {
				t.Fatalf("reopen after a power loss: %v", err)
			}
			defer rdb.Close()
			mustCheck(t, rdb)
			if err := wantKeys(rdb, "durable", "after"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// putValue stores a 300-byte value under key in bucket "b" in its own
// transaction.
func putValue(db *DB, key string) error {
	return db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), make([]byte, 300))
	})
}

// wantKeys fails unless bucket "b" holds exactly keys.
func wantKeys(db *DB, keys ...string) error {
	return db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		if b == nil {
			return fmt.Errorf("bucket b is missing")
		}
		var got []string
		err := b.ForEach(func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
		if err != nil {
			return err
		}
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			return fmt.Errorf("keys %q, want %q", got, keys)
		}
		return nil
	})
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

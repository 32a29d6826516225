package rivet

import (
	"fmt"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// countingDB opens path on an in-memory file system wrapped in a counter.
func countingDB(t *testing.T, fs vfs.FS, counts *vfs.CountingFS, opts *Options) *DB {
	t.Helper()
	db, err := openFS(counts, "/db", 0o600, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return db
}

// buildFragmented makes the shape of buildkit's cache database: a file grown
// with many values, then emptied down to a few small keys, so free pages lie
// scattered between the live ones. It returns the number of free pages.
func buildFragmented(t *testing.T, db *DB, blobs int) int {
	t.Helper()
	// Two 4,000-byte values fill a two-page leaf: a page per value, as when
	// values this size were blobs of a page each.
	big := make([]byte, 4000)
	for start := 0; start < blobs; start += 2000 {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("meta"))
			if err != nil {
				return err
			}
			for i := start; i < start+2000 && i < blobs; i++ {
				if i%2000 == 7 {
					// One small live key per batch, between the blobs.
					if err := b.Put([]byte(fmt.Sprintf("k%08d-live", i)), []byte("small value")); err != nil {
						return err
					}
				}
				if err := b.Put([]byte(fmt.Sprintf("k%08d", i)), big); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := db.Update(func(tx *Tx) error {
		b := tx.Bucket([]byte("meta"))
		for i := 0; i < blobs; i++ {
			if err := b.Delete([]byte(fmt.Sprintf("k%08d", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := db.Stats()
	return s.FreePageN + s.PendingPageN
}

// TestOneKeyCommitIO: on a file with at least 200,000 free pages, a one-key
// commit writes a handful of pages with one flush (bbolt rewrites its whole
// freelist: 1.6 MB for 200,000 free pages), and Open reads the same small
// number of pages on a large file as on a tiny one. Counts, not timings.
func TestOneKeyCommitIO(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds an 800 MB file: not in -short mode or under the race detector (scripts/test.sh runs it without -race)")
	}
	mem := vfs.NewMem()
	counts := vfs.NewCounting(mem)
	opts := &Options{PageSize: 4096}
	db := countingDB(t, mem, counts, opts)
	free := buildFragmented(t, db, 205000)
	if free < 200000 {
		t.Fatalf("only %d free pages; the test needs 200,000", free)
	}
	size := db.readers.Current().HWM * uint64(db.pageSize)
	t.Logf("file: %d MiB, %d free pages", size>>20, free)

	commit := func(i int) vfs.Counts {
		before := counts.Snapshot()
		err := db.Update(func(tx *Tx) error {
			return tx.Bucket([]byte("meta")).Put([]byte(fmt.Sprintf("k%08d-live", 7)), []byte(fmt.Sprintf("v%d", i)))
		})
		if err != nil {
			t.Fatal(err)
		}
		return diffCounts(counts.Snapshot(), before)
	}
	// The first commit after the deletes moves the live pages to the lowest
	// free addresses; measure the steady state after it.
	first := commit(0)
	t.Logf("first commit: %d pages in %d writes, %d flushes", first.WriteBytes/4096, first.WriteCalls, first.SyncCalls())
	for i := 1; i <= 20; i++ {
		c := commit(i)
		pages := c.WriteBytes / 4096
		// The tree pages the put copies and the meta: the free-space
		// changes ride in the meta's delta, so no region map is written.
		if pages > 4 || c.SyncCalls() != 1 {
			t.Fatalf("commit %d wrote %d pages in %d writes with %d flushes; want <= 4 pages and 1 flush", i, pages, c.WriteCalls, c.SyncCalls())
		}
		if i == 20 {
			t.Logf("one-key commit: %d pages (%d bytes) in %d writes, %d flush", pages, c.WriteBytes, c.WriteCalls, c.SyncCalls())
		}
	}
	mustCheck(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Open of the large file against Open of a tiny one.
	openReads := func(fs vfs.FS, cfs *vfs.CountingFS, path string) int64 {
		before := cfs.Snapshot()
		d, err := openFS(cfs, path, 0o600, opts)
		if err != nil {
			t.Fatal(err)
		}
		c := diffCounts(cfs.Snapshot(), before)
		reads := c.ReadBytes / 4096
		// The file was closed cleanly: nothing to make durable at Open.
		if c.SyncCalls() != 0 {
			t.Errorf("Open after a clean Close flushed %d times, want 0", c.SyncCalls())
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		return reads
	}
	large := openReads(mem, counts, "/db")

	small := vfs.NewCounting(vfs.NewMem())
	sdb := countingDB(t, nil, small, opts)
	if err := sdb.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := sdb.Close(); err != nil {
		t.Fatal(err)
	}
	tiny := openReads(nil, small, "/db")
	t.Logf("Open reads: %d pages on the %d MiB file, %d pages on a 2-commit file", large, size>>20, tiny)
	// After a clean Close the newest meta needs no verification: Open
	// reads the two metas and nothing else, whatever the file's size.
	if large != 2 || tiny != 2 {
		t.Fatalf("Open read %d pages on the large file (tiny file: %d); want the 2 metas", large, tiny)
	}
}

func diffCounts(a, b vfs.Counts) vfs.Counts {
	return vfs.Counts{
		ReadCalls:        a.ReadCalls - b.ReadCalls,
		ReadBytes:        a.ReadBytes - b.ReadBytes,
		WriteCalls:       a.WriteCalls - b.WriteCalls,
		WriteBytes:       a.WriteBytes - b.WriteBytes,
		SyncDataCalls:    a.SyncDataCalls - b.SyncDataCalls,
		SyncBarrierCalls: a.SyncBarrierCalls - b.SyncBarrierCalls,
		TruncateCalls:    a.TruncateCalls - b.TruncateCalls,
		MapCalls:         a.MapCalls - b.MapCalls,
		UnmapCalls:       a.UnmapCalls - b.UnmapCalls,
	}
}

package rivet

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// churn rewrites keys [0, keys) of bucket "b" with values that name commit c.
func churn(t *testing.T, db *DB, c, keys int) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		for k := 0; k < keys; k++ {
			if err := b.Put([]byte(fmt.Sprintf("k%04d", k)), churnValue(c, k)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func churnValue(c, k int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%06d.%04d|", c, k)), 8) }

func headHWM(db *DB) uint64 {
	db.writer.Lock()
	defer db.writer.Unlock()
	return db.head.HWM
}

// TestNoneModeReusesYoungPages: in None mode, pages written and replaced
// since the last sync point are in no durable state and are written again
// at once (young runs, docs/design.md §4), so churn between sync points
// neither grows the file nor needs early sync points — while a reader's
// snapshot keeps every page it can see.
func TestNoneModeReusesYoungPages(t *testing.T) {
	db, err := openFS(vfs.NewMem(), "/db", 0o600, &Options{Durability: None, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const keys = 400 // ~10 leaves and a branch: each commit rewrites them all
	churn(t, db, 0, keys)
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	churn(t, db, 1, keys) // frees the steady state's pages: pending until a sync point
	start := headHWM(db)
	flushes := db.Stats().Flushes
	const commits = 3000
	for c := 2; c < commits; c++ {
		churn(t, db, c, keys)
	}
	grown := headHWM(db) - start
	t.Logf("%d commits rewriting %d keys: HWM grew by %d pages, %d flushes", commits, keys, grown, db.Stats().Flushes-flushes)
	// Without young reuse each commit's ~12 pages wait for a sync point:
	// tens of thousands of pages, or early sync points.
	if grown > 64 {
		t.Fatalf("HWM grew by %d pages over %d None-mode commits; replaced pages were not reused", grown, commits)
	}
	if f := db.Stats().Flushes - flushes; f != 0 {
		t.Fatalf("%d flushes during None-mode churn", f)
	}

	// A reader at state R: the pages R sees were written after the last
	// sync point and are replaced by the next commits, but must not be
	// written again while the reader is open.
	reader, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback() }() // Close waits for open readers
	readerCommit := commits - 1
	for c := commits; c < commits+500; c++ {
		churn(t, db, c, keys)
	}
	b := reader.Bucket([]byte("b"))
	for k := 0; k < keys; k++ {
		if got := b.Get([]byte(fmt.Sprintf("k%04d", k))); !bytes.Equal(got, churnValue(readerCommit, k)) {
			t.Fatalf("reader at commit %d, key %d: %q", readerCommit, k, got)
		}
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
}

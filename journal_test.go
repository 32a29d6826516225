package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// journalPuts commits n transactions of a few puts, deletes and bucket
// operations (nested buckets, sequences, moves) on db.
func journalPuts(t *testing.T, db *DB, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{byte(i)}, 100+i%300)); err != nil {
				return err
			}
			if i%7 == 3 {
				if err := b.Delete([]byte(fmt.Sprintf("k%05d", i-3))); err != nil {
					return err
				}
			}
			if i%11 == 5 {
				c, err := b.CreateBucketIfNotExists([]byte(fmt.Sprintf("n%d", i%3)))
				if err != nil {
					return err
				}
				if _, err := c.NextSequence(); err != nil {
					return err
				}
			}
			if i%13 == 8 {
				if err := b.DeleteBucket([]byte(fmt.Sprintf("n%d", (i+1)%3))); err != nil && !errors.Is(err, ErrBucketNotFound) {
					return err
				}
			}
			if i%17 == 9 {
				if _, err := tx.CreateBucketIfNotExists([]byte("dst")); err != nil {
					return err
				}
				if err := tx.MoveBucket([]byte(fmt.Sprintf("n%d", i%3)), b, tx.Bucket([]byte("dst"))); err != nil && !errors.Is(err, ErrBucketNotFound) && !errors.Is(err, ErrBucketExists) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
}

// TestJournalReplay: commits acknowledged by journal writes only (the file
// not flushed since the first commit) are all there after a power loss
// that keeps none of the file's unflushed writes.
func TestJournalReplay(t *testing.T) {
	cfs, db := crashableDB(t, 1024)
	journalPuts(t, db, 0, 200)
	st := db.Stats()
	if st.JournalWrites < 190 || st.JournalRecords < 190 {
		t.Fatalf("%d journal writes holding %d records for 200 commits, want nearly all", st.JournalWrites, st.JournalRecords)
	}
	for name, img := range map[string]*vfs.CrashFS{"nothing kept": cfs.CrashKeepNone(), "everything kept": cfs.CrashKeepAll()} {
		if rec := recoversTo(t, db, img, name); rec.JournalRecords == 0 {
			t.Errorf("%s: recovery applied no journal record (%+v)", name, rec)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := cfs.OpenFile(journalPath("/db", i), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("journal file %d after Close: %v, want it removed", i, err)
		}
	}
}

// crashableDB opens a DB of page size ps on a fresh crash-simulating FS.
func crashableDB(t *testing.T, ps int) (*vfs.CrashFS, *DB) {
	t.Helper()
	cfs := vfs.NewCrashable()
	db, err := openFS(cfs, "/db", 0o600, &Options{PageSize: ps, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	return cfs, db
}

// recoversTo reopens the crash image img and fails the test unless it
// holds exactly what db holds now; it returns what recovery reported.
func recoversTo(t *testing.T, db *DB, img vfs.FS, what string) Recovery {
	t.Helper()
	want, err := dumpDB(db)
	if err != nil {
		t.Fatal(err)
	}
	got := reopenDump(t, img, "/db")
	if !sameDump(got.dump, want) {
		t.Errorf("%s: the reopened file holds other contents\n%s", what, describeDiff(got.dump, want))
	}
	return got.rec
}

type reopened struct {
	dump map[string]string
	rec  Recovery
}

// reopenDump opens a crash image writable, checks it, reads it and closes it.
func reopenDump(t *testing.T, fs vfs.FS, path string) reopened {
	t.Helper()
	db, err := openFS(fs, path, 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	mustCheck(t, db)
	d, err := dumpDB(db)
	if err != nil {
		t.Fatal(err)
	}
	return reopened{d, db.Recovery()}
}

// TestJournalSwitchesFiles: with small journal files the writer moves
// between the two, checkpointing the one it leaves, and a crash at the end
// recovers every acknowledged commit from the last checkpoint plus both
// files.
func TestJournalSwitchesFiles(t *testing.T) {
	cfs, db := crashableDB(t, 1024)
	db.jswitchBytes = 8 << 10
	journalPuts(t, db, 0, 300)
	st := db.Stats()
	if st.JournalBytes < 4*db.jswitchBytes {
		t.Fatalf("%d journal bytes: too few to switch files", st.JournalBytes)
	}
	// Each switch starts a checkpoint: the file was flushed many times.
	if st.Flushes < 5 {
		t.Fatalf("%d flushes of the file over %d journal bytes: checkpoints did not run", st.Flushes, st.JournalBytes)
	}
	recoversTo(t, db, cfs.CrashKeepNone(), "after the crash")
	// Both files were used in this Open (the salt of the open's metas).
	for i := 0; i < 2; i++ {
		f, err := cfs.OpenFile(journalPath("/db", i), os.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("journal file %d: %v", i, err)
		}
		size, _ := f.Size()
		_ = f.Close()
		if size == 0 {
			t.Errorf("journal file %d is empty: the writer never switched to it", i)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestJournalNotLogged: a commit whose record would pass the bound commits
// by a sync point of the file, and the journaled commits after it are
// recovered on top of it.
func TestJournalNotLogged(t *testing.T) {
	cfs, db := crashableDB(t, 4096)
	journalPuts(t, db, 0, 20)
	before := db.Stats()
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("big"))
		if err != nil {
			return err
		}
		return b.Put([]byte("v"), bytes.Repeat([]byte("x"), 2*maxJournalRecord))
	}); err != nil {
		t.Fatal(err)
	}
	after := db.Stats()
	if d := after.Sub(&before); d.JournalRecords != 0 || d.Flushes == 0 {
		t.Fatalf("the large commit: %d journal records, %d flushes of the file; want none and a sync point", d.JournalRecords, d.Flushes)
	}
	journalPuts(t, db, 20, 20)
	if rec := recoversTo(t, db, cfs.CrashKeepNone(), "after the crash"); rec.JournalRecords < 15 {
		t.Errorf("recovery applied %d records, want the commits after the large one", rec.JournalRecords)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestJournalReadOnlyOpen: a read-only Open of a file whose journal holds
// commits beyond it refuses with ErrJournalPending; a writable Open applies
// them, and the read-only Open then succeeds with everything.
func TestJournalReadOnlyOpen(t *testing.T) {
	cfs, db := crashableDB(t, 1024)
	journalPuts(t, db, 0, 30)
	want, err := dumpDB(db)
	if err != nil {
		t.Fatal(err)
	}
	img := cfs.CrashKeepNone()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := openFS(img, "/db", 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize}); !errors.Is(err, ErrJournalPending) {
		t.Fatalf("read-only open of a file with commits in its journal: %v, want ErrJournalPending", err)
	}
	// A writable Open in another mode applies the records too, and removes
	// the journal it does not keep.
	w, err := openFS(img, "/db", 0o600, &Options{Durability: None, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	if w.Recovery().JournalRecords == 0 {
		t.Fatalf("the None-mode Open applied no record")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := openFS(img, "/db", 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := dumpDB(ro)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDump(got, want) {
		t.Fatalf("after applying the journal\n%s", describeDiff(got, want))
	}
}

// TestJournalOfAnotherOpenIgnored: journal files whose salt the file's
// meta does not carry are not applied, even with valid records of later
// txids (a journal left from an earlier Open after a sync point covered
// it, or put beside the wrong file).
func TestJournalOfAnotherOpenIgnored(t *testing.T) {
	other, a := crashableDB(t, 1024)
	journalPuts(t, a, 1000, 40)
	stale := other.CrashKeepNone()
	_ = a.Close()

	cfs, db := crashableDB(t, 1024)
	journalPuts(t, db, 0, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := reopenDump(t, cfs, "/db").dump
	// Put the other database's journal beside this file.
	for i := 0; i < 2; i++ {
		src, err := stale.OpenFile(journalPath("/db", i), os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		size, _ := src.Size()
		buf := make([]byte, size)
		if _, err := src.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		dst, err := cfs.OpenFile(journalPath("/db", i), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dst.WriteAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		_ = dst.Sync(vfs.SyncData)
		_ = dst.Close()
	}
	got := reopenDump(t, cfs, "/db")
	if got.rec.JournalRecords != 0 || !sameDump(got.dump, want) {
		t.Fatalf("a foreign journal was applied (%+v)\n%s", got.rec, describeDiff(got.dump, want))
	}
}

// TestJournalWithOpenFileHook: etcd's defragmentation opens its temporary
// database with an Options.OpenFile that returns one prepared file
// whatever name it is asked for. The journal's files must not go through
// it (they would be the database file itself).
func TestJournalWithOpenFileHook(t *testing.T) {
	dir := t.TempDir()
	temp, err := os.CreateTemp(dir, "db.tmp.")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	db, err := Open(temp.Name(), 0o600, &Options{OpenFile: func(string, int, os.FileMode) (*os.File, error) {
		calls++
		return temp, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	journalPuts(t, db, 0, 20)
	if st := db.Stats(); st.JournalWrites == 0 {
		t.Fatalf("no journal writes: the test does not cover the journal")
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if calls != 1 {
		t.Errorf("the opener was called %d times, want once (for the database file)", calls)
	}
	re, err := Open(temp.Name(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	mustCheck(t, re)
	if err := re.View(func(tx *Tx) error {
		if tx.Bucket([]byte("b")).Get([]byte("k00019")) == nil {
			return fmt.Errorf("the last commit is missing after reopening")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestJournalDirectoryRemoved: a program's tests often remove the
// database's directory while a DB in it is still open (etcd's do); commits
// went on without a journal before, so they must go on when the journal's
// files cannot be made: by sync points of the file.
func TestJournalDirectoryRemoved(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir+"/sub.db", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	journalPuts(t, db, 0, 1) // the sync point that enables the journal
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	before := db.Stats()
	journalPuts(t, db, 1, 10)
	after := db.Stats()
	if d := after.Sub(&before); d.JournalWrites != 0 || d.Flushes < 10 {
		t.Fatalf("with no journal files: %d journal writes, %d flushes of the file for 10 commits", d.JournalWrites, d.Flushes)
	}
	mustCheck(t, db)
}

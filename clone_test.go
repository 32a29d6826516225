package rivet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
)

// cloneKeys is how many keys the clone tests' writer cycles through.
const cloneKeys = 4000

// cloneWrite is transaction j of the clone tests' writer: key j mod
// cloneKeys gets the value j (padded, so the tree spans many pages), and
// "n" records j. After commit j the bucket holds, for each key i, the
// largest j' <= j with j' mod cloneKeys == i (or its initial value 0), so
// a copy shows by itself whether it is exactly the state after some commit.
func cloneWrite(tx *Tx, j uint64) error {
	b, err := tx.CreateBucketIfNotExists([]byte("b"))
	if err != nil {
		return err
	}
	if err := b.Put(cloneKey(j%cloneKeys), cloneValue(j)); err != nil {
		return err
	}
	return b.Put([]byte("n"), binary.BigEndian.AppendUint64(nil, j))
}

func cloneKey(i uint64) []byte { return fmt.Appendf(nil, "k%06d", i) }

func cloneValue(j uint64) []byte {
	v := make([]byte, 100)
	binary.BigEndian.PutUint64(v, j)
	return v
}

// fillClone writes the initial state (every key with value 0, n = 0) and
// returns the txid of that commit.
func fillClone(t testing.TB, db *DB) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		for i := uint64(0); i < cloneKeys; i++ {
			if err := b.Put(cloneKey(i), cloneValue(0)); err != nil {
				return err
			}
		}
		return b.Put([]byte("n"), binary.BigEndian.AppendUint64(nil, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// verifyClone opens the copy at path, runs a full Check and checks that it
// holds exactly the state after one of the writer's commits; it returns
// that commit's j and the copy's txid.
func verifyClone(t testing.TB, path string) (j, txid uint64) {
	t.Helper()
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer db.Close()
	mustCheck(t, db)
	err = db.View(func(tx *Tx) error {
		txid = uint64(tx.ID())
		b := tx.Bucket([]byte("b"))
		if b == nil {
			return errors.New("bucket b missing")
		}
		j = binary.BigEndian.Uint64(b.Get([]byte("n")))
		n := 0
		for i := uint64(0); i < cloneKeys; i++ {
			want := uint64(0)
			if j >= i {
				want = j - (j-i)%cloneKeys // the last commit that wrote key i
			}
			if got := b.Get(cloneKey(i)); !bytes.Equal(got, cloneValue(want)) {
				return fmt.Errorf("key %d holds %x, want the value of commit %d (the copy is at commit %d)", i, got[:8], want, j)
			}
			n++
		}
		if st := b.Stats(); st.KeyN != n+1 {
			return fmt.Errorf("%d keys, want %d", st.KeyN, n+1)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copy at %s: %v", path, err)
	}
	return j, txid
}

// TestCloneHoldsStateBeforeCall: Clone, by whatever method this file system
// allows, and Clone with Copy make files holding exactly the state
// committed before the call, in Full and None durability (None: the
// newest commits are in no meta yet, so a clone must make a sync point
// first). On a file system that cannot clone (ext4, tmpfs) the first is a
// copy that says why.
func TestCloneHoldsStateBeforeCall(t *testing.T) {
	for _, none := range []bool{false, true} {
		for _, copyIt := range []bool{false, true} {
			t.Run(fmt.Sprintf("none=%t/copy=%t", none, copyIt), func(t *testing.T) {
				opts := &Options{}
				if none {
					opts.Durability = None
				}
				db := openTestDB(t, opts)
				fillClone(t, db.DB)
				for j := uint64(1); j <= 37; j++ {
					if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, j) }); err != nil {
						t.Fatal(err)
					}
				}
				dst := filepath.Join(t.TempDir(), "clone.db")
				res, err := db.Clone(dst, &CloneOptions{Copy: copyIt})
				if err != nil {
					t.Fatal(err)
				}
				// Later commits must not reach the copy.
				if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, 38) }); err != nil {
					t.Fatal(err)
				}
				t.Logf("%+v", res)
				if copyIt && (res.Method != CloneCopied || res.Fallback != "a copy was asked for") {
					t.Errorf("Copy asked for, got %v (%q)", res.Method, res.Fallback)
				}
				if (res.Method == CloneCopied) != (res.Fallback != "") || (res.Method == CloneReflinked) != (res.Call != "") {
					t.Errorf("inconsistent result %+v", res)
				}
				if res.Method == CloneCopied && res.Written != res.Size {
					t.Errorf("copy wrote %d bytes of %d", res.Written, res.Size)
				}
				if res.Method == CloneReflinked && res.Written != 0 {
					t.Errorf("clone wrote %d bytes", res.Written)
				}
				if fi, err := os.Stat(dst); err != nil || fi.Size() != res.Size || fi.Mode().Perm() != 0o600 {
					t.Errorf("copy: %v, %v; result says %d bytes", fi, err, res.Size)
				}
				j, txid := verifyClone(t, dst)
				if j != 37 || txid != res.Txid {
					t.Errorf("copy holds commit %d at txid %d; want commit 37 at the txid Clone reported, %d", j, txid, res.Txid)
				}
			})
		}
	}
}

// TestCloneRefusesExisting: Clone never overwrites a file, whether it
// would clone or copy, and leaves the file as it was.
func TestCloneRefusesExisting(t *testing.T) {
	db := openTestDB(t, nil)
	fillClone(t, db.DB)
	dst := filepath.Join(t.TempDir(), "exists")
	if err := os.WriteFile(dst, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, copyIt := range []bool{false, true} {
		res, err := db.Clone(dst, &CloneOptions{Copy: copyIt})
		if !errors.Is(err, fs.ErrExist) || res != nil {
			t.Errorf("copy=%t: Clone over an existing file: %v, %v; want an error matching fs.ErrExist", copyIt, res, err)
		}
		if _, err := CloneFile(db.Path(), dst, &CloneOptions{Copy: copyIt}); !errors.Is(err, fs.ErrExist) {
			t.Errorf("copy=%t: CloneFile over an existing file: %v; want an error matching fs.ErrExist", copyIt, err)
		}
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep me" {
		t.Errorf("the existing file now holds %q", b)
	}
	// A closed DB creates nothing.
	closed := filepath.Join(t.TempDir(), "closed")
	d := db.DB
	db.checkAndClose()
	if _, err := d.Clone(closed, nil); !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
		t.Errorf("Clone of a closed DB: %v", err)
	}
	if _, err := os.Stat(closed); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Clone of a closed DB created %s (%v)", closed, err)
	}
}

// TestCloneProgress: a copy reports its progress up to the total, and an
// error from the callback stops it and removes the partial file.
func TestCloneProgress(t *testing.T) {
	db := openTestDB(t, nil)
	fillClone(t, db.DB)
	dir := t.TempDir()
	var calls []int64
	var total int64
	res, err := db.Clone(filepath.Join(dir, "a"), &CloneOptions{Copy: true, Progress: func(w, tot int64) error {
		calls = append(calls, w)
		total = tot
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 2 || calls[len(calls)-1] != total || total != res.Size {
		t.Errorf("progress calls %v, total %d, size %d", calls, total, res.Size)
	}
	stop := errors.New("stop")
	n := 0
	_, err = db.Clone(filepath.Join(dir, "b"), &CloneOptions{Copy: true, Progress: func(w, tot int64) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) {
		t.Errorf("Clone with a failing progress callback: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stopped copy was left behind (%v)", err)
	}
}

// runCloneWriter commits cloneWrite transactions from j = first on until
// stop is closed, and returns the last j committed.
func runCloneWriter(t testing.TB, db *DB, first uint64, stop <-chan struct{}, wg *sync.WaitGroup, last *atomic.Uint64) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := first; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, j) }); err != nil {
				t.Error(err)
				return
			}
			last.Store(j)
		}
	}()
}

// TestCloneWithConcurrentWriter: while a writer commits without pause,
// Clone (and Clone with Copy) still hold exactly the state after one of its
// commits, one that committed before Clone returned and not before it was
// called.
func TestCloneWithConcurrentWriter(t *testing.T) {
	for _, copyIt := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy=%t", copyIt), func(t *testing.T) {
			db := openTestDB(t, &Options{Durability: None})
			fillClone(t, db.DB)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var last atomic.Uint64
			runCloneWriter(t, db.DB, 1, stop, &wg, &last)
			dir := t.TempDir()
			for i := range 5 {
				time.Sleep(20 * time.Millisecond)
				before := last.Load()
				dst := filepath.Join(dir, fmt.Sprint(i))
				res, err := db.Clone(dst, &CloneOptions{Copy: copyIt})
				after := last.Load()
				if err != nil {
					t.Fatal(err)
				}
				j, txid := verifyClone(t, dst)
				if j < before || j > after+1 || txid != res.Txid {
					t.Errorf("clone %d (%v) holds commit %d, txid %d; want a commit in [%d, %d], txid %d", i, res.Method, j, txid, before, after+1, res.Txid)
				}
			}
			close(stop)
			wg.Wait()
			if last.Load() < 10 {
				t.Errorf("the writer committed only %d times", last.Load())
			}
		})
	}
}

// TestCloneFileLive: CloneFile of a file another open holds for writing
// (flock locks conflict between two opens even in one process, so the DB
// opened here stands for another process) takes the lock-free path, while
// a writer commits without pause and reuses pages: the copy holds exactly
// the state after one commit, passes Check, and says it was taken live.
func TestCloneFileLive(t *testing.T) {
	for _, copyIt := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy=%t", copyIt), func(t *testing.T) {
			db := openTestDB(t, nil)
			fillClone(t, db.DB)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var last atomic.Uint64
			runCloneWriter(t, db.DB, 1, stop, &wg, &last)
			dir := t.TempDir()
			passes := 0
			for i := range 3 {
				time.Sleep(20 * time.Millisecond)
				before := last.Load()
				dst := filepath.Join(dir, fmt.Sprint(i))
				var progress int
				res, err := CloneFile(db.Path(), dst, &CloneOptions{Copy: copyIt, Progress: func(w, tot int64) error {
					progress++
					if w > tot {
						return fmt.Errorf("progress %d of %d", w, tot)
					}
					return nil
				}})
				after := last.Load()
				if err != nil {
					t.Fatal(err)
				}
				if !res.Live {
					t.Fatalf("CloneFile of a locked file did not take the live path: %+v", res)
				}
				if res.Method == CloneCopied && (progress == 0 || res.Passes < 1) {
					t.Errorf("live copy: %d progress calls, %d passes", progress, res.Passes)
				}
				passes += res.Passes
				j, txid := verifyClone(t, dst)
				t.Logf("%v in %d passes: commit %d (writer at %d..%d), %d bytes written", res.Method, res.Passes, j, before, after, res.Written)
				if j < before || j > after+1 || txid != res.Txid {
					t.Errorf("copy %d holds commit %d, txid %d; want a commit in [%d, %d], txid %d", i, j, txid, before, after+1, res.Txid)
				}
			}
			close(stop)
			wg.Wait()
			t.Logf("%d commits, %d passes", last.Load(), passes)
		})
	}
}

// TestCloneFileLiveReuse makes the writer reuse pages under a live copy
// at a set moment: halfway through the first pass, 300 commits rewrite a
// key each (every commit rewrites the root, the branch above the key and
// the leaf, and frees the old ones, which the following commits reuse).
// The first pass must then miss runs, and a later one, copying only what
// changed, must finish with the state of a commit after all 300 — not the
// state the first pass started from.
func TestCloneFileLiveReuse(t *testing.T) {
	// Without the journal: the commits under the copy write metas to the
	// file, which the copy follows (a journaled commit's state is in the
	// journal copied first, see cloneLive).
	db := openTestDB(t, &Options{NoJournal: true})
	fillClone(t, db.DB)
	reads := 0
	j := uint64(0)
	liveCopyTestHook = func(pass int) {
		if reads++; pass == 1 && reads == 60 {
			for range 300 {
				j++
				if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, j*7) }); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer func() { liveCopyTestHook = nil }()
	dst := filepath.Join(t.TempDir(), "dst")
	res, err := CloneFile(db.Path(), dst, &CloneOptions{Copy: true})
	if err != nil {
		t.Fatal(err)
	}
	liveCopyTestHook = nil
	t.Logf("%d passes, %d bytes written, %d runs read", res.Passes, res.Written, reads)
	if !res.Live || res.Passes < 2 {
		t.Errorf("want a live copy in several passes: %+v", res)
	}
	db2, err := Open(dst, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	mustCheck(t, db2)
	err = db2.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		if got := binary.BigEndian.Uint64(b.Get([]byte("n"))); got != j*7 {
			return fmt.Errorf("copy holds commit %d, want the last one, %d", got, j*7)
		}
		for i := uint64(1); i <= j; i++ {
			if got := b.Get(cloneKey(i * 7 % cloneKeys)); binary.BigEndian.Uint64(got) < i*7 {
				return fmt.Errorf("key %d holds commit %d, want %d or later", i*7%cloneKeys, binary.BigEndian.Uint64(got), i*7)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	// The later passes re-read what the 300 commits changed, not the file.
	if full := res.Size; res.Written > full+full/2 {
		t.Errorf("wrote %d bytes for a %d-byte state", res.Written, full)
	}
}

// TestCloneFileUnlocked: with no writer, CloneFile opens the file itself
// (not live) and copies its newest state; a missing file is ErrNotExist.
func TestCloneFileUnlocked(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	db, err := Open(src, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	fillClone(t, db)
	for j := uint64(1); j <= 5; j++ {
		if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, j) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, copyIt := range []bool{false, true} {
		dst := filepath.Join(dir, fmt.Sprint("dst-", copyIt))
		res, err := CloneFile(src, dst, &CloneOptions{Copy: copyIt, Mode: 0o640})
		if err != nil {
			t.Fatal(err)
		}
		if res.Live {
			t.Errorf("CloneFile of a closed file took the live path")
		}
		if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("copy %v, %v; want mode 0640", fi, err)
		}
		if j, _ := verifyClone(t, dst); j != 5 {
			t.Errorf("copy holds commit %d, want 5", j)
		}
	}
	if _, err := CloneFile(filepath.Join(dir, "missing"), filepath.Join(dir, "x"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CloneFile of a missing file: %v", err)
	}
}

// TestCloneFileLiveDamage: a live copy of a file whose state has a
// damaged page (that the writer's Open did not read) fails with ErrCorrupt
// once the metas stay the same, and leaves nothing behind.
func TestCloneFileLiveDamage(t *testing.T) {
	db := openTestDB(t, nil)
	fillClone(t, db.DB)
	// Pick a page the state reaches, away from the root.
	var victim uint64
	err := db.View(func(tx *Tx) error {
		img, err := tx.copyImage()
		if err != nil {
			return err
		}
		for p := tx.meta.HWM - 1; p > 2; p-- {
			if img.Reachable(p) && p != tx.meta.Root.ID {
				victim = p
				break
			}
		}
		return nil
	})
	if err != nil || victim == 0 {
		t.Fatal(err, victim)
	}
	path := db.Path()
	db.checkAndClose()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(os.Getpagesize())
	if _, err := f.WriteAt([]byte("damage"), int64(victim)*ps+ps/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	held, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dst := filepath.Join(t.TempDir(), "dst")
	_, err = CloneFile(path, dst, &CloneOptions{Copy: true})
	if !errors.Is(err, rerrors.ErrCorrupt) {
		t.Errorf("live copy of a damaged file: %v, want ErrCorrupt", err)
	}
	if _, serr := os.Stat(dst); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("the failed copy was left behind (%v)", serr)
	}
}

//go:build linux

package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/vfs"
	"golang.org/x/sys/unix"
)

// These tests fill a real file system (scripts/fulldisk-test.sh makes a
// 64 MiB ext4 loop mount and names it in RIVET_FULLDISK_DIR) and check that
// a full disk fails only the commits that need room: after space is freed
// the same handle commits again, nothing acknowledged is lost, and Check
// passes. They log which system call reported ENOSPC.

// maxFullDiskBytes bounds the file system these tests agree to fill: they
// must never fill a real disk by mistake.
const maxFullDiskBytes = 1 << 30

// fullDiskDir returns a fresh directory on the file system RIVET_FULLDISK_DIR
// names, or skips the test saying how to run it.
func fullDiskDir(t *testing.T) string {
	root := os.Getenv("RIVET_FULLDISK_DIR")
	if root == "" {
		t.Skip("RIVET_FULLDISK_DIR is not set: to run this test, point it at a small file system of its own " +
			"(it fills it), or run scripts/fulldisk-test.sh as root, which makes a 64 MiB ext4 loop mount for it")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		t.Fatalf("RIVET_FULLDISK_DIR=%s: %v", root, err)
	}
	if size := int64(st.Blocks) * st.Bsize; size > maxFullDiskBytes {
		t.Fatalf("RIVET_FULLDISK_DIR=%s is on a file system of %d MiB; this test fills it, so it takes one of at most %d MiB", root, size>>20, maxFullDiskBytes>>20)
	}
	dir, err := os.MkdirTemp(root, "fulldisk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// freeBytes returns the bytes an unprivileged writer may still use on the
// file system holding dir.
func freeBytes(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// enospcFS records, for each file operation, how often it was called and
// how often it failed with ENOSPC.
type enospcFS struct {
	vfs.FS
	mu     sync.Mutex
	calls  map[string]int
	enospc map[string]int
}

func newEnospcFS() *enospcFS {
	return &enospcFS{FS: vfs.OS(), calls: map[string]int{}, enospc: map[string]int{}}
}

func (e *enospcFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := e.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &enospcFile{File: f, fs: e}, nil
}

// note counts a call of op and its ENOSPC, and returns err.
func (e *enospcFS) note(op string, err error) error {
	e.mu.Lock()
	e.calls[op]++
	if errors.Is(err, syscall.ENOSPC) {
		e.enospc[op]++
	}
	e.mu.Unlock()
	return err
}

// reset starts counting afresh.
func (e *enospcFS) reset() {
	e.mu.Lock()
	clear(e.calls)
	clear(e.enospc)
	e.mu.Unlock()
}

// report says which calls were made and which returned ENOSPC.
func (e *enospcFS) report() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for _, op := range []string{"pwrite", "ftruncate", "fdatasync"} {
		parts = append(parts, fmt.Sprintf("%s %d calls, %d ENOSPC", op, e.calls[op], e.enospc[op]))
	}
	return strings.Join(parts, "; ")
}

// failed returns the operations that returned ENOSPC.
func (e *enospcFS) failed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ops []string
	for op, n := range e.enospc {
		if n > 0 {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

type enospcFile struct {
	vfs.File
	fs *enospcFS
}

func (f *enospcFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.note("pwrite", err)
}

func (f *enospcFile) Truncate(size int64) error {
	return f.fs.note("ftruncate", f.File.Truncate(size))
}

func (f *enospcFile) Sync(kind vfs.SyncKind) error {
	return f.fs.note("fdatasync", f.File.Sync(kind))
}

// diskModel is the keys a full-disk test committed: key -> value size.
// Values are diskValue(key, size), so they need not be kept.
type diskModel map[string]int

// diskValue is the value of key: size bytes naming the key.
func diskValue(key string, size int) []byte {
	s := []byte(key + ";")
	return bytes.Repeat(s, size/len(s)+1)[:size]
}

// putDisk commits key with a value of size bytes.
func putDisk(db *DB, key string, size int) error {
	return db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("disk"))
		if err != nil {
			return err
		}
		return b.Put([]byte(key), diskValue(key, size))
	})
}

// checkDisk fails unless db holds exactly the model and passes Check.
func checkDisk(t *testing.T, db *DB, want diskModel, when string) {
	t.Helper()
	err := db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte("disk"))
		n := 0
		if b != nil {
			err := b.ForEach(func(k, v []byte) error {
				size, ok := want[string(k)]
				if !ok {
					return fmt.Errorf("key %q was never acknowledged", k)
				}
				if !bytes.Equal(v, diskValue(string(k), size)) {
					return fmt.Errorf("key %q has the wrong value", k)
				}
				n++
				return nil
			})
			if err != nil {
				return err
			}
		}
		if n != len(want) {
			return fmt.Errorf("%d keys, want %d", n, len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	mustCheck(t, db)
}

// wantNoSpace fails unless err is a rolled-back commit on a full disk: it
// matches ENOSPC and the DB did not latch.
func wantNoSpace(t *testing.T, db *DB, err error, what string) {
	t.Helper()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%s: %v, want ENOSPC", what, err)
	}
	if errors.Is(err, rerrors.ErrLatched) || db.Stats().Latched {
		t.Fatalf("%s: the DB latched: %v (cause: %v)", what, err, db.latchedErr())
	}
}

// fillFile writes path until the file system is full (or limit bytes) and
// flushes it, returning the bytes written.
func fillFile(t *testing.T, path string, limit int64) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xA5}, 64<<10)
	var n int64
	for limit <= 0 || n < limit {
		w, err := f.Write(chunk)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// The file system may have taken more than it had (delayed
	// allocation): what the flush cannot place it reports here.
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	return n
}

// reopenDisk closes db, opens the file again and checks it holds want.
func reopenDisk(t *testing.T, db *DB, path string, want diskModel) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	rdb, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer rdb.Close()
	checkDisk(t, rdb, want, "after reopen")
}

// TestFullDiskCommitsUntilFull: one DB fills the file system with commits
// until one fails with ENOSPC; a filler file is deleted and the same handle
// commits again.
func TestFullDiskCommitsUntilFull(t *testing.T) {
	dir := fullDiskDir(t)
	filler := filepath.Join(dir, "filler")
	fillFile(t, filler, 8<<20)
	path := filepath.Join(dir, "db")
	fs := newEnospcFS()
	db, err := openFS(fs, path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := diskModel{}
	const size = 256 << 10
	var failErr error
	commits := 0
	for i := 0; i < 4*maxFullDiskBytes/size && failErr == nil; i++ {
		key := fmt.Sprintf("c%05d", i)
		if err := putDisk(db, key, size); err != nil {
			failErr = err
			break
		}
		want[key] = size
		commits++
	}
	wantNoSpace(t, db, failErr, "the commit that found the disk full")
	st, _ := os.Stat(path)
	t.Logf("scenario 1: %d commits of %d KiB, then ENOSPC (%s); file %d MiB, %d KiB free", commits, size>>10, fs.report(), st.Size()>>20, freeBytes(t, dir)>>10)
	t.Logf("scenario 1: the failing commit's error: %v", failErr)
	checkDisk(t, db, want, "while the disk is full")
	if err := putDisk(db, "again", size); err == nil {
		want["again"] = size
		t.Logf("scenario 1: a second commit on the full disk succeeded")
	} else {
		wantNoSpace(t, db, err, "a second commit on the full disk")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	fs.reset()
	after := 0
	for i := 0; i < 8; i++ {
		key := fmt.Sprintf("after%02d", i)
		if err := putDisk(db, key, size); err != nil {
			t.Fatalf("commit %d on the same handle after the filler was deleted: %v", i, err)
		}
		want[key] = size
		after++
	}
	t.Logf("scenario 1: after deleting the 8 MiB filler, the same handle made %d more commits (%s)", after, fs.report())
	checkDisk(t, db, want, "after space was freed")
	reopenDisk(t, db, path, want)
	t.Logf("scenario 1: reopened: all %d acknowledged keys, Check passes", len(want))
}

// TestFullDiskWhileGrowing: the disk is full when a commit needs the file
// to grow. ftruncate only sets the size of a sparse file, so it succeeds;
// the log says which call reported ENOSPC.
func TestFullDiskWhileGrowing(t *testing.T) {
	dir := fullDiskDir(t)
	path := filepath.Join(dir, "db")
	fs := newEnospcFS()
	db, err := openFS(fs, path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := diskModel{}
	for i := 0; i < 8; i++ {
		key := fmt.Sprintf("base%02d", i)
		if err := putDisk(db, key, 128<<10); err != nil {
			t.Fatal(err)
		}
		want[key] = 128 << 10
	}
	filler := filepath.Join(dir, "filler")
	filled := fillFile(t, filler, 0)
	st, _ := os.Stat(path)
	before := st.Size()
	fs.reset()
	const big = 4 << 20
	err = putDisk(db, "big", big)
	wantNoSpace(t, db, err, "a commit that grows the file on a full disk")
	st, _ = os.Stat(path)
	t.Logf("scenario 2: filler %d MiB; a %d MiB commit on the full disk failed (%s); file %d KiB before, %d KiB after",
		filled>>20, big>>20, fs.report(), before>>10, st.Size()>>10)
	t.Logf("scenario 2: ENOSPC came from %v", fs.failed())
	checkDisk(t, db, want, "after the failed growth")

	if err := os.Truncate(filler, max(filled-16<<20, 0)); err != nil {
		t.Fatal(err)
	}
	fs.reset()
	if err := putDisk(db, "big", big); err != nil {
		t.Fatalf("the same commit after 16 MiB were freed: %v", err)
	}
	want["big"] = big
	t.Logf("scenario 2: after freeing 16 MiB the same handle committed it (%s)", fs.report())
	checkDisk(t, db, want, "after space was freed")
	reopenDisk(t, db, path, want)
	t.Logf("scenario 2: reopened: all %d acknowledged keys, Check passes", len(want))
}

// fillProcessEnv names the file TestFillDiskProcess fills, when it runs as
// the other process of TestFullDiskFilledByAnotherProcess.
const fillProcessEnv = "RIVET_FULLDISK_FILL"

// TestFillDiskProcess is not a test: TestFullDiskFilledByAnotherProcess runs
// the test binary again with only this, as another process that fills the
// file system.
func TestFillDiskProcess(t *testing.T) {
	path := os.Getenv(fillProcessEnv)
	if path == "" {
		t.Skip("the filling process of TestFullDiskFilledByAnotherProcess; runs only when that test starts it")
	}
	fmt.Printf("filled %d bytes\n", fillFile(t, path, 0))
}

// TestFullDiskFilledByAnotherProcess: another process fills the disk while
// the DB is idle; the DB's next commits fail, and succeed again once that
// process's file is deleted.
func TestFullDiskFilledByAnotherProcess(t *testing.T) {
	dir := fullDiskDir(t)
	path := filepath.Join(dir, "db")
	fs := newEnospcFS()
	db, err := openFS(fs, path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := diskModel{}
	for i := 0; i < 16; i++ {
		key := fmt.Sprintf("base%02d", i)
		if err := putDisk(db, key, 64<<10); err != nil {
			t.Fatal(err)
		}
		want[key] = 64 << 10
	}
	filler := filepath.Join(dir, "other-process-data")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFillDiskProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fillProcessEnv+"="+filler)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the filling process: %v\n%s", err, out)
	}
	t.Logf("scenario 3: another process (pid %d) wrote %s; %d KiB free", cmd.ProcessState.Pid(), strings.TrimSpace(strings.Split(string(out), "\n")[0]), freeBytes(t, dir)>>10)

	// Commits of growing size until one needs room the disk does not have.
	fs.reset()
	ok, failed := 0, 0
	var lastErr error
	for i := 0; i < 64 && failed < 3; i++ {
		key := fmt.Sprintf("full%02d", i)
		size := 4 << 10 << min(i, 10)
		err := putDisk(db, key, size)
		if err != nil {
			wantNoSpace(t, db, err, "a commit on the disk another process filled")
			failed++
			lastErr = err
			continue
		}
		want[key] = size
		ok++
	}
	if failed == 0 {
		t.Fatalf("no commit failed on the full disk (%s)", fs.report())
	}
	t.Logf("scenario 3: on the full disk %d commits succeeded (reusing pages the file had), %d failed (%s)", ok, failed, fs.report())
	t.Logf("scenario 3: last error: %v", lastErr)
	checkDisk(t, db, want, "while the disk is full")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	fs.reset()
	for i := 0; i < 8; i++ {
		key := fmt.Sprintf("after%02d", i)
		if err := putDisk(db, key, 1<<20); err != nil {
			t.Fatalf("commit %d after the other process's file was deleted: %v", i, err)
		}
		want[key] = 1 << 20
	}
	t.Logf("scenario 3: after deleting the other process's file the same handle made 8 commits of 1 MiB (%s)", fs.report())
	checkDisk(t, db, want, "after space was freed")
	reopenDisk(t, db, path, want)
	t.Logf("scenario 3: reopened: all %d acknowledged keys, Check passes", len(want))
}

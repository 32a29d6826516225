//go:build linux && (amd64 || arm64)

package rivet

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reflinkDir returns the directory named by RIVET_BTRFS_DIR, which must be
// on a file system that clones (btrfs, or XFS made with reflink=1), or
// skips the test saying how to run it.
func reflinkDir(t *testing.T) string {
	dir := os.Getenv("RIVET_BTRFS_DIR")
	if dir == "" {
		t.Skip("RIVET_BTRFS_DIR is not set: to run this test, point it at a directory on btrfs (or XFS with reflink), " +
			"or run scripts/btrfs-clone-test.sh as root, which makes a btrfs loop mount for it")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("RIVET_BTRFS_DIR=%s: %v", dir, err)
	}
	if st.Type != unix.BTRFS_SUPER_MAGIC && st.Type != unix.XFS_SUPER_MAGIC {
		t.Fatalf("RIVET_BTRFS_DIR=%s is on a file system of type %#x, not btrfs or XFS", dir, st.Type)
	}
	return dir
}

// reflinkTestDir makes a fresh directory under RIVET_BTRFS_DIR, removed
// when the test ends.
func reflinkTestDir(t *testing.T) string {
	dir, err := os.MkdirTemp(reflinkDir(t), "rivet-clone-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fiemap ioctl (linux/fiemap.h): a 32-byte header followed by 56-byte
// extents. The request number is _IOWR('f', 11, struct fiemap) as amd64
// and arm64 encode it.
const (
	fsIocFiemap        = 0xC020660B
	fiemapFlagSync     = 0x1
	fiemapExtentLast   = 0x1
	fiemapExtentShared = 0x2000
	fiemapBatch        = 256
)

// sharedBytes returns how many bytes of path's extents the file system
// reports as shared with another file (FIEMAP_EXTENT_SHARED), and how many
// bytes its extents hold in all (holes excluded). A copy written with
// write(2) never has shared extents; a reflink has nothing else.
func sharedBytes(t *testing.T, path string) (shared, mapped int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	words := make([]uint64, (32+56*fiemapBatch)/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	le := binary.LittleEndian
	start := uint64(0)
	for {
		clear(buf)
		le.PutUint64(buf[0:], start)
		le.PutUint64(buf[8:], ^uint64(0)-start)
		le.PutUint32(buf[16:], fiemapFlagSync)
		le.PutUint32(buf[24:], fiemapBatch)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
			t.Fatalf("FIEMAP %s: %v", path, errno)
		}
		n := int(le.Uint32(buf[20:]))
		if n == 0 {
			return
		}
		last := false
		for i := range n {
			e := buf[32+56*i:]
			logical, length, flags := le.Uint64(e[0:]), le.Uint64(e[16:]), le.Uint32(e[40:])
			mapped += int64(length)
			if flags&fiemapExtentShared != 0 {
				shared += int64(length)
			}
			start = logical + length
			last = last || flags&fiemapExtentLast != 0
		}
		if last {
			return
		}
	}
}

// fillTo grows db with padding values until its state is about size
// bytes, in commits of about 2 MiB.
func fillTo(t *testing.T, db *DB, size int64) {
	t.Helper()
	val := make([]byte, 1000)
	for i := 0; ; {
		var full bool
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("pad"))
			if err != nil {
				return err
			}
			for range 2000 {
				binary.BigEndian.PutUint64(val, uint64(i))
				if err := b.Put([]byte(fmt.Sprintf("pad%09d", i)), val); err != nil {
					return err
				}
				i++
			}
			full = tx.Size() >= size
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if full {
			return
		}
	}
}

// cloneTestSize is the size of the btrfs test's database: 64 MiB, or
// RIVET_CLONE_MIB MiB (the measurements in docs/design.md §3.5 used 512).
func cloneTestSize(t *testing.T) int64 {
	if s := os.Getenv("RIVET_CLONE_MIB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("RIVET_CLONE_MIB=%q", s)
		}
		return int64(n) << 20
	}
	return 64 << 20
}

// TestCloneReflinkBtrfs runs on btrfs (RIVET_BTRFS_DIR): DB.Clone of a
// 64 MiB database must clone with FICLONE, write nothing, and give a file
// whose extents the file system reports as shared (FIEMAP) — which no
// copy can show — and which opens at the state committed before the call
// and passes Check. Beside it, the times of the clone and of a copy (on
// the same file system and on the OS temp dir) are logged.
func TestCloneReflinkBtrfs(t *testing.T) {
	dir := reflinkTestDir(t)
	size := cloneTestSize(t)
	src := filepath.Join(dir, "src.db")
	db, err := Open(src, 0o600, &Options{Durability: None})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillClone(t, db)
	fillTo(t, db, size)
	for j := uint64(1); j <= 20; j++ {
		if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, j) }); err != nil {
			t.Fatal(err)
		}
	}
	// Clone flushes what None mode left unflushed before it clones; the
	// flush of tens of MiB is not the clone's cost, so it is made first.
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "clone.db")
	start := time.Now()
	res, err := db.Clone(dst, nil)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// Later commits must not reach the clone.
	if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, 21) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("clone of %d MiB: %v, %s (%+v)", res.Size>>20, res.Method, took, res)
	if res.Method != CloneReflinked || res.Call != "FICLONE" || res.Written != 0 || res.Fallback != "" {
		t.Fatalf("want a FICLONE clone that wrote nothing, got %+v", res)
	}
	shared, mapped := sharedBytes(t, dst)
	t.Logf("clone: %d of %d mapped bytes shared (file %d bytes)", shared, mapped, res.Size)
	if mapped < size/2 || shared != mapped {
		t.Errorf("clone's extents: %d bytes of %d shared, want all of them, and at least %d mapped", shared, mapped, size/2)
	}
	if j, txid := verifyClone(t, dst); j != 20 || txid != res.Txid {
		t.Errorf("clone holds commit %d at txid %d, want commit 20 at txid %d", j, txid, res.Txid)
	}
	// Commit 21 is in no meta yet (None mode): a clone must make it
	// durable first, and then hold it.
	dst2 := filepath.Join(dir, "clone2.db")
	res2, err := db.Clone(dst2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error { return cloneWrite(tx, 22) }); err != nil {
		t.Fatal(err)
	}
	if j, txid := verifyClone(t, dst2); res2.Method != CloneReflinked || j != 21 || txid != res2.Txid {
		t.Errorf("second clone (%v) holds commit %d at txid %d, want commit 21 at txid %d", res2.Method, j, txid, res2.Txid)
	}

	// For comparison: the copy Clone falls back to, on btrfs and on the
	// OS temp dir.
	for _, d := range []string{dir, t.TempDir()} {
		out := filepath.Join(d, "copy.db")
		start := time.Now()
		cres, err := db.Clone(out, &CloneOptions{Copy: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("copy of %d MiB to %s: %s", cres.Size>>20, d, time.Since(start))
		if shared, _ := sharedBytes(t, out); shared != 0 && d == dir {
			t.Errorf("a copy shares %d bytes: the shared-extent check cannot tell a copy from a clone", shared)
		}
		os.Remove(out)
	}
}

// TestCloneFileLiveBtrfs runs on btrfs (RIVET_BTRFS_DIR): CloneFile of a
// file another open holds for writing, while a writer commits without
// pause, clones the live file with FICLONE; the clone, recovered once,
// holds the state after one of the writer's commits, passes Check, and
// still shares nearly all its extents with the source.
func TestCloneFileLiveBtrfs(t *testing.T) {
	dir := reflinkTestDir(t)
	src := filepath.Join(dir, "src.db")
	db, err := Open(src, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillClone(t, db)
	fillTo(t, db, 16<<20)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var last atomic.Uint64
	runCloneWriter(t, db, 1, stop, &wg, &last)
	defer func() { close(stop); wg.Wait() }()
	for i := range 3 {
		time.Sleep(30 * time.Millisecond)
		before := last.Load()
		dst := filepath.Join(dir, fmt.Sprint("live-", i))
		start := time.Now()
		res, err := CloneFile(src, dst, nil)
		took := time.Since(start)
		after := last.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Live || res.Method != CloneReflinked || res.Call != "FICLONE" {
			t.Fatalf("want a FICLONE clone of the live file, got %+v", res)
		}
		shared, mapped := sharedBytes(t, dst)
		j, txid := verifyClone(t, dst)
		t.Logf("live clone in %s: commit %d (writer at %d..%d), %d of %d bytes shared", took, j, before, after, shared, mapped)
		if j < before || j > after+1 || txid != res.Txid {
			t.Errorf("clone holds commit %d, txid %d; want a commit in [%d, %d], txid %d", j, txid, before, after+1, res.Txid)
		}
		if shared < mapped*9/10 {
			t.Errorf("only %d of %d bytes of the clone are shared", shared, mapped)
		}
	}
}

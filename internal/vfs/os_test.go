package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestOSMapBeyondSize maps far more than the file holds, as the pager does to
// reserve address space, and checks that the reserve fills in as the file
// grows. Windows cuts the view to the file size instead (documented on
// File.Map), which the second half checks.
func TestOSMapBeyondSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	f := mustOpen(t, OS(), path, rwCreate)
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 4096), 0); err != nil {
		t.Fatal(err)
	}
	const reserve = 64 << 20
	m, err := f.Map(reserve)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Bytes()
	if runtime.GOOS == "windows" {
		if len(b) != 4096 {
			t.Fatalf("Windows view length %d, want the file size 4096", len(b))
		}
		return
	}
	if len(b) != reserve {
		t.Fatalf("view length %d, want %d", len(b), reserve)
	}
	if b[0] != 1 || b[4095] != 1 {
		t.Fatal("existing bytes not visible through the mapping")
	}
	// Grow the file, then write into the grown part: both must show through
	// the mapping made when the file was one page long.
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	msg := []byte("past the old end")
	if _, err := f.WriteAt(msg, 512<<10); err != nil {
		t.Fatal(err)
	}
	if got := b[512<<10 : 512<<10+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("mapping shows %q, want %q", got, msg)
	}
	if b[(1<<20)-1] != 0 {
		t.Fatal("grown part of the file is not zero through the mapping")
	}
}

// TestOSLockAcrossProcesses checks that the lock also keeps another process
// out, by re-running the test binary as a child that tries to lock.
func TestOSLockAcrossProcesses(t *testing.T) {
	if path := os.Getenv("RIVET_VFS_LOCK_CHILD"); path != "" {
		f, err := OS().OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(3)
		}
		err = f.TryLock(os.Getenv("RIVET_VFS_LOCK_EXCL") == "1")
		switch {
		case errors.Is(err, ErrLocked):
			os.Exit(1)
		case err != nil:
			fmt.Println("lock:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	path := filepath.Join(t.TempDir(), "db")
	f := mustOpen(t, OS(), path, rwCreate)
	defer f.Close()

	child := func(exclusive bool) int {
		cmd := exec.Command(exe, "-test.run=^TestOSLockAcrossProcesses$")
		excl := "0"
		if exclusive {
			excl = "1"
		}
		cmd.Env = append(os.Environ(), "RIVET_VFS_LOCK_CHILD="+path, "RIVET_VFS_LOCK_EXCL="+excl)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee) && ee.ExitCode() == 1:
			return 1
		}
		t.Fatalf("child: %v\n%s", err, out)
		return -1
	}

	if err := f.TryLock(true); err != nil {
		t.Fatal(err)
	}
	if got := child(false); got != 1 {
		t.Fatalf("child took a shared lock while we hold an exclusive one (exit %d)", got)
	}
	if err := f.TryLock(false); err != nil {
		t.Fatal(err)
	}
	if got := child(false); got != 0 {
		t.Fatalf("child could not share a shared lock (exit %d)", got)
	}
	if got := child(true); got != 1 {
		t.Fatalf("child took an exclusive lock while we hold a shared one (exit %d)", got)
	}
	if err := f.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got := child(true); got != 0 {
		t.Fatalf("child could not lock an unlocked file (exit %d)", got)
	}
}

func TestOSSyncAfterWriteAndTruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	f := mustOpen(t, OS(), path, rwCreate)
	if _, err := f.WriteAt([]byte("durable"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	for _, k := range []SyncKind{SyncData, SyncBarrier} {
		if err := f.Sync(k); err != nil {
			t.Fatalf("Sync(%d): %v", k, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8192 || string(got[:7]) != "durable" {
		t.Fatalf("file holds %d bytes starting %q", len(got), got[:7])
	}
}

func TestOSWithOpener(t *testing.T) {
	if OSWithOpener("db", nil) != OS() {
		t.Fatal("OSWithOpener(nil) is not OS()")
	}
	calls := 0
	path := filepath.Join(t.TempDir(), "db")
	fs := OSWithOpener(path, func(name string, flag int, perm os.FileMode) (*os.File, error) {
		calls++
		return os.OpenFile(name, flag, perm)
	})
	// Comparing with OS() must not panic and must be false.
	if fs == OS() {
		t.Fatal("an opener FS compares equal to OS()")
	}
	f := mustOpen(t, fs, path, rwCreate)
	if calls != 1 {
		t.Fatalf("opener called %d times", calls)
	}
	// Files beside the database open as OS files: the opener is the
	// database file's (etcd's returns one prepared file for any name).
	side := mustOpen(t, fs, path+"-journal-0", rwCreate)
	side.Close()
	if calls != 1 {
		t.Fatalf("opener called %d times for the database file and one beside it", calls)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.TryLock(true); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fs.Remove(path); err != nil {
		t.Fatal(err)
	}
	bad := OSWithOpener(path, func(string, int, os.FileMode) (*os.File, error) { return nil, nil })
	if _, err := bad.OpenFile(path, rwCreate, 0o600); err == nil {
		t.Fatal("an opener returning no file and no error was accepted")
	}
}

// TestWaitWriteback: the OS file writes its dirty pages back on request
// where the platform can, and the data reads back unchanged.
func TestWaitWriteback(t *testing.T) {
	f, err := OS().OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("rivet"), 100000)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	w, ok := f.(WritebackWaiter)
	if !ok {
		t.Fatal("the OS file does not implement WritebackWaiter")
	}
	err = w.WaitWriteback(0, 0)
	if runtime.GOOS == "linux" && err != nil {
		t.Fatalf("WaitWriteback: %v", err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back after WaitWriteback: %v", err)
	}
}

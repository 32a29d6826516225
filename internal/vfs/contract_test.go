package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fsCase is one FS implementation under the shared contract tests. path
// turns a base name into the name to open.
type fsCase struct {
	name string
	fs   func(t *testing.T) (FS, func(string) string)
}

func allFS() []fsCase {
	inMem := func(fs FS) func(t *testing.T) (FS, func(string) string) {
		return func(t *testing.T) (FS, func(string) string) {
			return fs, func(s string) string { return s }
		}
	}
	return []fsCase{
		{"OS", func(t *testing.T) (FS, func(string) string) {
			dir := t.TempDir()
			return OS(), func(s string) string { return filepath.Join(dir, s) }
		}},
		{"Mem", func(t *testing.T) (FS, func(string) string) { return inMem(NewMem())(t) }},
		{"Crashable", func(t *testing.T) (FS, func(string) string) { return inMem(NewCrashable())(t) }},
		{"Counting", func(t *testing.T) (FS, func(string) string) { return inMem(NewCounting(NewMem()))(t) }},
		{"Faulty", func(t *testing.T) (FS, func(string) string) { return inMem(NewFaulty(NewMem()))(t) }},
	}
}

func forEachFS(t *testing.T, fn func(t *testing.T, fs FS, path func(string) string)) {
	for _, c := range allFS() {
		t.Run(c.name, func(t *testing.T) {
			fs, path := c.fs(t)
			fn(t, fs, path)
		})
	}
}

func mustOpen(t *testing.T, fs FS, name string, flag int) File {
	t.Helper()
	f, err := fs.OpenFile(name, flag, 0o600)
	if err != nil {
		t.Fatalf("OpenFile(%q): %v", name, err)
	}
	return f
}

const rwCreate = os.O_RDWR | os.O_CREATE

func TestContractReadWrite(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		defer f.Close()
		if got := f.Name(); got != path("a") {
			t.Errorf("Name() = %q, want %q", got, path("a"))
		}
		if n, err := f.WriteAt([]byte("hello"), 10); n != 5 || err != nil {
			t.Fatalf("WriteAt = %d, %v", n, err)
		}
		if size, err := f.Size(); size != 15 || err != nil {
			t.Fatalf("Size = %d, %v; want 15", size, err)
		}
		buf := make([]byte, 15)
		if n, err := f.ReadAt(buf, 0); n != 15 || err != nil {
			t.Fatalf("ReadAt = %d, %v", n, err)
		}
		if want := append(make([]byte, 10), "hello"...); !bytes.Equal(buf, want) {
			t.Fatalf("contents %q, want %q (the gap before an extending write reads as zeros)", buf, want)
		}

		// A read that runs past the end returns what is there and io.EOF.
		buf = make([]byte, 8)
		n, err := f.ReadAt(buf, 12)
		if n != 3 || err != io.EOF || string(buf[:3]) != "llo" {
			t.Fatalf("ReadAt across EOF = %d, %v, %q; want 3, io.EOF, \"llo\"", n, err, buf[:n])
		}
		if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
			t.Fatalf("ReadAt past EOF = %d, %v; want 0, io.EOF", n, err)
		}
		if _, err := f.ReadAt(buf, -1); err == nil {
			t.Fatal("ReadAt at a negative offset succeeded")
		}
		if _, err := f.WriteAt(buf, -1); err == nil {
			t.Fatal("WriteAt at a negative offset succeeded")
		}
	})
}

func TestContractTruncate(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		defer f.Close()
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xAA}, 100), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(40); err != nil {
			t.Fatal(err)
		}
		if size, _ := f.Size(); size != 40 {
			t.Fatalf("size after shrink = %d, want 40", size)
		}
		// Growing again must expose zeros, not the bytes cut off before.
		if err := f.Truncate(100); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		want := append(bytes.Repeat([]byte{0xAA}, 40), make([]byte, 60)...)
		if !bytes.Equal(buf, want) {
			t.Fatalf("after shrink and grow: % x", buf)
		}
		if err := f.Truncate(-1); err == nil {
			t.Fatal("Truncate(-1) succeeded")
		}
	})
}

func TestContractOpenFlags(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		if _, err := fs.OpenFile(path("missing"), os.O_RDWR, 0); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("open missing file: %v, want os.ErrNotExist", err)
		}
		f := mustOpen(t, fs, path("a"), rwCreate|os.O_EXCL)
		if _, err := f.WriteAt([]byte("data"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.OpenFile(path("a"), rwCreate|os.O_EXCL, 0o600); !errors.Is(err, os.ErrExist) {
			t.Fatalf("O_EXCL on an existing file: %v, want os.ErrExist", err)
		}

		ro := mustOpen(t, fs, path("a"), os.O_RDONLY)
		if _, err := ro.WriteAt([]byte("x"), 0); err == nil {
			t.Fatal("WriteAt on a read-only file succeeded")
		}
		buf := make([]byte, 4)
		if _, err := ro.ReadAt(buf, 0); err != nil || string(buf) != "data" {
			t.Fatalf("read back %q, %v", buf, err)
		}
		ro.Close()

		tr := mustOpen(t, fs, path("a"), os.O_RDWR|os.O_TRUNC)
		if size, _ := tr.Size(); size != 0 {
			t.Fatalf("size after O_TRUNC = %d", size)
		}
		tr.Close()

		if err := fs.Remove(path("a")); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.OpenFile(path("a"), os.O_RDWR, 0); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("open after Remove: %v, want os.ErrNotExist", err)
		}
		if err := fs.Remove(path("a")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("second Remove: %v, want os.ErrNotExist", err)
		}
	})
}

func TestContractClosed(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("second Close: %v, want os.ErrClosed", err)
		}
		if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("WriteAt after Close: %v", err)
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("ReadAt after Close: %v", err)
		}
		if err := f.Sync(SyncData); err == nil {
			t.Error("Sync after Close succeeded")
		}
	})
}

func TestContractSyncKinds(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		defer f.Close()
		if _, err := f.WriteAt([]byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		for _, k := range []SyncKind{SyncData, SyncBarrier, SyncKind(99)} {
			if err := f.Sync(k); err != nil {
				t.Errorf("Sync(%d): %v", k, err)
			}
		}
	})
}

func TestContractLocks(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		a := mustOpen(t, fs, path("db"), rwCreate)
		defer a.Close()
		b := mustOpen(t, fs, path("db"), os.O_RDWR)
		defer b.Close()

		// Exclusive conflicts with every other holder.
		if err := a.TryLock(true); err != nil {
			t.Fatalf("first exclusive lock: %v", err)
		}
		if err := b.TryLock(true); !errors.Is(err, ErrLocked) {
			t.Fatalf("second exclusive lock: %v, want ErrLocked", err)
		}
		if err := b.TryLock(false); !errors.Is(err, ErrLocked) {
			t.Fatalf("shared lock under an exclusive one: %v, want ErrLocked", err)
		}
		if err := a.Unlock(); err != nil {
			t.Fatal(err)
		}

		// Shared locks coexist and keep an exclusive one out.
		if err := a.TryLock(false); err != nil {
			t.Fatal(err)
		}
		if err := b.TryLock(false); err != nil {
			t.Fatalf("second shared lock: %v", err)
		}
		c := mustOpen(t, fs, path("db"), os.O_RDWR)
		defer c.Close()
		if err := c.TryLock(true); !errors.Is(err, ErrLocked) {
			t.Fatalf("exclusive under shared: %v, want ErrLocked", err)
		}
		// Both shared holders must go before an exclusive lock is possible;
		// closing a file drops its lock.
		if err := a.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := c.TryLock(true); !errors.Is(err, ErrLocked) {
			t.Fatalf("exclusive with one shared holder left: %v, want ErrLocked", err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.TryLock(true); err != nil {
			t.Fatalf("exclusive once every holder left: %v", err)
		}
		if err := c.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestContractLockConversion(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		a := mustOpen(t, fs, path("db"), rwCreate)
		defer a.Close()
		b := mustOpen(t, fs, path("db"), os.O_RDWR)
		defer b.Close()
		if err := a.TryLock(false); err != nil {
			t.Fatal(err)
		}
		// The only holder can upgrade its own lock.
		if err := a.TryLock(true); err != nil {
			t.Fatalf("upgrade by the only holder: %v", err)
		}
		if err := b.TryLock(false); !errors.Is(err, ErrLocked) {
			t.Fatalf("shared lock after upgrade: %v, want ErrLocked", err)
		}
		// And downgrade it, letting another shared holder in.
		if err := a.TryLock(false); err != nil {
			t.Fatalf("downgrade: %v", err)
		}
		if err := b.TryLock(false); err != nil {
			t.Fatalf("shared lock after downgrade: %v", err)
		}
	})
}

func TestContractMapSeesLaterWrites(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		defer f.Close()
		const size = 3 * 4096
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(size)
		if err != nil {
			t.Fatal(err)
		}
		b := m.Bytes()
		if len(b) != size {
			t.Fatalf("len(Bytes()) = %d, want %d", len(b), size)
		}
		if !bytes.Equal(b, make([]byte, size)) {
			t.Fatal("mapping of a zero-filled file is not zero")
		}
		msg := []byte("written after Map")
		if _, err := f.WriteAt(msg, 5000); err != nil {
			t.Fatal(err)
		}
		if got := b[5000 : 5000+len(msg)]; !bytes.Equal(got, msg) {
			t.Fatalf("mapping shows %q after WriteAt, want %q", got, msg)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if m.Bytes() != nil {
			t.Error("Bytes() after Close is not nil")
		}
		if err := m.Close(); err != nil {
			t.Errorf("second mapping Close: %v", err)
		}
		if _, err := f.Map(-1); err == nil {
			t.Error("Map(-1) succeeded")
		}
		m0, err := f.Map(0)
		if err != nil || len(m0.Bytes()) != 0 {
			t.Fatalf("Map(0) = %v, %v", m0, err)
		}
		m0.Close()
	})
}

// TestContractMapOutlivesClose checks that a mapping stays readable after its
// file is closed, which the pager relies on when a DB closes under readers.
func TestContractMapOutlivesClose(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		if _, err := f.WriteAt(bytes.Repeat([]byte{7}, 4096), 0); err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Bytes(), bytes.Repeat([]byte{7}, 4096)) {
			t.Fatal("mapping changed after the file was closed")
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestContractConcurrent runs readers, a mapping reader and a writer on
// disjoint ranges at once; under -race it checks the implementations'
// synchronisation.
func TestContractConcurrent(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		f := mustOpen(t, fs, path("a"), rwCreate)
		defer f.Close()
		const page = 4096
		const pages = 64
		if err := f.Truncate(pages * page); err != nil {
			t.Fatal(err)
		}
		m, err := f.Map(pages * page)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		// Pages [0, 32) are written once up front and then only read.
		fixed := bytes.Repeat([]byte{0x5A}, 32*page)
		if _, err := f.WriteAt(fixed, 0); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for r := 0; r < 4; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, page)
				for i := 0; i < 200; i++ {
					off := int64(i%32) * page
					if _, err := f.ReadAt(buf, off); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(buf, fixed[:page]) || !bytes.Equal(m.Bytes()[off:off+page], fixed[:page]) {
						errs <- errors.New("read changed bytes")
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bytes.Repeat([]byte{1}, page)
			for i := 0; i < 200; i++ {
				if _, err := f.WriteAt(buf, int64(32+i%32)*page); err != nil {
					errs <- err
					return
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

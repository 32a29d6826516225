package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestContractDirOps runs the directory operations on every FS: Rename
// replaces its target, Link refuses an existing name and gives two names
// to one file, SameFile tells files apart by identity, not by contents.
func TestContractDirOps(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, path func(string) string) {
		a := mustOpen(t, fs, path("a"), rwCreate)
		defer a.Close()
		if _, err := a.WriteAt([]byte("aaaa"), 0); err != nil {
			t.Fatal(err)
		}
		b := mustOpen(t, fs, path("b"), rwCreate)
		if _, err := b.WriteAt([]byte("aaaa"), 0); err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
		if same, err := fs.SameFile(a, path("a")); err != nil || !same {
			t.Fatalf("SameFile(a, a) = %t, %v", same, err)
		}
		if same, err := fs.SameFile(a, path("b")); err != nil || same {
			t.Fatalf("SameFile(a, b) with equal bytes = %t, %v; want false", same, err)
		}
		if same, err := fs.SameFile(a, path("missing")); err != nil || same {
			t.Fatalf("SameFile(a, missing) = %t, %v; want false, nil", same, err)
		}
		if err := fs.Link(path("a"), path("b")); !errors.Is(err, os.ErrExist) {
			t.Fatalf("Link over an existing name: %v, want ErrExist", err)
		}
		if err := fs.Link(path("a"), path("c")); err != nil {
			t.Fatal(err)
		}
		if same, err := fs.SameFile(a, path("c")); err != nil || !same {
			t.Fatalf("SameFile(a, link of a) = %t, %v", same, err)
		}
		if err := fs.Rename(path("c"), path("b")); err != nil {
			t.Fatal(err)
		}
		if same, err := fs.SameFile(a, path("b")); err != nil || !same {
			t.Fatalf("after renaming the link over b: SameFile(a, b) = %t, %v", same, err)
		}
		if _, err := fs.OpenFile(path("c"), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("renamed-away name still opens: %v", err)
		}
		if err := fs.Rename(path("missing"), path("d")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Rename of a missing name: %v", err)
		}
		if err := fs.SyncDir(filepath.Dir(path("a"))); err != nil {
			t.Fatalf("SyncDir: %v", err)
		}
	})
}

func TestOSFreeSpace(t *testing.T) {
	n, err := OS().FreeSpace(t.TempDir())
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("free space not known on this platform")
	}
	if err != nil || n <= 0 {
		t.Fatalf("FreeSpace = %d, %v", n, err)
	}
}

func TestMemFreeSpace(t *testing.T) {
	fs := NewMem()
	if _, err := fs.FreeSpace("."); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("default FreeSpace: %v, want ErrUnsupported", err)
	}
	fs.SetFreeSpace(12345)
	if n, err := NewCounting(fs).FreeSpace("."); err != nil || n != 12345 {
		t.Fatalf("FreeSpace = %d, %v", n, err)
	}
}

// durableFile creates name with contents, flushed, with its name flushed.
func durableFile(t *testing.T, fs *CrashFS, name, contents string) File {
	t.Helper()
	f := mustCreate(t, fs, name)
	if _, err := f.WriteAt([]byte(contents), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	return f
}

// crashDirs returns every directory a crash may leave: each prefix of the
// pending directory operations kept, files at their durable bytes.
func crashDirs(fs *CrashFS) []*CrashFS {
	var out []*CrashFS
	for k := 0; k <= fs.CrashDirOps(); k++ {
		out = append(out, fs.CrashKeeping(k, nil, CrashOptions{}))
	}
	return out
}

// TestCrashDirOpsNeedSyncDir: a creation, rename, link or removal not
// followed by SyncDir may be lost; a crash keeps a prefix of them in order
// and never a half-done rename; after SyncDir they survive every crash.
func TestCrashDirOpsNeedSyncDir(t *testing.T) {
	fs := NewCrashable()
	durableFile(t, fs, "old", "old bytes")
	tmp := mustOpen(t, fs, "tmp", rwCreate)
	if _, err := tmp.WriteAt([]byte("new bytes"), 0); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	if err := fs.Link("old", "backup"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename("tmp", "old"); err != nil {
		t.Fatal(err)
	}
	if n := fs.CrashDirOps(); n != 3 {
		t.Fatalf("%d pending directory operations, want 3 (create, link, rename)", n)
	}
	// Prefixes: nothing; tmp created; backup linked; the rename.
	want := []map[string]string{
		{"old": "old bytes"},
		{"old": "old bytes", "tmp": "new bytes"},
		{"old": "old bytes", "tmp": "new bytes", "backup": "old bytes"},
		{"old": "new bytes", "backup": "old bytes"},
	}
	for k, c := range crashDirs(fs) {
		for _, name := range []string{"old", "tmp", "backup"} {
			got, err := c.ReadFile(name)
			w, ok := want[k][name]
			if !ok {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("prefix %d: %s exists (%q, %v), want it gone", k, name, got, err)
				}
				continue
			}
			if err != nil || string(got) != w {
				t.Errorf("prefix %d: %s = %q, %v; want %q", k, name, got, err, w)
			}
		}
	}
	// A link survives as one file with two names.
	c := fs.CrashKeeping(2, nil, CrashOptions{})
	f := mustOpen(t, c, "backup", os.O_RDWR)
	if same, err := c.SameFile(f, "old"); err != nil || !same {
		t.Fatalf("after a crash, old and its link backup are one file: %t, %v", same, err)
	}
	_ = f.Close()

	if err := fs.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	if n := fs.CrashDirOps(); n != 0 {
		t.Fatalf("%d directory operations pending after SyncDir", n)
	}
	got := readAll(t, fs.CrashKeepNone(), "old")
	if string(got) != "new bytes" {
		t.Fatalf("after SyncDir a crash keeps the rename: old = %q", got)
	}
	// A removal not synced comes back.
	if err := fs.Remove("backup"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fs.CrashKeepNone(), "backup"); string(got) != "old bytes" {
		t.Fatalf("an unsynced removal lost: backup = %q", got)
	}
	if _, err := fs.CrashKeepAll().ReadFile("backup"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a removal kept: %v", err)
	}
}

// TestCrashSyncDirIsPerDirectory: SyncDir of one directory makes its own
// operations durable (and, as a journal would, those issued before them),
// not later ones of another directory.
func TestCrashSyncDirIsPerDirectory(t *testing.T) {
	fs := NewCrashable()
	mustOpen(t, fs, "d1/a", rwCreate)
	mustOpen(t, fs, "d2/b", rwCreate)
	mustOpen(t, fs, "d1/c", rwCreate)
	mustOpen(t, fs, "d2/d", rwCreate)
	if err := fs.SyncDir("d1"); err != nil {
		t.Fatal(err)
	}
	c := fs.CrashKeepNone()
	for name, want := range map[string]bool{"d1/a": true, "d2/b": true, "d1/c": true, "d2/d": false} {
		_, err := c.ReadFile(name)
		if got := err == nil; got != want {
			t.Errorf("%s exists %t after SyncDir(d1) and a crash, want %t", name, got, want)
		}
	}
}

func TestFaultyDirOps(t *testing.T) {
	fs := NewFaulty(NewMem())
	f := mustOpen(t, fs, "a", rwCreate)
	defer f.Close()
	fs.Arm(Fault{Op: OpLink, Err: syscall.EPERM})
	if err := fs.Link("a", "b"); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("armed Link: %v", err)
	}
	if same, _ := fs.SameFile(f, "b"); same {
		t.Fatal("a failed Link made the name")
	}
	fs.Arm(Fault{Op: OpRename, Name: "c"})
	if err := fs.Rename("a", "c"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("armed Rename: %v", err)
	}
	if err := fs.Rename("a", "d"); err != nil {
		t.Fatalf("Rename to another name than the fault's: %v", err)
	}
	if same, err := fs.SameFile(f, "d"); err != nil || !same {
		t.Fatalf("SameFile through FaultyFS: %t, %v", same, err)
	}
	fs.Arm(Fault{Op: OpSyncDir})
	if err := fs.SyncDir("."); !errors.Is(err, syscall.EIO) {
		t.Fatalf("armed SyncDir: %v", err)
	}
}

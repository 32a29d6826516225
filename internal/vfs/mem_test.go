package vfs

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"testing"
)

func TestMemMapReservesPastEnd(t *testing.T) {
	fs := NewMem()
	f := mustOpen(t, fs, "db", rwCreate)
	defer f.Close()
	m, err := f.Map(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	if len(b) != 1<<16 {
		t.Fatalf("view length %d, want %d on an empty file", len(b), 1<<16)
	}
	// Writes that extend the file inside the reserve show through.
	if _, err := f.WriteAt([]byte("abc"), 40000); err != nil {
		t.Fatal(err)
	}
	if string(b[40000:40003]) != "abc" {
		t.Fatal("extending write below the mapped length is not visible")
	}
	if size, _ := f.Size(); size != 40003 {
		t.Fatalf("size %d, want 40003 (mapping must not change the size)", size)
	}
}

// TestMemReallocationKeepsOldView pins the documented limit of MemFS
// mappings: a write past every mapped length moves the contents to a new
// array; the old view keeps the bytes it had and misses later writes.
func TestMemReallocationKeepsOldView(t *testing.T) {
	fs := NewMem()
	f := mustOpen(t, fs, "db", rwCreate)
	defer f.Close()
	if _, err := f.WriteAt([]byte("old"), 0); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(4096)
	if err != nil {
		t.Fatal(err)
	}
	old := m.Bytes()
	if _, err := f.WriteAt([]byte("far"), 1<<20); err != nil { // past the capacity
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("new"), 100); err != nil {
		t.Fatal(err)
	}
	if string(old[:3]) != "old" {
		t.Fatal("old view lost bytes written before the reallocation")
	}
	if string(old[100:103]) == "new" {
		t.Fatal("old view unexpectedly sees a write made after the reallocation")
	}
	m2, err := f.Map(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if b := m2.Bytes(); string(b[100:103]) != "new" || string(b[1<<20:1<<20+3]) != "far" {
		t.Fatal("a new mapping does not show the current contents")
	}
}

func TestMemShrinkZeroesMappedTail(t *testing.T) {
	fs := NewMem()
	f := mustOpen(t, fs, "db", rwCreate)
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{9}, 8192), 0); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(8192)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Bytes()[4096:], make([]byte, 4096)) {
		t.Fatal("bytes cut off by Truncate still show through the mapping")
	}
}

func TestMemRemoveWhileOpen(t *testing.T) {
	fs := NewMem()
	f := mustOpen(t, fs, "db", rwCreate)
	if _, err := f.WriteAt([]byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("db"); err != nil {
		t.Fatal(err)
	}
	// The open file still works, like an unlinked file on Unix ...
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "kept" {
		t.Fatalf("read after Remove: %q, %v", buf, err)
	}
	// ... and a new file of the same name is a different file, with its own
	// lock.
	if err := f.TryLock(true); err != nil {
		t.Fatal(err)
	}
	g := mustOpen(t, fs, "db", rwCreate)
	if size, _ := g.Size(); size != 0 {
		t.Fatalf("recreated file has size %d", size)
	}
	if err := g.TryLock(true); err != nil {
		t.Fatalf("lock on the recreated file: %v", err)
	}
	if names := fs.Names(); !slices.Equal(names, []string{"db"}) {
		t.Fatalf("Names() = %v", names)
	}
}

func TestMemBadInput(t *testing.T) {
	fs := NewMem()
	f := mustOpen(t, fs, "db", rwCreate)
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), math.MaxInt64); err == nil {
		t.Error("WriteAt at MaxInt64 succeeded")
	}
	if err := f.Truncate(math.MaxInt64); err == nil {
		t.Error("Truncate(MaxInt64) succeeded")
	}
	if _, err := f.Map(math.MaxInt64); err == nil {
		t.Error("Map(MaxInt64) succeeded")
	}
	if _, err := f.Map(memMaxSize + 1); err == nil {
		t.Error("Map past the in-memory limit succeeded")
	}
	if n, err := f.ReadAt(nil, 1000); n != 0 || err != nil {
		t.Errorf("empty ReadAt = %d, %v", n, err)
	}
	wo := mustOpen(t, fs, "db", os.O_WRONLY)
	if _, err := wo.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrPermission) {
		t.Errorf("ReadAt on a write-only file: %v", err)
	}
	ap := mustOpen(t, fs, "db", os.O_RDWR|os.O_APPEND)
	if _, err := ap.WriteAt([]byte("x"), 0); err == nil {
		t.Error("WriteAt on an O_APPEND file succeeded")
	}
	if _, err := fs.ReadFile("nope"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
	if _, err := fs.OpenFile("db", os.O_RDONLY|os.O_TRUNC, 0); !errors.Is(err, os.ErrPermission) {
		t.Errorf("O_TRUNC on a read-only open: %v", err)
	}
}

func TestMemReadFileIsACopy(t *testing.T) {
	fs := NewMem()
	f := mustOpen(t, fs, "db", rwCreate)
	if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	got, err := fs.ReadFile("db")
	if err != nil || string(got) != "abc" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	got[0] = 'X'
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if string(buf) != "abc" {
		t.Fatal("changing ReadFile's result changed the file")
	}
}

package vfs

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// writeN writes byte base+i at offset i for i in [0, n) and returns each
// call's error.
func writeN(t *testing.T, f File, n int, base byte) []error {
	t.Helper()
	errs := make([]error, n)
	for i := range errs {
		_, errs[i] = f.WriteAt([]byte{base + byte(i)}, int64(i))
	}
	return errs
}

func TestFaultyNthWriteOnce(t *testing.T) {
	fs := NewFaulty(NewMem())
	f := mustOpen(t, fs, "db", rwCreate)
	writeN(t, f, 5, 0) // calls before arming do not count
	fs.Arm(Fault{Op: OpWrite, Nth: 3, Err: syscall.ENOSPC})
	errs := writeN(t, f, 5, 10)
	for i, err := range errs {
		if (i == 2) != (err != nil) {
			t.Fatalf("write %d: %v (only the 3rd after arming must fail)", i+1, err)
		}
	}
	if !errors.Is(errs[2], syscall.ENOSPC) {
		t.Fatalf("injected %v, want ENOSPC", errs[2])
	}
	if got := fs.Injected(); got != 1 {
		t.Fatalf("Injected() = %d, want 1", got)
	}
	// The failed write did not reach the file; the others did.
	got := make([]byte, 5)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if want := []byte{10, 11, 2, 13, 14}; !bytes.Equal(got, want) {
		t.Fatalf("contents % x, want % x", got, want)
	}
}

func TestFaultyPersist(t *testing.T) {
	fs := NewFaulty(NewMem())
	f := mustOpen(t, fs, "db", rwCreate)
	fs.Arm(Fault{Op: OpWrite, Nth: 2, Persist: true})
	errs := writeN(t, f, 6, 0)
	if errs[0] != nil {
		t.Fatalf("first write failed: %v", errs[0])
	}
	for i, err := range errs[1:] {
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("write %d after the fault fired: %v, want EIO", i+2, err)
		}
	}
	if got := fs.Injected(); got != 5 {
		t.Fatalf("Injected() = %d, want 5", got)
	}
	// Other operations are untouched by a write fault.
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	fs.Disarm()
	if errs := writeN(t, f, 2, 0); errs[0] != nil || errs[1] != nil {
		t.Fatalf("writes after Disarm: %v", errs)
	}
}

func TestFaultyShortWrite(t *testing.T) {
	fs := NewFaulty(NewMem())
	f := mustOpen(t, fs, "db", rwCreate)
	fs.Arm(Fault{Op: OpWrite, ShortWrite: 3, Err: syscall.ENOSPC})
	n, err := f.WriteAt([]byte("abcdefgh"), 10)
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt = %d, %v; want 3, ENOSPC", n, err)
	}
	if size, _ := f.Size(); size != 13 {
		t.Fatalf("size %d, want 13: exactly the prefix reached the file", size)
	}
	got := make([]byte, 3)
	if _, err := f.ReadAt(got, 10); err != nil || string(got) != "abc" {
		t.Fatalf("prefix %q, %v", got, err)
	}
	// A ShortWrite longer than the write is clamped to it.
	fs.Arm(Fault{Op: OpWrite, ShortWrite: 100})
	if n, err := f.WriteAt([]byte("xy"), 0); n != 2 || err == nil {
		t.Fatalf("clamped short write = %d, %v", n, err)
	}
}

func TestFaultyNameFilter(t *testing.T) {
	fs := NewFaulty(NewMem())
	a := mustOpen(t, fs, "a", rwCreate)
	b := mustOpen(t, fs, "b", rwCreate)
	fs.Arm(Fault{Op: OpSync, Nth: 2, Name: "b"})
	for i := 0; i < 5; i++ {
		if err := a.Sync(SyncData); err != nil {
			t.Fatalf("sync of a: %v", err)
		}
	}
	if err := b.Sync(SyncData); err != nil {
		t.Fatalf("first sync of b: %v", err)
	}
	if err := b.Sync(SyncData); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second sync of b: %v, want EIO", err)
	}
}

// TestFaultyFailedSyncIsNotDurable composes FaultyFS over CrashFS: a Sync
// that failed must not have made anything durable.
func TestFaultyFailedSyncIsNotDurable(t *testing.T) {
	crash := NewCrashable()
	fs := NewFaulty(crash)
	f := mustOpen(t, fs, "db", rwCreate)
	if _, err := f.WriteAt([]byte("first"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	fs.Arm(Fault{Op: OpSync})
	if _, err := f.WriteAt([]byte("second"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err == nil {
		t.Fatal("armed Sync succeeded")
	}
	got, err := crash.CrashKeepNone().ReadFile("db")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "first" {
		t.Fatalf("durable contents %q, want \"first\"", got)
	}
}

func TestFaultyTruncateAndRead(t *testing.T) {
	fs := NewFaulty(NewMem())
	f := mustOpen(t, fs, "db", rwCreate)
	fs.Arm(Fault{Op: OpTruncate, Err: syscall.ENOSPC})
	fs.Arm(Fault{Op: OpRead, Nth: 2})
	if err := f.Truncate(100); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Truncate: %v", err)
	}
	if size, _ := f.Size(); size != 0 {
		t.Fatalf("a failed Truncate changed the size to %d", size)
	}
	if err := f.Truncate(100); err != nil {
		t.Fatalf("second Truncate: %v", err)
	}
	buf := make([]byte, 10)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(buf, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second ReadAt: %v, want EIO", err)
	}
	if got := fs.Injected(); got != 2 {
		t.Fatalf("Injected() = %d", got)
	}
	if OpSync.String() != "Sync" || Op(42).String() != "Op(42)" {
		t.Fatal("Op.String")
	}
}

func TestFaultyConcurrent(t *testing.T) {
	fs := NewFaulty(NewMem())
	f := mustOpen(t, fs, "db", rwCreate)
	fs.Arm(Fault{Op: OpWrite, Nth: 50, Persist: true})
	const workers, each = 4, 50
	failed := make(chan int, workers)
	for w := 0; w < workers; w++ {
		go func() {
			n := 0
			for i := 0; i < each; i++ {
				if _, err := f.WriteAt([]byte{1}, int64(w)); err != nil {
					n++
				}
			}
			failed <- n
		}()
	}
	total := 0
	for w := 0; w < workers; w++ {
		total += <-failed
	}
	// Calls 50..200 fail, whatever goroutine makes them.
	if want := workers*each - 49; total != want || fs.Injected() != int64(want) {
		t.Fatalf("%d failures, Injected %d; want %d", total, fs.Injected(), want)
	}
}

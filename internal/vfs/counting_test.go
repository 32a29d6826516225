package vfs

import (
	"errors"
	"io"
	"syscall"
	"testing"
)

func TestCountingCountsExactly(t *testing.T) {
	c := NewCounting(NewMem())
	f := mustOpen(t, c, "db", rwCreate)
	g := mustOpen(t, c, "other", rwCreate) // counts are across files

	mustWrite := func(f File, n int, off int64) {
		t.Helper()
		if _, err := f.WriteAt(make([]byte, n), off); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(f, 4096, 0)
	mustWrite(f, 100, 4096)
	mustWrite(g, 10, 0)
	buf := make([]byte, 1000)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	// A read across EOF counts the call and the bytes actually returned.
	if n, err := f.ReadAt(buf, 4000); n != 196 || err != io.EOF {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(SyncBarrier); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(SyncBarrier); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(8192)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Bytes()[0] // reads through the mapping are not counted
	m.Close()
	m.Close() // a double Close is one unmap

	want := Counts{
		ReadCalls: 2, ReadBytes: 1196,
		WriteCalls: 3, WriteBytes: 4206,
		SyncDataCalls: 1, SyncBarrierCalls: 2,
		TruncateCalls: 1, MapCalls: 1, UnmapCalls: 1,
	}
	if got := c.Snapshot(); got != want {
		t.Fatalf("Snapshot() =\n%+v\nwant\n%+v", got, want)
	}
	if got := c.Snapshot().SyncCalls(); got != 3 {
		t.Fatalf("SyncCalls() = %d, want 3", got)
	}
	c.Reset()
	if got := c.Snapshot(); got != (Counts{}) {
		t.Fatalf("after Reset: %+v", got)
	}
	mustWrite(f, 1, 0)
	if got := c.Snapshot(); got != (Counts{WriteCalls: 1, WriteBytes: 1}) {
		t.Fatalf("after Reset and one write: %+v", got)
	}
}

func TestCountingCountsFailedCalls(t *testing.T) {
	faulty := NewFaulty(NewMem())
	c := NewCounting(faulty)
	f := mustOpen(t, c, "db", rwCreate)
	faulty.Arm(Fault{Op: OpWrite, Err: syscall.ENOSPC, ShortWrite: 10})
	if n, err := f.WriteAt(make([]byte, 100), 0); n != 10 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	faulty.Arm(Fault{Op: OpSync})
	if err := f.Sync(SyncData); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v", err)
	}
	want := Counts{WriteCalls: 1, WriteBytes: 10, SyncDataCalls: 1}
	if got := c.Snapshot(); got != want {
		t.Fatalf("Snapshot() = %+v, want %+v", got, want)
	}
}

func TestCountingConcurrent(t *testing.T) {
	c := NewCounting(NewMem())
	f := mustOpen(t, c, "db", rwCreate)
	const workers, each = 8, 100
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < each; i++ {
				if _, err := f.WriteAt(make([]byte, 8), int64(w*8)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	if got := c.Snapshot(); got.WriteCalls != workers*each || got.WriteBytes != workers*each*8 {
		t.Fatalf("WriteCalls %d WriteBytes %d", got.WriteCalls, got.WriteBytes)
	}
}

package pager

import (
	"bytes"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// TestWriteRunsSmallPages checks the path for pages smaller than the OS page:
// adjacent runs are copied together so that they reach the file in
// OS-page-sized writes, and the bytes land where they belong.
func TestWriteRunsSmallPages(t *testing.T) {
	if osPageSize < 2*1024 {
		t.Skipf("OS page of %d bytes: no page size below it", osPageSize)
	}
	const small = 1024
	c := vfs.NewCounting(vfs.NewMem())
	p := mustOpen(t, openFile(t, c, "db"), Options{PageSize: small, InitialMmapSize: 64 * small, GrowSize: 8 * small})
	per := int(osPageSize / small) // small pages per OS page
	fill := func(id, n int) []byte { return bytes.Repeat([]byte{byte(id)}, n*small) }
	// Pages [0, 2*per) as runs of one page each: two OS pages' worth.
	var runs []page.Run
	var want []byte
	for id := range 2 * per {
		runs = append(runs, page.Run{ID: uint64(id), Data: fill(id, 1)})
		want = append(want, fill(id, 1)...)
	}
	if err := p.WriteRuns(runs); err != nil {
		t.Fatal(err)
	}
	if got := c.Snapshot().WriteCalls; got != 2 {
		t.Fatalf("%d WriteAt calls, want 2 (one per OS page)", got)
	}
	got, err := p.ReadPages(0, uint64(2*per))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("pages read back differ from the runs written")
	}
}

// TestWriteRunsKeepsNoLargeBuffer checks that a large commit does not leave
// a buffer of its size behind in the pager: pages of the OS page size are
// written from the callers' buffers, and a large scratch buffer (small
// pages) is dropped after use.
func TestWriteRunsKeepsNoLargeBuffer(t *testing.T) {
	f := openFile(t, vfs.NewMem(), "db")
	p := mustOpen(t, f, smallMaps)
	var runs []page.Run
	for id := range 64 {
		runs = append(runs, page.Run{ID: uint64(10 + id), Data: pageBytes(uint64(10+id), 1, 0)})
	}
	if err := p.WriteRuns(runs); err != nil {
		t.Fatal(err)
	}
	if p.scratch != nil {
		t.Fatalf("WriteRuns of %d-byte pages kept a %d-byte scratch buffer", ps, cap(p.scratch))
	}
	got, err := p.ReadPages(10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pageBytes(10, 64, 0)) {
		t.Fatal("pages read back differ from the runs written")
	}

	if osPageSize < 2*1024 {
		return
	}
	const small = 1024
	q := mustOpen(t, openFile(t, vfs.NewMem(), "db"), Options{PageSize: small, InitialMmapSize: 1024 * small, GrowSize: 64 * small})
	big := []page.Run{{ID: 0, Data: make([]byte, small)}, {ID: 1, Data: make([]byte, 2*maxKeptScratch)}}
	if err := q.WriteRuns(big); err != nil {
		t.Fatal(err)
	}
	if cap(q.scratch) > maxKeptScratch {
		t.Fatalf("WriteRuns kept a %d-byte scratch buffer, more than %d", cap(q.scratch), maxKeptScratch)
	}
}

// TestWriteRunsDropsReferences checks that WriteRuns keeps no reference to
// the callers' page buffers once it returns (they become garbage as soon as
// they are written), and no run list of a bulk load's length.
func TestWriteRunsDropsReferences(t *testing.T) {
	p := mustOpen(t, openFile(t, vfs.NewMem(), "db"), smallMaps)
	write := func(n int) {
		t.Helper()
		var runs []page.Run
		for id := range n {
			// Descending, so WriteRuns sorts its copy.
			runs = append(runs, page.Run{ID: uint64(10 + n - 1 - id), Data: pageBytes(uint64(10+n-1-id), 1, 0)})
		}
		if err := p.WriteRuns(runs); err != nil {
			t.Fatal(err)
		}
		for i, r := range p.sorted[:cap(p.sorted)] {
			if r.Data != nil {
				t.Fatalf("after writing %d runs: slot %d of the kept run list still holds a page buffer", n, i)
			}
		}
	}
	write(8)
	if cap(p.sorted) == 0 {
		t.Fatal("WriteRuns kept no run list to reuse")
	}
	write(maxKeptRuns + 1)
	if p.sorted != nil {
		t.Fatalf("WriteRuns of %d runs kept a run list of capacity %d", maxKeptRuns+1, cap(p.sorted))
	}
}

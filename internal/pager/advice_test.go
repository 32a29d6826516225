package pager

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// A view passes read-ahead hints and residency questions to its mapping,
// clipped to the view: a range past the view's end is cut, a page past it
// is not in memory. On Linux a page of the file never read or written is
// not in memory, and is once read through the map (mincore).
func TestViewAdvice(t *testing.T) {
	counts := vfs.NewCounting(vfs.OS())
	f := openFile(t, counts, filepath.Join(t.TempDir(), "db"))
	p := mustOpen(t, f, smallMaps)
	const pages = 64
	if err := p.EnsureMapped(pages); err != nil {
		t.Fatal(err)
	}
	v := p.Acquire()
	defer v.Release()
	viewPages := uint64(len(v.Bytes()) / ps)
	if viewPages < pages {
		t.Fatalf("view of %d pages, want at least %d", viewPages, pages)
	}

	counts.Reset()
	v.WillNeed(3, 10)
	v.WillNeed(viewPages-2, 100) // clipped to the view's last two pages
	v.WillNeed(viewPages, 1)     // past the view: nothing to ask
	c := counts.Snapshot()
	if c.WillNeedCalls != 2 || c.WillNeedBytes != 12*ps {
		t.Fatalf("WillNeed: %d calls for %d bytes, want 2 calls for %d bytes", c.WillNeedCalls, c.WillNeedBytes, 12*ps)
	}
	if v.Resident(viewPages) {
		t.Fatal("a page past the view is resident")
	}
	if v.Resident(40) {
		t.Fatal("a page never read or written is resident")
	}
	adviceSink += v.Bytes()[40*ps] // read page 40 through the map
	if got := v.Resident(40); got != (runtime.GOOS == "linux") {
		t.Fatalf("Resident(40) after reading it = %v on %s", got, runtime.GOOS)
	}
	if c := counts.Snapshot(); c.ResidentCalls != 2 {
		t.Fatalf("%d residency questions reached the mapping, want 2 (the ones inside the view)", c.ResidentCalls)
	}

	// A view whose file takes no hints (in memory) ignores them.
	mem := mustOpen(t, openFile(t, vfs.NewMem(), "db"), smallMaps)
	if err := mem.EnsureMapped(pages); err != nil {
		t.Fatal(err)
	}
	mv := mem.Acquire()
	defer mv.Release()
	mv.WillNeed(0, pages)
	if mv.Resident(0) {
		t.Fatal("an in-memory view answered a residency question")
	}
	var nilView *View
	nilView.WillNeed(0, 1)
	if nilView.Resident(0) {
		t.Fatal("a nil view has resident pages")
	}
}

// adviceSink keeps the compiler from dropping a read through the map.
var adviceSink byte

package pager

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// deferredOptions opens the pagers of these tests.
var deferredOptions = Options{PageSize: ps, InitialMmapSize: 16 * ps, GrowSize: 64 * ps}

// TestDeferAndWriteDeferred: a deferred run is in the table and not in the
// file until WriteDeferred, which writes it and empties the table.
func TestDeferAndWriteDeferred(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, deferredOptions)
		if err := p.Defer([]page.Run{{ID: 20, Data: pageBytes(20, 2, 1)}}); err != nil {
			t.Fatal(err)
		}
		if size, err := f.Size(); err != nil || size < 22*ps {
			t.Fatalf("file of %d bytes after deferring pages 20-21 (%v): Defer must grow it", size, err)
		}
		if got, err := p.ReadPages(20, 2); err != nil || bytes.Equal(got, pageBytes(20, 2, 1)) {
			t.Fatalf("the file has the deferred pages before WriteDeferred (%v)", err)
		}
		if got := p.Dirty().Run(21); !bytes.Equal(got, pageBytes(20, 2, 1)[ps:]) {
			t.Fatal("the table does not hold page 21")
		}
		if p.DeferredPages() != 2 {
			t.Fatalf("DeferredPages = %d, want 2", p.DeferredPages())
		}
		if err := p.WriteDeferred(); err != nil {
			t.Fatal(err)
		}
		if got, err := p.ReadPages(20, 2); err != nil || !bytes.Equal(got, pageBytes(20, 2, 1)) {
			t.Fatalf("the file lacks the deferred pages after WriteDeferred (%v)", err)
		}
		if p.DeferredPages() != 0 || p.Dirty().Run(20) != nil {
			t.Fatal("entries left after WriteDeferred")
		}
	})
}

// TestDirectWriteSupersedesDeferred: a page written directly after it was
// deferred keeps the direct write's bytes, in the table (none) and in the
// file after WriteDeferred.
func TestDirectWriteSupersedesDeferred(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, deferredOptions)
		if err := p.Defer([]page.Run{{ID: 10, Data: pageBytes(10, 3, 1)}}); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteRuns([]page.Run{{ID: 11, Data: pageBytes(11, 1, 2)}}); err != nil {
			t.Fatal(err)
		}
		if p.Dirty().Run(11) != nil || p.Dirty().Run(10) == nil || p.Dirty().Run(12) == nil {
			t.Fatal("a direct write of page 11 left its entry or dropped its neighbours'")
		}
		if err := p.WriteDeferred(); err != nil {
			t.Fatal(err)
		}
		want := append(append(pageBytes(10, 3, 1)[:ps:ps], pageBytes(11, 1, 2)...), pageBytes(10, 3, 1)[2*ps:]...)
		if got, err := p.ReadPages(10, 3); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("pages 10-12 after WriteDeferred: the deferred page 11 overwrote the direct write (%v)", err)
		}
	})
}

// TestCutDropsDeferred: entries past a cut are dropped, so WriteDeferred
// neither writes them nor grows the file back; a page deferred after
// BeginCut raises the cut's floor as a write does.
func TestCutDropsDeferred(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, deferredOptions)
		if err := p.Defer([]page.Run{{ID: 90, Data: pageBytes(90, 1, 1)}}); err != nil {
			t.Fatal(err)
		}
		if err := p.Truncate(50 * ps); err != nil {
			t.Fatal(err)
		}
		if p.Dirty().Run(90) != nil || p.DeferredPages() != 0 {
			t.Fatal("the entry of page 90 survived a cut to 50 pages")
		}
		if err := p.WriteDeferred(); err != nil {
			t.Fatal(err)
		}
		if size, err := f.Size(); err != nil || size != 50*ps {
			t.Fatalf("file of %d bytes after WriteDeferred, want %d (%v)", size, 50*ps, err)
		}
		p.BeginCut(8 * ps)
		if err := p.Defer([]page.Run{{ID: 30, Data: pageBytes(30, 1, 2)}}); err != nil {
			t.Fatal(err)
		}
		for more := true; more; {
			var err error
			if more, err = p.Cut(100 * ps); err != nil {
				t.Fatal(err)
			}
		}
		if size, err := f.Size(); err != nil || size != 31*ps {
			t.Fatalf("cut ended at %d bytes, want %d: the deferred page 30 must raise the floor (%v)", size, 31*ps, err)
		}
		if p.Dirty().Run(30) == nil {
			t.Fatal("the cut dropped the entry of page 30, below its end")
		}
	})
}

// TestWriteDeferredInPieces: the deferred pages are written a piece at a
// time, between called after each with the bytes it spans; a run deferred
// between pieces (a commit) stays in the table for the next call, and a
// direct write between pieces is not undone by a later piece.
func TestWriteDeferredInPieces(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, deferredOptions)
		for i := range 6 {
			id := page.ID(10 + 4*i)
			if err := p.Defer([]page.Run{{ID: id, Data: pageBytes(id, 2, 1)}}); err != nil {
				t.Fatal(err)
			}
		}
		var spans [][2]int64
		err := p.WriteDeferredInPieces(3, func(lo, hi int64) {
			spans = append(spans, [2]int64{lo, hi})
			if len(spans) == 1 {
				// A commit between pieces: a new run, and a direct write
				// of a page a later piece still holds.
				if err := p.Defer([]page.Run{{ID: 60, Data: pageBytes(60, 1, 2)}}); err != nil {
					t.Error(err)
				}
				if err := p.WriteRuns([]page.Run{{ID: 31, Data: pageBytes(31, 1, 3)}}); err != nil {
					t.Error(err)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		// Pieces of about three pages: runs of two pages, taken two at a
		// time (the bound is reached after the second).
		if len(spans) != 3 {
			t.Fatalf("%d pieces, want 3: %v", len(spans), spans)
		}
		if spans[0] != [2]int64{10 * ps, 16 * ps} {
			t.Errorf("first piece spans %v, want pages 10-15", spans[0])
		}
		for i := range 6 {
			id := page.ID(10 + 4*i)
			want := pageBytes(id, 2, 1)
			if id == 30 {
				want = append(pageBytes(30, 2, 1)[:ps:ps], pageBytes(31, 1, 3)...)
			}
			if got, err := p.ReadPages(id, 2); err != nil || !bytes.Equal(got, want) {
				t.Errorf("pages %d-%d after WriteDeferredInPieces do not hold their bytes (%v)", id, id+1, err)
			}
		}
		if p.DeferredPages() != 1 || p.Dirty().Run(60) == nil {
			t.Fatalf("%d pages deferred after the call, want the one deferred between pieces", p.DeferredPages())
		}
		if err := p.WriteDeferredInPieces(3, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := p.ReadPages(60, 1); err != nil || !bytes.Equal(got, pageBytes(60, 1, 2)) || p.DeferredPages() != 0 {
			t.Fatalf("page 60 not written by the next call (%v)", err)
		}
	})
}

// writeGate holds the first WriteAt of a page at or past gateFrom until
// release is closed, after signalling entered: a piece of the dirty table
// caught in a slow write.
type writeGate struct {
	gateFrom int64
	entered  chan struct{}
	release  chan struct{}
	gated    atomic.Bool
	mu       sync.Mutex
	order    []int64 // offsets written, in order
}

// fs returns a wrapFS whose files write through the gate.
func (g *writeGate) fs(fs vfs.FS) vfs.FS {
	return wrapFS{FS: fs, wrap: func(f vfs.File) vfs.File { return &writeGateFile{File: f, fs: g} }}
}

type writeGateFile struct {
	vfs.File
	fs *writeGate
}

func (f *writeGateFile) WriteAt(b []byte, off int64) (int, error) {
	if off >= f.fs.gateFrom && f.fs.gated.CompareAndSwap(false, true) {
		f.fs.entered <- struct{}{}
		<-f.fs.release
	}
	f.fs.mu.Lock()
	f.fs.order = append(f.fs.order, off)
	f.fs.mu.Unlock()
	return f.File.WriteAt(b, off)
}

// TestPieceWritesWithoutTheLock: while a piece of the dirty table is being
// written, a commit defers its pages without waiting, even one that makes
// a page of the piece again; a direct write and the next write of the
// table wait for the piece; the page made again ends with its newer bytes
// in the file.
func TestPieceWritesWithoutTheLock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		gate := &writeGate{gateFrom: 10 * ps, entered: make(chan struct{}, 1), release: make(chan struct{})}
		f := b.open(t, gate.fs)
		p := mustOpen(t, f, deferredOptions)
		if err := p.Defer([]page.Run{{ID: 10, Data: pageBytes(10, 2, 1)}}); err != nil {
			t.Fatal(err)
		}
		piece := make(chan error, 1)
		go func() { piece <- p.WriteDeferredInPieces(64, nil) }()
		<-gate.entered

		deferred := make(chan error, 1)
		go func() {
			// A commit that makes page 11 again and a new page 30.
			deferred <- p.Defer([]page.Run{{ID: 11, Data: pageBytes(11, 1, 2)}, {ID: 30, Data: pageBytes(30, 1, 2)}})
		}()
		select {
		case err := <-deferred:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			close(gate.release)
			t.Fatal("Defer waited for the piece being written")
		}
		direct := make(chan error, 1)
		go func() { direct <- p.WriteRuns([]page.Run{{ID: 40, Data: pageBytes(40, 1, 3)}}) }()
		select {
		case err := <-direct:
			close(gate.release)
			t.Fatalf("a direct write went through while the piece was written (%v)", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(gate.release)
		if err := <-piece; err != nil {
			t.Fatal(err)
		}
		if err := <-direct; err != nil {
			t.Fatal(err)
		}
		gate.mu.Lock()
		order := slices.Clone(gate.order)
		gate.mu.Unlock()
		if i := slices.Index(order, 40*ps); i < 0 || slices.Index(order, 11*ps) > i {
			t.Fatalf("writes in order %v: the direct write of page 40 came before the piece's page 11", order)
		}
		// Page 11's newer entry outlived the piece; page 10's did not.
		if p.Dirty().Run(10) != nil || !bytes.Equal(p.Dirty().Run(11), pageBytes(11, 1, 2)) || p.Dirty().Run(30) == nil {
			t.Fatal("after the piece: page 10 still deferred, or page 11's newer entry or page 30's gone")
		}
		if err := p.WriteDeferred(); err != nil {
			t.Fatal(err)
		}
		want := append(pageBytes(10, 2, 1)[:ps:ps], pageBytes(11, 1, 2)...)
		if got, err := p.ReadPages(10, 2); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("pages 10-11 do not hold the piece's page 10 and the newer page 11 (%v)", err)
		}
		if got, err := p.ReadPages(30, 1); err != nil || !bytes.Equal(got, pageBytes(30, 1, 2)) {
			t.Fatalf("page 30 not written (%v)", err)
		}
	})
}

// TestDeadBuffersWaitForThePiece: a run of a piece being written whose
// pages are all deferred again meanwhile is dead, but its buffer is not
// handed out for reuse until the piece is written.
func TestDeadBuffersWaitForThePiece(t *testing.T) {
	gate := &writeGate{gateFrom: 10 * ps, entered: make(chan struct{}, 1), release: make(chan struct{})}
	f := openFile(t, gate.fs(vfs.NewMem()), "db")
	p := mustOpen(t, f, deferredOptions)
	old := pageBytes(10, 2, 1)
	if err := p.Defer([]page.Run{{ID: 10, Data: old}}); err != nil {
		t.Fatal(err)
	}
	piece := make(chan error, 1)
	go func() { piece <- p.WriteDeferredInPieces(64, nil) }()
	<-gate.entered
	// Both pages made again: the piece's run has no entry left.
	if err := p.Defer([]page.Run{{ID: 10, Data: pageBytes(10, 2, 2)}}); err != nil {
		close(gate.release)
		t.Fatal(err)
	}
	for _, b := range p.TakeDeadBuffers(nil) {
		if &b[0] == &old[0] {
			close(gate.release)
			t.Fatal("the buffer the piece writes from was handed out while it was written")
		}
	}
	close(gate.release)
	if err := <-piece; err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range p.TakeDeadBuffers(nil) {
		found = found || &b[0] == &old[0]
	}
	if !found {
		t.Fatal("the piece's dead buffer was not handed out once the piece was written")
	}
}

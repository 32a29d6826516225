package pager

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// hintFile records the StartWriteback hints a Pager gives, or refuses them.
type hintFile struct {
	vfs.File
	mu     sync.Mutex
	hints  [][2]int64
	refuse bool
	closed bool // set when the test is about to close the file
}

func (h *hintFile) StartWriteback(off, n int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		panic("StartWriteback after the file was closed")
	}
	h.hints = append(h.hints, [2]int64{off, n})
	if h.refuse {
		return errors.New("not supported")
	}
	return nil
}

func (h *hintFile) taken() [][2]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][2]int64(nil), h.hints...)
}

// TestWriteRunsAndStart: the runs are written as by WriteRuns, the file is
// told to start writing back the range they span (from the Pager's own
// goroutine, which Close stops before the file may be closed), and a file
// that refuses the hint is not given it again.
func TestWriteRunsAndStart(t *testing.T) {
	h := &hintFile{File: openFile(t, vfs.NewMem(), "db")}
	p, err := Open(h, smallMaps)
	if err != nil {
		t.Fatal(err)
	}
	runs := []page.Run{{ID: 12, Data: pageBytes(12, 2, 1)}, {ID: 5, Data: pageBytes(5, 1, 1)}}
	if err := p.WriteRunsAndStart(runs); err != nil {
		t.Fatal(err)
	}
	buf, err := p.ReadPages(12, 2)
	if err != nil || string(buf) != string(pageBytes(12, 2, 1)) {
		t.Fatalf("pages 12-13 read back wrong (%v)", err)
	}
	if err := p.Close(); err != nil { // waits for the hint goroutine
		t.Fatal(err)
	}
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	got := h.taken()
	if len(got) != 1 || got[0] != [2]int64{5 * ps, 9 * ps} {
		t.Fatalf("hints %v, want one for bytes [%d, %d)", got, 5*ps, 14*ps)
	}
	if err := p.WriteRunsAndStart(runs); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}

	r := &hintFile{File: openFile(t, vfs.NewMem(), "db2"), refuse: true}
	p2 := mustOpen(t, r, smallMaps)
	write := func(id uint64) {
		t.Helper()
		if err := p2.WriteRunsAndStart([]page.Run{{ID: id, Data: pageBytes(id, 1, 2)}}); err != nil {
			t.Fatal(err)
		}
	}
	write(5)
	// Let the goroutine meet the refusal before the next calls.
	for deadline := time.Now().Add(5 * time.Second); len(r.taken()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first hint never reached the file")
		}
	}
	time.Sleep(10 * time.Millisecond)
	write(6)
	write(7)
	p2.Close()
	if got := r.taken(); len(got) != 1 {
		t.Fatalf("a refusing file was given %d hints, want 1", len(got))
	}
}

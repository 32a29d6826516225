package btree

import "testing"

func TestSparesGetPut(t *testing.T) {
	const ps = 4096
	var s Spares
	if s.Get(1, ps) != nil {
		t.Fatal("empty Spares returned a buffer")
	}
	one := make([]byte, ps)
	three := make([]byte, 3*ps)
	if !s.Put(one, ps, 8) || !s.Put(three, ps, 8) {
		t.Fatal("Put refused buffers within the limit")
	}
	if s.Pages() != 4 {
		t.Fatalf("Pages = %d, want 4", s.Pages())
	}
	// Over the limit, too long, or not whole pages: refused.
	if s.Put(make([]byte, 5*ps), ps, 8) {
		t.Fatal("Put kept a buffer past the limit")
	}
	if s.Put(make([]byte, (MaxSpareRun+1)*ps), ps, 1<<20) {
		t.Fatal("Put kept a run longer than MaxSpareRun")
	}
	if s.Put(make([]byte, ps+1), ps, 1<<20) || s.Put(nil, ps, 1<<20) {
		t.Fatal("Put kept a buffer that is not whole pages")
	}
	if got := s.Get(2, ps); got != nil {
		t.Fatal("Get(2) returned a buffer of another length")
	}
	if got := s.Get(3, ps); len(got) != 3*ps || &got[0] != &three[0] {
		t.Fatal("Get(3) did not return the kept 3-page buffer")
	}
	if got := s.Get(3, ps); got != nil {
		t.Fatal("Get(3) returned the same buffer twice")
	}
	// A buffer kept under another page size is dropped, not returned.
	if got := s.Get(1, 2*ps); got != nil {
		t.Fatal("Get returned a buffer of another page size")
	}
	if s.Pages() != 0 {
		t.Fatalf("Pages = %d after taking everything, want 0", s.Pages())
	}
	var nilSpares *Spares
	if nilSpares.Get(1, ps) != nil {
		t.Fatal("nil Spares returned a buffer")
	}
}

package dirty

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/page"
)

var seedFlag = flag.Uint64("seed", 0, "seed of TestTableModel (0: from the clock)")

const ps = 64 // page size of these tests: only multiples of it matter here

// run returns a run of n pages at id whose bytes say (id+i, version) in
// each page.
func run(id page.ID, n int, version byte) page.Run {
	b := make([]byte, n*ps)
	for i := 0; i < n; i++ {
		b[i*ps] = byte(id + page.ID(i))
		b[i*ps+1] = version
	}
	return page.Run{ID: id, Data: b}
}

func TestTableRunAndFlush(t *testing.T) {
	tb := New(ps)
	if tb.Run(5) != nil || tb.Pages() != 0 {
		t.Fatal("empty table has an entry")
	}
	if err := tb.Put([]page.Run{run(10, 3, 1), run(20, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	if got := tb.Run(11); len(got) != 2*ps || got[0] != 11 || got[1] != 1 {
		t.Fatalf("Run(11) = %d bytes, page %d version %d; want the run's last 2 pages", len(got), got[0], got[1])
	}
	// A newer run replaces page 11 alone.
	if err := tb.Put([]page.Run{run(11, 1, 2)}); err != nil {
		t.Fatal(err)
	}
	if got := tb.Run(11); len(got) != ps || got[1] != 2 {
		t.Fatalf("Run(11) after the newer run: %d bytes, version %d", len(got), got[1])
	}
	if tb.Pages() != 4 {
		t.Fatalf("Pages = %d, want 4", tb.Pages())
	}
	tb.Drop(20, 1)
	var written []page.Run
	if err := tb.Flush(func(runs []page.Run) error { written = append(written, runs...); return nil }); err != nil {
		t.Fatal(err)
	}
	// Page order; 10 and 12 from the first run (11 was replaced), 11 from
	// the second; 20 was dropped.
	want := []struct {
		id      page.ID
		pages   int
		version byte
	}{{10, 1, 1}, {11, 1, 2}, {12, 1, 1}}
	if len(written) != len(want) {
		t.Fatalf("Flush wrote %d runs, want %d", len(written), len(want))
	}
	for i, w := range want {
		r := written[i]
		if r.ID != w.id || len(r.Data) != w.pages*ps || r.Data[0] != byte(w.id) || r.Data[1] != w.version {
			t.Errorf("run %d: page %d, %d bytes, version %d; want page %d version %d", i, r.ID, len(r.Data), r.Data[1], w.id, w.version)
		}
	}
	if tb.Pages() != 0 || tb.Run(10) != nil || tb.Run(11) != nil {
		t.Fatal("entries left after Flush")
	}
}

func TestTableFlushErrorKeepsEntries(t *testing.T) {
	tb := New(ps)
	if err := tb.Put([]page.Run{run(3, 2, 1)}); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("disk on fire")
	if err := tb.Flush(func([]page.Run) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("Flush = %v, want the write's error", err)
	}
	if tb.Pages() != 2 || tb.Run(4) == nil {
		t.Fatal("a failed Flush dropped entries")
	}
	n := 0
	if err := tb.Flush(func(runs []page.Run) error { n += len(runs); return nil }); err != nil || n != 1 {
		t.Fatalf("second Flush: %v, %d runs; want 1 run", err, n)
	}
}

func TestTablePutRejectsPartialPages(t *testing.T) {
	tb := New(ps)
	if err := tb.Put([]page.Run{{ID: 2, Data: make([]byte, ps+1)}}); err == nil {
		t.Fatal("Put took a run that is not whole pages")
	}
	if err := tb.Put([]page.Run{{ID: 2}}); err == nil {
		t.Fatal("Put took an empty run")
	}
}

func TestTableDropFrom(t *testing.T) {
	tb := New(ps)
	// Pages in three chunks.
	ids := []page.ID{5, 1<<chunkShift + 7, 3<<chunkShift + 1}
	for _, id := range ids {
		if err := tb.Put([]page.Run{run(id, 2, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	tb.DropFrom(ids[1] + 1)
	if tb.Run(ids[0]) == nil || tb.Run(ids[1]) == nil || tb.Run(ids[1]+1) != nil || tb.Run(ids[2]) != nil {
		t.Fatal("DropFrom removed the wrong entries")
	}
	if tb.Pages() != 3 {
		t.Fatalf("Pages = %d, want 3", tb.Pages())
	}
}

// TestTableModel puts, drops and flushes random runs and checks every page
// against a map of what the table and the file should hold: the table the
// newest bytes put since the page was last flushed or dropped, the file
// the bytes each flush wrote.
func TestTableModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed)", seed)
	r := rand.New(rand.NewPCG(seed, 0x71b))
	const pages = 3 << chunkShift
	tb := New(ps)
	// model holds, for each page with an entry, its bytes and the number
	// of the Put that stored them; pending numbers the Puts since the last
	// Flush, oldest first (what FlushSome takes from).
	type modelEntry struct {
		data []byte
		put  int
	}
	model := map[page.ID]modelEntry{}
	file := map[page.ID][]byte{} // page -> the bytes flushed for it
	var pending []int
	var version byte
	flushes, partial := 0, 0
	for op := 0; op < 4000; op++ {
		switch k := r.IntN(10); {
		case k < 6:
			version++
			n := 1 + r.IntN(4)
			id := page.ID(r.IntN(pages - n))
			rn := run(id, n, version)
			if err := tb.Put([]page.Run{rn}); err != nil {
				t.Fatal(err)
			}
			pending = append(pending, op)
			for i := 0; i < n; i++ {
				model[id+page.ID(i)] = modelEntry{rn.Data[i*ps:], op}
			}
		case k < 8:
			id, n := page.ID(r.IntN(pages)), uint64(1+r.IntN(8))
			tb.Drop(id, n)
			for p := id; p < id+page.ID(n); p++ {
				delete(model, p)
			}
		case k < 9:
			id := page.ID(r.IntN(pages))
			tb.DropFrom(id)
			for p := range model {
				if p >= id {
					delete(model, p)
				}
			}
		default:
			flushes++
			var last page.ID
			written := map[page.ID]bool{}
			write := func(runs []page.Run) error {
				for i, rn := range runs {
					if i > 0 && rn.ID < last {
						t.Fatalf("Flush wrote page %d after page %d", rn.ID, last)
					}
					for j := 0; j < len(rn.Data)/ps; j++ {
						file[rn.ID+page.ID(j)] = rn.Data[j*ps : (j+1)*ps]
						written[rn.ID+page.ID(j)] = true
					}
					last = rn.ID + page.ID(len(rn.Data)/ps)
				}
				return nil
			}
			taken := len(pending)
			if r.IntN(2) == 0 {
				if err := tb.Flush(write); err != nil {
					t.Fatal(err)
				}
			} else {
				partial++
				maxRuns, maxPages := 1+r.IntN(len(pending)+1), r.IntN(8)
				n, err := tb.FlushSome(maxRuns, maxPages, write)
				if err != nil {
					t.Fatal(err)
				}
				if n > maxRuns || n > len(pending) || (n == 0 && len(pending) > 0) {
					t.Fatalf("op %d: FlushSome(%d, %d) took %d of %d runs", op, maxRuns, maxPages, n, len(pending))
				}
				taken = n
			}
			if tb.Runs() != len(pending)-taken {
				t.Fatalf("op %d: %d runs left, want %d", op, tb.Runs(), len(pending)-taken)
			}
			// Exactly the entries of the runs taken were written.
			took := map[int]bool{}
			for _, put := range pending[:taken] {
				took[put] = true
			}
			pending = pending[taken:]
			want := 0
			for p, e := range model {
				if !took[e.put] {
					if written[p] {
						t.Fatalf("op %d: page %d written, but its run was not taken", op, p)
					}
					continue
				}
				want++
				if got := file[p]; !written[p] || !bytes.Equal(got, e.data[:ps]) {
					t.Fatalf("op %d: page %d flushed as version %v, want %d", op, p, got, e.data[1])
				}
				delete(model, p)
			}
			if len(written) != want {
				t.Fatalf("op %d: %d pages written, want %d", op, len(written), want)
			}
		}
		if int(tb.Pages()) != len(model) {
			t.Fatalf("op %d: Pages = %d, model has %d", op, tb.Pages(), len(model))
		}
		for p := page.ID(0); p < pages; p++ {
			got, want := tb.Run(p), model[p].data
			if (got == nil) != (want == nil) || (got != nil && !bytes.Equal(got[:ps], want[:ps])) {
				t.Fatalf("op %d: Run(%d) = %d bytes, want %d", op, p, len(got), len(want))
			}
		}
	}
	if flushes < 100 || partial < 40 {
		t.Fatalf("only %d flushes ran, %d of them partial", flushes, partial)
	}
}

// TestTableConcurrentReaders reads pages while the writer puts and
// flushes them: every read finds either nothing or a whole page of one
// version of that page.
func TestTableConcurrentReaders(t *testing.T) {
	tb := New(ps)
	const pages = 2 << chunkShift
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads [4]int
	for g := range reads {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := page.ID(r.IntN(pages))
				if b := tb.Run(id); b != nil {
					if len(b) < ps || b[0] != byte(id) {
						t.Errorf("Run(%d) returned page %d", id, b[0])
						return
					}
					reads[g]++
				}
			}
		}(g)
	}
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 20000; i++ {
		id := page.ID(r.IntN(pages - 4))
		if err := tb.Put([]page.Run{run(id, 1+r.IntN(4), byte(i))}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := tb.Flush(func([]page.Run) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	total := 0
	for _, n := range reads {
		total += n
	}
	if total == 0 {
		t.Fatal("no reader found an entry")
	}
}

// TestTableTakeDead: a run's buffer is handed back once its last entry
// leaves the table, whether replaced, dropped or flushed.
func TestTableTakeDead(t *testing.T) {
	tb := New(ps)
	a, b := run(4, 2, 1), run(4, 1, 2)
	if err := tb.Put([]page.Run{a}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Put([]page.Run{b}); err != nil {
		t.Fatal(err)
	}
	if d := tb.TakeDead(nil); len(d) != 0 {
		t.Fatalf("%d buffers dead while run a still has page 5", len(d))
	}
	tb.Drop(5, 1)
	if d := tb.TakeDead(nil); len(d) != 1 || &d[0][0] != &a.Data[0] {
		t.Fatalf("after dropping page 5: %d dead buffers, want run a's", len(d))
	}
	if err := tb.Flush(func([]page.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if d := tb.TakeDead(nil); len(d) != 1 || &d[0][0] != &b.Data[0] {
		t.Fatalf("after Flush: %d dead buffers, want run b's", len(d))
	}
	if d := tb.TakeDead(nil); len(d) != 0 {
		t.Fatal("TakeDead returned a buffer twice")
	}
}

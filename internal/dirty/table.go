// Package dirty holds the pages that commits have made and the file does
// not have yet: the pager's write-back table (docs/design.md §3.9).
// Readers look a page up here before they read it from the memory map; the
// next sync point writes the table's pages to the file and empties it.
//
// One goroutine at a time changes a Table (the pager serialises its
// writers); Run may be called from any goroutine at any time.
package dirty

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/rivetkv/rivet/internal/page"
)

// Table maps page ids to the bytes a commit made for them.
//
// Invariant: an entry's bytes are never changed once it is stored; an
// entry is replaced (a newer commit made the page again) or removed (the
// file has the page's bytes, or the page is free), never edited. So a
// reader that loaded an entry may keep using its bytes however the table
// changes, and a reader that finds no entry for a page reads it from the
// file, which by then holds what the entry held.
type Table struct {
	pageSize int
	// chunks[i] holds the entries of pages [i<<chunkShift, (i+1)<<chunkShift).
	// The slice is replaced, never changed in place, when it grows.
	chunks atomic.Pointer[[]atomic.Pointer[chunk]]
	pages  atomic.Int64 // entries stored
	// runs are the runs stored since the last Flush, in order: what Flush
	// writes, for the pages whose entry is still theirs.
	runs []*stored
	// dead holds the buffers of runs none of whose pages has an entry any
	// more, until TakeDead (readers may still be reading them).
	dead [][]byte
}

// chunkShift sizes the chunks: 1,024 entries, 8 KiB of pointers, cover
// 4 MiB of a file of 4 KiB pages, so a table over a few scattered pages of
// a large file stays small.
const chunkShift = 10

// chunk holds the entries of 1<<chunkShift pages. A page's bit is set
// while its slot holds an entry, so that the lookup of a page without one
// reads a word shared by 64 pages rather than its own slot.
type chunk struct {
	bits  [1 << chunkShift / 64]atomic.Uint64
	slots [1 << chunkShift]atomic.Pointer[entry]
}

// swap stores e (nil: none) in slot i and returns what it held, keeping
// the slot's bit in step. Only the table's one writer calls it.
func (c *chunk) swap(i uint64, e *entry) *entry {
	old := c.slots[i].Swap(e)
	c.mark(i, e != nil)
	return old
}

// mark sets or clears slot i's bit.
func (c *chunk) mark(i uint64, set bool) {
	if set {
		c.bits[i/64].Or(1 << (i % 64))
	} else {
		c.bits[i/64].And(^(uint64(1) << (i % 64)))
	}
}

// entry is one page's bytes: from the page to the end of the run it
// belongs to, so that a node or blob extent spanning several pages is
// read from its first page's entry.
type entry struct {
	data []byte
	run  *stored
}

// stored is one run as Put stored it.
type stored struct {
	id      page.ID
	data    []byte
	entries []entry // entries[i] is page id+i's
	live    int     // entries still in the table
	one     [1]entry
}

// removed accounts for e, just taken out of the table.
func (t *Table) removed(e *entry) {
	t.pages.Add(-1)
	if e.run.live--; e.run.live == 0 {
		t.dead = append(t.dead, e.run.data)
	}
}

// New returns an empty table for pages of pageSize bytes.
func New(pageSize int) *Table {
	return &Table{pageSize: pageSize}
}

// Run returns the bytes stored for page id, from that page to the end of
// its run, or nil if the table has none. It takes no lock.
func (t *Table) Run(id page.ID) []byte {
	if t == nil || t.pages.Load() == 0 {
		return nil
	}
	cs := t.chunks.Load()
	if cs == nil || id>>chunkShift >= uint64(len(*cs)) {
		return nil
	}
	c := (*cs)[id>>chunkShift].Load()
	if c == nil {
		return nil
	}
	i := id & (1<<chunkShift - 1)
	if c.bits[i/64].Load()&(1<<(i%64)) == 0 {
		return nil
	}
	e := c.slots[i].Load()
	if e == nil {
		return nil
	}
	return e.data
}

// Pages returns the number of pages that have an entry.
func (t *Table) Pages() int64 { return t.pages.Load() }

// Put stores the runs: each of their pages gets an entry, replacing any it
// had. The runs' buffers then belong to the table: the caller must not
// change or reuse them.
func (t *Table) Put(runs []page.Run) error {
	for _, r := range runs {
		if len(r.Data) == 0 || len(r.Data)%t.pageSize != 0 {
			return fmt.Errorf("dirty: run at page %d is %d bytes, not a positive multiple of the page size %d", r.ID, len(r.Data), t.pageSize)
		}
		n := len(r.Data) / t.pageSize
		s := &stored{id: r.ID, data: r.Data, live: n}
		if n == 1 {
			// Most runs are one page: no second allocation for them.
			s.entries = s.one[:]
		} else {
			s.entries = make([]entry, n)
		}
		for i := range s.entries {
			s.entries[i] = entry{data: r.Data[i*t.pageSize:], run: s}
			t.pages.Add(1)
			c, j := t.slot(r.ID+page.ID(i), true)
			if old := c.swap(j, &s.entries[i]); old != nil {
				t.removed(old)
			}
		}
		t.runs = append(t.runs, s)
	}
	return nil
}

// Drop removes the entries of pages [id, id+n): the file has newer bytes
// for them (a run written directly), or they are free.
func (t *Table) Drop(id page.ID, n uint64) {
	if t.pages.Load() == 0 {
		return
	}
	for p := id; p < id+n; p++ {
		if c, i := t.slot(p, false); c != nil {
			if old := c.swap(i, nil); old != nil {
				t.removed(old)
			}
		}
	}
}

// DropFrom removes the entries of every page at or past id: the file was
// cut there.
func (t *Table) DropFrom(id page.ID) {
	if t.pages.Load() == 0 {
		return
	}
	cs := t.chunks.Load()
	if cs == nil {
		return
	}
	for ci := id >> chunkShift; ci < uint64(len(*cs)); ci++ {
		c := (*cs)[ci].Load()
		if c == nil {
			continue
		}
		for i := range c.slots {
			if p := ci<<chunkShift + uint64(i); p >= id {
				if old := c.swap(uint64(i), nil); old != nil {
					t.removed(old)
				}
			}
		}
	}
}

// Flush hands write the pages whose entry is still the one a run since
// the last Flush stored, as runs in page order (pages adjacent in one
// buffer stay one run), and once write returned without error removes
// their entries. An entry that a later run replaced, or that Drop removed,
// is not written. If write fails, the table is left as it was: its entries
// still serve readers.
func (t *Table) Flush(write func([]page.Run) error) error {
	_, err := t.FlushSome(len(t.runs), 0, write)
	return err
}

// FlushSome is Flush for the oldest runs stored since the last Flush: at
// most maxRuns of them, and no more once they hold maxPages pages still
// theirs (0: no such bound; at least one run is taken). It returns how
// many runs it took; the later ones stay for the next call.
func (t *Table) FlushSome(maxRuns, maxPages int, write func([]page.Run) error) (int, error) {
	p := t.TakeSome(maxRuns, maxPages)
	if len(p.Runs) > 0 {
		if err := write(p.Runs); err != nil {
			return 0, err
		}
	}
	t.Finish(p)
	return p.taken, nil
}

// Piece is a part of the table TakeSome handed out to be written: its
// Runs, and what Finish needs to forget them.
type Piece struct {
	// Runs are the pages to write, as runs in page order.
	Runs  []page.Run
	done  []written
	taken int
}

// Taken returns how many stored runs the piece took.
func (p *Piece) Taken() int { return p.taken }

// written is a page of a Piece: the entry it was written from.
type written struct {
	c *chunk
	i uint64
	e *entry
}

// TakeSome returns the piece FlushSome would write, changing nothing. Once
// its runs are written, Finish removes their entries. Between the two the
// table may take Put (a later run replacing a page of the piece keeps its
// entry, and the piece's bytes for that page are stale, so the newer entry
// must reach the file after them) and Run, nothing else. If the write
// fails, the piece is dropped without Finish and the table stays as it
// was.
func (t *Table) TakeSome(maxRuns, maxPages int) Piece {
	var p Piece
	if len(t.runs) == 0 || maxRuns <= 0 {
		return p
	}
	for _, s := range t.runs {
		if p.taken == maxRuns || (maxPages > 0 && p.taken > 0 && len(p.done) >= maxPages) {
			break
		}
		p.taken++
		start := -1 // first page of the current piece of s
		for i := range s.entries {
			id := s.id + page.ID(i)
			e := &s.entries[i]
			c, j := t.slot(id, false)
			current := c != nil && c.slots[j].Load() == e
			if current {
				p.done = append(p.done, written{c, j, e})
				if start < 0 {
					start = i
				}
			}
			if start >= 0 && (!current || i == len(s.entries)-1) {
				end := i
				if current {
					end = i + 1
				}
				p.Runs = append(p.Runs, page.Run{ID: s.id + page.ID(start), Data: s.data[start*t.pageSize : end*t.pageSize]})
				start = -1
			}
		}
	}
	slices.SortFunc(p.Runs, page.CompareRuns)
	return p
}

// Finish forgets the runs p took, once they are written: it removes the
// entries of p's pages that are still the ones p was taken from.
func (t *Table) Finish(p Piece) {
	for _, w := range p.done {
		if w.c.slots[w.i].CompareAndSwap(w.e, nil) {
			w.c.mark(w.i, false)
			t.removed(w.e)
		}
	}
	rest := copy(t.runs, t.runs[p.taken:])
	clear(t.runs[rest:])
	t.runs = t.runs[:rest]
}

// Runs returns the number of runs stored since the last Flush.
func (t *Table) Runs() int { return len(t.runs) }

// TakeDead appends to dst the buffers of the runs that have no entry left
// since the last call, forgets them, and returns dst. Readers that looked
// a page up before its entry went may still be reading one: the caller
// reuses a buffer only once every reader that was running then has ended.
func (t *Table) TakeDead(dst [][]byte) [][]byte {
	dst = append(dst, t.dead...)
	clear(t.dead)
	t.dead = t.dead[:0]
	return dst
}

// slot returns the chunk holding page id's entry and the page's index in
// it; with grow, it makes the chunk (and room for it) if need be, else it
// returns a nil chunk where there is none.
func (t *Table) slot(id page.ID, grow bool) (*chunk, uint64) {
	ci, i := id>>chunkShift, id&(1<<chunkShift-1)
	cs := t.chunks.Load()
	if cs == nil || ci >= uint64(len(*cs)) {
		if !grow {
			return nil, 0
		}
		n := uint64(0)
		if cs != nil {
			n = uint64(len(*cs))
		}
		next := make([]atomic.Pointer[chunk], max(ci+1, 2*n))
		for k := uint64(0); k < n; k++ {
			next[k].Store((*cs)[k].Load())
		}
		t.chunks.Store(&next)
		cs = &next
	}
	c := (*cs)[ci].Load()
	if c == nil {
		if !grow {
			return nil, 0
		}
		c = new(chunk)
		(*cs)[ci].Store(c)
	}
	return c, i
}

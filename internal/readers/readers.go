// Package readers is the reader table: which committed states read
// transactions hold. The writer asks it which freed pages no reader can
// see any more and how far the file may be cut; Close asks it to refuse
// new readers and waits in it for the open ones to end.
//
// Beginning and ending a read transaction take no lock: each published
// state has a Slot whose state word counts the readers on it, and the
// newest slot is reachable through an atomic pointer. The writer-side
// calls (Publish, Held, Stats, Close) serialise on the table's mutex,
// which readers never take except to wake a waiting Close.
//
// A reader that loaded a slot may be delayed before it counts itself on
// it, and by then the slot may be old. The retired bit closes that race:
// the writer stops looking at an old slot only by setting the bit in a
// word that counts no reader (compare-and-swap 0 -> retired), and a reader
// whose increment finds the bit set takes it back and starts over on the
// newest slot. So every reader is either counted on a slot the writer
// still looks at, or on the newest slot, which the writer always counts.
package readers

import (
	"sync"
	"sync/atomic"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
)

// Bits of Slot.state.
const (
	// retired marks a slot the writer has stopped looking at; nothing
	// clears it.
	retired = uint64(1) << 63
	// countMask selects the number of readers counted on the slot.
	countMask = retired - 1
)

// Slot is one published state's entry in the table.
type Slot struct {
	// state is the number of read transactions counted on the slot, plus
	// the retired bit.
	//
	// Invariant: the writer sets retired on a slot of an older state only
	// with a compare-and-swap from 0, so a slot it retires has no reader;
	// a reader whose increment finds retired set takes it back without
	// using the slot. Only Close sets retired on a slot that counts
	// readers, and it then waits for them.
	state atomic.Uint64
	// begun counts the read transactions that began on the slot. Final
	// once the slot is retired: a reader counts itself in state first.
	begun atomic.Int64
	// meta is the state itself; it never changes.
	meta *page.Meta
	// view is the memory map the slot's readers read the state through,
	// held from publication until the slot is retired.
	// Invariant: it covers meta.HWM (Publish).
	view *pager.View
}

// Meta returns the state the slot stands for.
func (s *Slot) Meta() *page.Meta { return s.meta }

// View returns the memory map the state is read through. It stays valid
// until the reader counted on the slot leaves; readers do not release it.
func (s *Slot) View() *pager.View { return s.view }

// Table is the reader table. The zero Table is closed: Enter returns nil
// until Open.
type Table struct {
	// cur is the slot of the newest published state, nil before Open.
	// Invariant: cur is never retired while the table is open, so a
	// reader's retry on it succeeds unless the table is closing.
	cur atomic.Pointer[Slot]
	// closing is set by Close before it retires the last slots; a reader
	// whose count drops to zero then wakes Close.
	closing atomic.Bool

	// mu guards the fields below and serialises the writer-side calls.
	mu sync.Mutex
	// gone is signalled when a slot's count drops to zero while closing.
	gone sync.Cond
	// slots are the slots not yet retired, in order of publication: cur
	// last, and before it the older states that readers may still hold.
	slots []*Slot
	// ended sums begun over the slots retired so far.
	ended int64

	// BeforeCount, if set, runs in Enter between loading the newest slot
	// and counting the reader on it: tests widen the window the retired
	// bit closes. Set it before the first Enter.
	BeforeCount func()
}

// Open publishes meta, read through view, as the first state. Call it
// once, before any other method but Enter.
func (t *Table) Open(meta *page.Meta, view *pager.View) {
	t.gone.L = &t.mu
	t.Publish(meta, view)
}

// Publish makes meta the state that read transactions begin on from now
// on, read through view, which the table releases when no reader can
// begin on meta or hold it any more. It does nothing but release view
// once Close has begun, or when the table already publishes a newer
// state (a sync point finishing after later commits were published), and
// reports whether it published meta.
//
// Invariant: view covers meta.HWM: the caller acquired it after making
// the memory map cover meta.HWM, with the file at least that long; and
// the file is not cut below meta.HWM while meta is in Held's answer.
func (t *Table) Publish(meta *page.Meta, view *pager.View) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing.Load() {
		view.Release()
		return false
	}
	if c := t.cur.Load(); c != nil && c.meta.Txid > meta.Txid {
		view.Release()
		return false
	}
	s := &Slot{meta: meta, view: view}
	t.slots = append(t.slots, s)
	t.cur.Store(s)
	return true
}

// Current returns the newest published state (nil before Open). It keeps
// returning the last one after Close.
func (t *Table) Current() *page.Meta {
	if s := t.cur.Load(); s != nil {
		return s.meta
	}
	return nil
}

// Enter counts a new read transaction on the newest published state and
// returns its slot, or nil once the table is closing (or before Open),
// and how many read transactions began on the slot before it. The
// caller ends the transaction with Leave(slot).
func (t *Table) Enter() (s *Slot, before int64) {
	for {
		s := t.cur.Load()
		if s == nil {
			return nil, 0
		}
		if t.BeforeCount != nil {
			t.BeforeCount()
		}
		if n, ok := t.count(s); ok {
			return s, n
		}
		// Retired after we loaded it: the writer had stopped looking at
		// s, so it is no longer the newest, or the table is closing.
		if t.closing.Load() {
			return nil, 0
		}
	}
}

// count counts a reader on s, which Enter loaded as the newest slot and
// which may have been retired since, and reports whether it did and how
// many readers began on s before.
func (t *Table) count(s *Slot) (before int64, ok bool) {
	if s.state.Add(1)&retired == 0 {
		return s.begun.Add(1) - 1, true
	}
	t.leave(s)
	return 0, false
}

// Leave ends a read transaction that Enter counted on s.
func (t *Table) Leave(s *Slot) { t.leave(s) }

func (t *Table) leave(s *Slot) {
	// A zero count wakes Close. Close sets closing before it reads the
	// counts and holds mu from then until it waits, so a reader that
	// brings a count to zero after Close read it sees closing and its
	// Broadcast, which needs mu, comes after Close waits: no wakeup is
	// lost.
	if s.state.Add(^uint64(0))&countMask == 0 && t.closing.Load() {
		t.mu.Lock()
		t.gone.Broadcast()
		t.mu.Unlock()
	}
}

// Held appends to dst the newest published state, then every older state
// some read transaction holds, and returns dst. It retires the slots of
// older states that no reader holds: a reader that begins from now on
// counts itself on the newest state's slot or on one of those returned.
// Returns dst unchanged before Open.
//
// Invariant: a read transaction that is open when Held returns, or that
// begins later, sees a state in the returned list or one at least as new
// as its first element.
func (t *Table) Held(dst []*page.Meta) []*page.Meta {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cur.Load()
	if c == nil {
		return dst
	}
	dst = append(dst, c.meta)
	kept := t.slots[:0]
	for _, s := range t.slots {
		switch {
		case s == c:
			kept = append(kept, s)
		case s.state.CompareAndSwap(0, retired):
			t.ended += s.begun.Load()
			s.view.Release()
		default:
			// Counts a reader (or, while closing, is retired and
			// still counts one): held.
			kept = append(kept, s)
			dst = append(dst, s.meta)
		}
	}
	clear(t.slots[len(kept):])
	t.slots = kept
	return dst
}

// Stats returns the number of read transactions open now and of those
// begun since Open.
func (t *Table) Stats() (open int, begun int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	begun = t.ended
	for _, s := range t.slots {
		open += int(s.state.Load() & countMask)
		begun += s.begun.Load()
	}
	return open, begun
}

// Close refuses new read transactions (Enter returns nil) and waits for
// the open ones to end. Current keeps returning the last published state.
// Closing twice, or a table never opened, does nothing.
func (t *Table) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone.L == nil {
		return
	}
	t.closing.Store(true)
	for _, s := range t.slots {
		for {
			// Retire every slot, those counting readers included, so
			// that no new reader counts itself anywhere.
			old := s.state.Load()
			if old&retired != 0 || s.state.CompareAndSwap(old, old|retired) {
				break
			}
		}
	}
	for t.countsReaders() {
		t.gone.Wait()
	}
	for _, s := range t.slots {
		t.ended += s.begun.Load()
		s.view.Release()
	}
	clear(t.slots)
	t.slots = nil
}

// countsReaders reports whether a slot still counts a reader. Caller
// holds mu.
func (t *Table) countsReaders() bool {
	for _, s := range t.slots {
		if s.state.Load()&countMask != 0 {
			return true
		}
	}
	return false
}

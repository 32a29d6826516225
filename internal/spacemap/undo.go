package spacemap

import "fmt"

// Taking back committed transactions (docs/design.md §3.2, "Failed writes").
//
// A commit is final for the Map only once the database can no longer take
// it back: when readers may see it, or a sync point covering it has been
// written. Until then a failed write (a full disk) must leave the Map
// exactly as it was before the commit, so Commit keeps an undo record of
// every transaction until the caller calls Seal, and Undo takes back,
// newest first, every transaction committed since.
//
// Invariant: every transaction in the chain committed after the newest
// state a sync point was prepared for (a successful PrepareSync is followed
// by Seal). So its pending batch is still pending: Release frees only
// batches at or below the steady txid, which is at most that state.

// committedTx is what Undo needs to take back one committed transaction.
type committedTx struct {
	txid uint64
	// hwm, freePages and firstFree are the Map's at the transaction's Begin.
	hwm, freePages, firstFree uint64
	// allocs are the runs it took from free space, in order (runs at the
	// HWM are taken back with the HWM).
	allocs []run
	// batch is set when Commit appended a pending batch at txid.
	batch bool
	// young are the runs of its young batch (nil: none).
	young []run
	// shrink is set for a ShrinkTo transaction, which changed nothing else.
	shrink *shrinkUndo
}

// Seal makes every transaction committed so far final: Undo will not take
// it back. The caller seals once a committed state is published to readers
// or a sync point covering it has been written.
func (m *Map) Seal() {
	for i := range m.chain {
		if a := m.chain[i].allocs; m.spareAllocs == nil && cap(a) <= maxKeptAllocs {
			m.spareAllocs = a[:0]
		}
		m.chain[i] = committedTx{}
	}
	m.chain = m.chain[:0]
}

// maxKeptAllocs bounds an allocation log kept for reuse (a bulk load's
// would otherwise stay allocated).
const maxKeptAllocs = 1024

// Committed returns how many transactions Undo would take back.
func (m *Map) Committed() int { return len(m.chain) }

// AbortSync takes back PrepareSync for img, whose pages and meta were not
// (all) written: the sync point never happened. The steady selector and
// the regions' disk bitmaps are untouched until SyncDone, so the next
// PrepareSync builds on the same steady state and writes the same slots
// again. It must come before any transaction begins after PrepareSync.
func (m *Map) AbortSync(img SyncImage) {
	if !m.syncing {
		panic("spacemap: AbortSync without a sync point in flight")
	}
	if m.tx.active {
		panic("spacemap: AbortSync inside a transaction")
	}
	m.syncing = false
	m.prepared = img.prepared
}

// Undo takes back every transaction committed since the last Seal (or
// since New), newest first, and returns how many there were. Afterwards
// the Map is as it was after the last sealed commit, except that pending
// runs of sealed transactions that Release or ReleaseYoung made
// allocatable meanwhile stay allocatable, and regions it had to load stay
// loaded; regions a taken-back transaction made dirty may stay dirty (a
// dirty region whose free set equals its map is written or described as
// usual by the next sync point). It must not be called inside a
// transaction or while a sync point is in flight.
func (m *Map) Undo() int {
	if m.tx.active {
		panic("spacemap: Undo inside a transaction")
	}
	if m.syncing {
		panic("spacemap: Undo while a sync point is in flight")
	}
	n := len(m.chain)
	for i := n - 1; i >= 0; i-- {
		m.undoCommitted(&m.chain[i])
	}
	m.Seal()
	return n
}

// undoCommitted takes back one committed transaction. Every transaction
// committed after it has been taken back already.
func (m *Map) undoCommitted(c *committedTx) {
	if c.shrink != nil {
		m.undoShrink(c.shrink)
		return
	}
	// Its frees, which Commit applied last.
	if c.batch {
		k := len(m.pending) - 1
		if k < 0 || m.pending[k].txid != c.txid {
			panic(fmt.Sprintf("spacemap: Undo of txn %d: its pending batch is gone", c.txid))
		}
		b := m.pending[k]
		for _, rn := range b.runs {
			m.unfree(rn, false)
		}
		m.pendingPages -= b.pages
		m.pending[k] = batch{}
		m.pending = m.pending[:k]
	}
	if len(c.young) > 0 {
		k := youngIndex(m.young, c.txid)
		released := k < 0
		var pages uint64
		for _, rn := range c.young {
			m.unfree(rn, released)
			pages += rn.n
		}
		if !released {
			// Still pending (a reader could see it).
			m.pendingPages -= pages
			copy(m.young[k:], m.young[k+1:])
			m.young[len(m.young)-1] = youngBatch{}
			m.young = m.young[:len(m.young)-1]
		}
	}
	// Its allocations from free space, newest first: free and allocatable
	// again, as they were when it took them.
	for i := len(c.allocs) - 1; i >= 0; i-- {
		a := c.allocs[i]
		reg := m.regions[a.id/m.rp]
		start := a.id - reg.idx*m.rp
		setRange(reg.free, start, a.n)
		reg.nfree += a.n
		m.addAllocatable(reg, start, a.n)
	}
	// Its growth: the HWM, the regions it created and the tail of the old
	// last region, as Rollback does.
	m.shrinkHWMTo(c.hwm)
	m.freePages = c.freePages
	m.firstFree = min(m.firstFree, c.firstFree)
}

// unfree takes back the free of run rn: its pages are used again. If
// allocatable is set they were released (and are allocatable: whatever
// took them since has been taken back); otherwise they are pending.
func (m *Map) unfree(rn run, allocatable bool) {
	reg := m.regions[rn.id/m.rp]
	start := rn.id - reg.idx*m.rp
	if c := countRange(reg.free, start, rn.n); c != rn.n {
		panic(fmt.Sprintf("spacemap: Undo: run %d+%d has %d free pages, want all", rn.id, rn.n, c))
	}
	clearRange(reg.free, start, rn.n)
	reg.nfree -= rn.n
	if allocatable {
		if c := countRange(reg.alloc, start, rn.n); c != rn.n {
			panic(fmt.Sprintf("spacemap: Undo: released run %d+%d has %d allocatable pages, want all", rn.id, rn.n, c))
		}
		clearRange(reg.alloc, start, rn.n)
		reg.allocChanged(start, rn.n)
		reg.nalloc -= rn.n
		if int(start/64) == reg.allocHint {
			reg.allocHint = firstNonZeroWord(reg.alloc, reg.allocHint)
		}
	}
	m.markDirty(reg)
}

// youngIndex returns the index of the young batch of txid, or -1.
func youngIndex(young []youngBatch, txid uint64) int {
	for i := range young {
		if young[i].txid == txid {
			return i
		}
	}
	return -1
}

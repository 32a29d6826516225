// Package btree is rivet's copy-on-write B+tree: it reads nodes straight from
// the memory map, materialises the nodes a write transaction changes, and at
// commit rebalances and spills them bottom-up into freshly allocated runs so
// each parent records its children's new page ids and checksums.
//
// A Tree is one bucket's tree. Nesting (bucket records inside leaves) is the
// caller's business: the tree stores a bucket record as an opaque 32-byte
// value flagged page.FlagBucket.
//
// Nothing read from disk may panic here: every node is validated by
// internal/page before use, descent depth is capped at MaxDepth, and a child
// must not be newer than its parent. The first corruption found is recorded
// in Env.Err (methods without an error return, like cursor moves, then
// behave as if the tree ended) and the transaction reports it.
package btree

import (
	"github.com/rivetkv/rivet/internal/dirty"
	"github.com/rivetkv/rivet/internal/page"
)

// MaxDepth caps every descent. A real tree of 4 KiB pages holding 2^64 keys
// is under 20 levels deep; a deeper path can only come from a corrupt file
// (for example branch pages that form a cycle).
const MaxDepth = 64

// MaxNesting caps how deeply buckets nest. Each bucket's tree has its own
// MaxDepth budget; this bounds walks through bucket records that form a
// cycle on a corrupt file.
const MaxNesting = 64

// Allocator hands out and takes back page runs for a write transaction.
type Allocator interface {
	// Allocate returns the first page of a free run of n contiguous pages.
	Allocate(n uint64) (page.ID, error)
	// Free releases a run that the transaction's snapshot references; born
	// is the txid that wrote it (the txid its reference records).
	Free(id page.ID, n, born uint64) error
}

// LeafAllocator is an Allocator that places leaves apart from branches.
// Compaction's allocator is one: it writes the leaves it moves one after
// another on disk, in key order, and branches wherever first fit puts
// them, so that a walk in key order reads the moved leaves in file order.
type LeafAllocator interface {
	Allocator
	// AllocateLeaf is Allocate for a leaf's run.
	AllocateLeaf(n uint64) (page.ID, error)
}

// allocateNode allocates the run of a node of n pages.
func (e *Env) allocateNode(n uint64, leaf bool) (page.ID, error) {
	if leaf {
		if la, ok := e.Alloc.(LeafAllocator); ok {
			return la.AllocateLeaf(n)
		}
	}
	return e.Alloc.Allocate(n)
}

// Env is what the trees of one transaction share.
type Env struct {
	// Data is the memory map (the file's bytes from offset 0), valid for the
	// life of the transaction.
	Data []byte
	// PageSize is the file's page size.
	PageSize int
	// HWM bounds every page id read (the snapshot's high-water mark).
	HWM uint64
	// Txid is the snapshot's txid (read txn) or the txid being committed.
	Txid uint64
	// Alloc is nil for read transactions.
	Alloc Allocator
	// InlineLimit, if positive, replaces the default MaxInlineValue. Only
	// tests set it, to get blobs from small values; a file may mix values
	// stored either way, since readers go by each element's flags.
	InlineLimit int
	// MaxExtentPages, if positive, caps the blob extents this transaction
	// writes below maxExtentPages: a compaction step limited to a
	// fragmented part of the file sets it to 1 so that moved blobs fit
	// single free pages.
	MaxExtentPages uint64
	// Pool, if not nil, lends materialised nodes their element arrays
	// (write transactions; the DB keeps one for its writer).
	Pool *NodePool
	// Spares, if not nil, holds buffers that Spill encodes nodes and blob
	// extents into instead of allocating new ones; the DB refills it with
	// the buffers of runs it has written.
	Spares *Spares
	// Runs collects the runs spilled by the transaction, to be written at commit.
	Runs []page.Run
	// WriteEarly, if set, is handed the runs Spill has encoded, a batch of
	// at least EarlyWritePages pages at a time, while Spill goes on;
	// Runs[:EarlyWritten] are those it took, the commit writes the rest.
	// It is safe because a run is written only after Allocate handed its
	// pages out, and allocatable pages are in no state a reader or a crash
	// can see (docs/design.md §3.1). The DB sets it in modes that flush
	// every commit: the disk starts on the pages while Spill encodes the
	// others, and the flush then waits for less.
	WriteEarly   func([]page.Run) error
	EarlyWritten int
	// EarlyWriteBytes, if positive, replaces EarlyWritePages pages as the
	// batch size.
	EarlyWriteBytes int
	earlyBytes      int // bytes of Runs[EarlyWritten:]
	// Err is the first corruption met; sticky.
	Err error

	// CursorStacks lends the cursors of a read transaction their stacks,
	// so that a cursor is one small allocation: the transaction's owner
	// keeps the stacks from one transaction to the next (they are free
	// again once the transaction that used them ended, since its cursors
	// no longer move) and resets StacksLent. Write transactions leave it
	// nil: their cursors allocate their own stacks.
	//
	// Invariant: a stack is lent to one cursor per transaction; a cursor
	// of an ended transaction never touches its stack again (the public
	// Cursor checks that its transaction is open before every move).
	CursorStacks []*CursorStack
	// StacksLent counts the CursorStacks lent in this transaction, at
	// most MaxLentStacks.
	StacksLent int
	// LendStacks enables CursorStacks (read transactions).
	LendStacks bool

	// Stats counted for TxStats.
	Stats Stats

	// Readahead, if not nil, is told which pages a walk in key order will
	// read next (see Readahead); nil gives no hints (a foreign source, a
	// file without a map).
	Readahead Readahead

	// Foreign, when not nil, supplies every node instead of the map: a
	// bbolt file opened read-only serves its pages translated into rivet
	// nodes (internal/boltfile). Nil for rivet's own files, which costs
	// their read path one nil check. Data is then the foreign file's
	// bytes, which nothing here interprets: a foreign source yields no
	// blob references, so the blob reads that use Data are not reached.
	Foreign page.NodeSource

	// Dirty holds the pages commits made since the file's last sync point,
	// which the map may not show yet (pager.Defer); nil reads everything
	// from the map.
	Dirty *dirty.Table
}

// Stats are per-transaction tree counters (bbolt's TxStats fields).
type Stats struct {
	PageCount     int64 // pages allocated
	PageAlloc     int64 // bytes allocated
	CursorCount   int64
	NodeCount     int64 // nodes materialised
	NodeDeref     int64
	Rebalance     int64
	Split         int64
	Spill         int64
	Write         int64 // runs spilled
	RebalanceTime int64 // nanoseconds
	SpillTime     int64 // nanoseconds
}

// EarlyWritePages is the batch WriteEarly is handed: large enough that the
// calls cost nothing next to the writes, small enough that the disk starts
// early in a commit of a few thousand pages.
const EarlyWritePages = 256

// writeEarly notes a run of n bytes appended to Runs and hands WriteEarly
// the runs not yet written once they hold EarlyWritePages pages.
func (e *Env) writeEarly(n int) error {
	if e.WriteEarly == nil {
		return nil
	}
	e.earlyBytes += n
	batch := e.EarlyWriteBytes
	if batch <= 0 {
		batch = EarlyWritePages * e.PageSize
	}
	if e.earlyBytes < batch {
		return nil
	}
	if err := e.WriteEarly(e.Runs[e.EarlyWritten:]); err != nil {
		return err
	}
	e.EarlyWritten = len(e.Runs)
	e.earlyBytes = 0
	return nil
}

// fail records err as the transaction's corruption if it is the first.
func (e *Env) fail(err error) {
	if e.Err == nil {
		e.Err = err
	}
}

// Writable reports whether the environment belongs to a write transaction.
func (e *Env) Writable() bool { return e.Alloc != nil }

// MaxLentStacks bounds the cursor stacks one transaction lends (and so the
// CursorStacks list): most read transactions open a cursor or a few, and
// the cursors past the bound allocate their own stacks.
const MaxLentStacks = 8

// cursorStack returns an empty stack for a new cursor: lent from
// CursorStacks when the transaction lends them, else newly allocated.
func (e *Env) cursorStack() []elemRef {
	if !e.LendStacks || e.StacksLent >= MaxLentStacks {
		// Past MaxLentStacks a cursor's stack is its own, and the garbage
		// collector takes it with the cursor: a read transaction that
		// opens a cursor per item of a long loop would otherwise hold
		// every stack it ever lent (~280 bytes each) until it ends.
		return make([]elemRef, 0, inlineDepth)
	}
	if e.StacksLent == len(e.CursorStacks) {
		e.CursorStacks = append(e.CursorStacks, new(CursorStack))
	}
	s := e.CursorStacks[e.StacksLent]
	e.StacksLent++
	return s[:0]
}

// readNode returns the validated node ref points to: from the dirty table
// if a commit made it since the file's last sync point, else from the map
// or the foreign source.
func (e *Env) readNode(ref page.Ref) (page.Node, error) {
	if run := e.Dirty.Run(ref.ID); run != nil {
		return page.NodeFromBuffer(run, e.PageSize, ref.ID, ref.Txid, e.HWM)
	}
	return page.ReadNodeVia(e.Foreign, e.Data, e.PageSize, ref, e.HWM)
}

// readExtent returns the validated blob extent ref points to, from the
// dirty table or the map (as readNode).
func (e *Env) readExtent(ref page.ExtentRef) (page.BlobExtent, error) {
	if run := e.Dirty.Run(ref.ID); run != nil {
		return page.ReadBlobExtent(run, ref.ID, e.PageSize, ref, e.HWM)
	}
	return page.ReadBlobExtent(e.Data, 0, e.PageSize, ref, e.HWM)
}

// ReadNode returns the validated node ref points to, from the map or the
// foreign source (statistics walks read nodes this way).
func (e *Env) ReadNode(ref page.Ref) (page.Node, error) { return e.readNode(ref) }

// MaxInlineValue returns the longest value stored inside a leaf; longer
// values are blobs (docs/design.md §2.4). Up to eight pages a value lives
// in its leaf, which then spans several pages as in bbolt: a blob is
// rounded up to whole pages, and for values of one to a few pages that
// rounding made files up to 1.3x bbolt's. Past eight pages the
// rounding costs at most 1/8 of a value and blobs keep an update next to a
// large value from rewriting it.
func (e *Env) MaxInlineValue() int {
	if e.InlineLimit > 0 {
		return e.InlineLimit
	}
	return inlineValuePages * e.PageSize
}

// inlineValuePages is MaxInlineValue in pages.
const inlineValuePages = 8

// maxExtentPages caps one blob extent so that it fits a fragmented region
// and so freeing a huge value returns runs the allocator can reuse.
const maxExtentPages = 4096

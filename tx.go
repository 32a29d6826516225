package rivet

import (
	"fmt"
	"sync"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
	"github.com/rivetkv/rivet/internal/readers"
)

// Pgid is a page id, as bbolt's Bucket.Root reports it.
type Pgid uint64

// Tx is a read-only or read-write transaction. Keys and values it returns
// are valid only until it ends.
//
// A Tx is not safe for concurrent use by several goroutines; use one Tx per
// goroutine, or synchronise.
type Tx struct {
	// WriteFlag is accepted for bbolt compatibility (it selected O_DIRECT for
	// WriteTo there) and is ignored.
	WriteFlag int

	// txState is the live transaction. A read transaction's state is
	// returned to a pool when it ends and this pointer is cleared, so
	// that a short View allocates little more than this handle.
	//
	// Invariant: every exported method of Tx, and of the Buckets and
	// Cursors a read transaction handed out, checks that the transaction
	// has not ended before it touches a promoted field: once a read
	// transaction ended, its state may already serve another one.
	*txState

	// What stays valid after the transaction ended.
	txid     uint64  // snapshot txid (read) or the txid being written
	writable bool    // whether the transaction could change the database
	size     int64   // Size(): the state's high-water mark in bytes
	final    TxStats // a read transaction's statistics, kept as it ends
}

// txState is the part of a transaction that lives only while it runs.
type txState struct {
	db       *DB
	managed  bool
	meta     *page.Meta // the snapshot (read) or the state built on (write)
	view     *pager.View
	slot     *readers.Slot // where a read transaction is counted
	yield    bool          // a read transaction yields its processor as it ends
	env      *btree.Env
	root     *Bucket
	onCommit []func()
	stats    TxStats
	spaceOps int
	// freedPages counts the pages the transaction freed: a commit that
	// writes about as many as it frees rewrote pages (journalDefers).
	freedPages uint64
	// lazy commits without waiting for a sync point (compaction steps).
	lazy bool
	// replay is set on the transaction that applies the journal at Open.
	replay bool
	// journaling is set while the transaction logs its changes for the
	// commit journal (journal_ops.go): jlog is its record so far, jpath
	// scratch space for bucket paths.
	journaling bool
	jlog       []byte
	jpath      [][]byte
	// spaceEnded is set once the free-space map's transaction has been
	// committed or rolled back by Commit.
	spaceEnded bool
	// deferred is set once Commit handed the transaction's runs to the
	// pager's dirty table, which keeps their buffers.
	deferred bool

	envStore  btree.Env // env points here
	rootStore Bucket    // root points here
}

// readStates recycles the states of ended read transactions.
var readStates = sync.Pool{New: func() any { return new(txState) }}

// spaceAllocator gives the trees of a write transaction the DB's allocator
// and counts the calls, so an unchanged transaction commits without I/O.
type spaceAllocator struct{ tx *Tx }

func (a spaceAllocator) Allocate(n uint64) (page.ID, error) {
	a.tx.spaceOps++
	db := a.tx.db
	db.spaceMu.Lock()
	defer db.spaceMu.Unlock()
	return db.space.Allocate(n)
}

func (a spaceAllocator) Free(id page.ID, n, born uint64) error {
	a.tx.spaceOps++
	a.tx.freedPages += n
	db := a.tx.db
	db.spaceMu.Lock()
	defer db.spaceMu.Unlock()
	return db.space.FreeBorn(id, n, born)
}

func newTx(db *DB, meta *page.Meta, view *pager.View, writable bool) *Tx {
	var st *txState
	if writable {
		st = new(txState)
	} else {
		st = readStates.Get().(*txState)
	}
	tx := &Tx{txState: st, writable: writable, txid: meta.Txid, size: int64(meta.HWM) * int64(db.pageSize)}
	st.db, st.meta, st.view = db, meta, view
	st.env = &st.envStore
	st.envStore = btree.Env{
		Data:         view.Bytes(),
		PageSize:     db.pageSize,
		HWM:          meta.HWM,
		Txid:         meta.Txid,
		CursorStacks: st.envStore.CursorStacks, // kept by recycle
		LendStacks:   !writable,
		Foreign:      db.foreign,
		Dirty:        db.pager.Dirty(),
	}
	if db.foreign == nil {
		// A bbolt file's nodes come translated from the foreign source,
		// whose page ids are not the map's.
		st.envStore.Readahead = view
	}
	if writable {
		tx.txid = meta.Txid + 1
		tx.env.Txid = tx.txid
		tx.env.Alloc = spaceAllocator{tx}
		// The writer lock is held: the DB's run list is free until this
		// transaction ends (DB.releaseRuns).
		tx.env.Runs = db.treeRuns[:0]
		tx.env.Spares = &db.spares
		tx.env.Pool = &db.nodePool
	}
	st.root = &st.rootStore
	st.rootStore = Bucket{tx: tx, FillPercent: DefaultFillPercent, isRoot: true}
	st.rootStore.treeStore.Init(tx.env, meta.Root)
	st.rootStore.tree = &st.rootStore.treeStore
	return tx
}

// recycle returns an ended read transaction's state to the pool, after
// keeping what its handle must still answer (Stats).
func (tx *Tx) recycle() {
	st := tx.txState
	tx.final = st.stats
	tx.txState = nil
	// The cursor stacks are free again (this transaction's cursors no
	// longer move) and go with the state; there are at most
	// btree.MaxLentStacks of them.
	stacks := st.envStore.CursorStacks
	*st = txState{}
	st.envStore.CursorStacks = stacks
	readStates.Put(st)
}

// ID returns the transaction's id: the txid of the snapshot a read
// transaction sees, or the txid a write transaction will commit as.
//
// A write transaction that changes nothing commits without any I/O and
// leaves no state behind, so the next write transaction gets the same id
// (bbolt writes a meta page for it and moves on). Ids of transactions that
// changed something are unique and increasing; do not count no-op
// transactions by their ids.
func (tx *Tx) ID() int { return int(tx.txid) }

// ended reports whether the transaction has been committed or rolled back,
// or is a zero Tx that never began. Methods of an ended transaction touch
// nothing of its snapshot, whose memory map may be gone: they return
// ErrTxClosed, or nil and zero values where bbolt's method has no error.
func (tx *Tx) ended() bool { return tx == nil || tx.txState == nil || tx.db == nil }

// DB returns the database the transaction belongs to (nil once it ended).
func (tx *Tx) DB() *DB {
	if tx.ended() {
		return nil
	}
	return tx.db
}

// Size returns the size in bytes of the database state the transaction
// sees (what WriteTo writes). It stays valid after the transaction ends; a
// zero Tx has size 0.
func (tx *Tx) Size() int64 { return tx.size }

// Writable reports whether the transaction can change the database.
func (tx *Tx) Writable() bool { return tx.writable }

// Stats returns the transaction's statistics so far (its final ones once
// it has ended).
func (tx *Tx) Stats() TxStats {
	if tx.txState == nil {
		return tx.final
	}
	s := tx.stats
	if !tx.ended() {
		tx.foldTreeStats(&s)
	}
	return s
}

func (tx *Tx) foldTreeStats(s *TxStats) {
	es := &tx.env.Stats
	addNonzero(&s.PageCount, es.PageCount)
	addNonzero(&s.PageAlloc, es.PageAlloc)
	addNonzero(&s.CursorCount, es.CursorCount)
	addNonzero(&s.NodeCount, es.NodeCount)
	addNonzero(&s.NodeDeref, es.NodeDeref)
	addNonzero(&s.Rebalance, es.Rebalance)
	addNonzero((*int64)(&s.RebalanceTime), int64(es.RebalanceTime))
	addNonzero(&s.Split, es.Split)
	addNonzero(&s.Spill, es.Spill)
	addNonzero((*int64)(&s.SpillTime), int64(es.SpillTime))
}

// Bucket returns the top-level bucket name, or nil if it does not exist
// (or the transaction has ended).
func (tx *Tx) Bucket(name []byte) *Bucket {
	if tx.ended() {
		return nil
	}
	return tx.root.Bucket(name)
}

// CreateBucket creates a top-level bucket.
func (tx *Tx) CreateBucket(name []byte) (*Bucket, error) {
	if tx.ended() {
		return nil, ErrTxClosed
	}
	return tx.root.CreateBucket(name)
}

// CreateBucketIfNotExists creates a top-level bucket if it does not exist
// and returns it.
func (tx *Tx) CreateBucketIfNotExists(name []byte) (*Bucket, error) {
	if tx.ended() {
		return nil, ErrTxClosed
	}
	return tx.root.CreateBucketIfNotExists(name)
}

// DeleteBucket deletes a top-level bucket and everything in it.
func (tx *Tx) DeleteBucket(name []byte) error {
	if tx.ended() {
		return ErrTxClosed
	}
	return tx.root.DeleteBucket(name)
}

// MoveBucket moves the bucket child from src to dst; a nil src or dst means
// the top level of tx. Its errors are MoveBucket's (see Bucket.MoveBucket).
// As in bbolt, tx itself matters only for a nil src or dst: with both
// given, the move is theirs, whatever became of tx.
func (tx *Tx) MoveBucket(child []byte, src, dst *Bucket) error {
	if src == nil || dst == nil {
		if tx.ended() {
			return ErrTxClosed
		}
		if src == nil {
			src = tx.root
		}
		if dst == nil {
			dst = tx.root
		}
	}
	return src.MoveBucket(child, dst)
}

// ForEach calls fn for each top-level key, in name order, with its bucket.
// A plain value stored at the top level (through Tx.Cursor().Bucket(), as
// bbolt allows) is visited too, with a nil bucket, as in bbolt.
func (tx *Tx) ForEach(fn func(name []byte, b *Bucket) error) error {
	if tx.ended() {
		return ErrTxClosed
	}
	return tx.root.ForEach(func(k, _ []byte) error {
		return fn(k, tx.root.Bucket(k))
	})
}

// Cursor returns a cursor over the top-level buckets; values are nil. The
// cursor of an ended transaction returns nil from every move.
func (tx *Tx) Cursor() *Cursor {
	if tx.ended() {
		return &Cursor{}
	}
	if !tx.writable {
		// The root bucket lives in the pooled state; a cursor, which
		// the caller may keep past the transaction, gets its own copy
		// (a read transaction's root tree is never materialised, so
		// the copy reads exactly what the original would).
		root := *tx.root
		root.tree = &root.treeStore
		return root.Cursor()
	}
	return tx.root.Cursor()
}

// Err returns the first corruption the transaction met in a method without
// an error return (Get, cursor moves, Bucket), or nil. View, Update and
// Commit return it too.
func (tx *Tx) Err() error {
	if tx.txState == nil || tx.env == nil {
		return nil
	}
	return tx.env.Err
}

// OnCommit registers fn to run after the transaction commits successfully.
// On an ended transaction it does nothing.
func (tx *Tx) OnCommit(fn func()) {
	if tx.ended() {
		return
	}
	tx.onCommit = append(tx.onCommit, fn)
}

// Rollback ends the transaction, discarding its changes. For a read
// transaction this is how it ends.
func (tx *Tx) Rollback() error {
	if tx.ended() {
		return ErrTxClosed
	}
	if tx.managed {
		panic("managed tx rollback not allowed")
	}
	if tx.ended() {
		return ErrTxClosed
	}
	tx.rollback()
	return nil
}

func (tx *Tx) rollback() {
	db := tx.db
	if db == nil {
		return
	}
	tx.foldTreeStats(&tx.stats)
	tx.db = nil
	if tx.writable {
		db.endRW(tx, false)
	} else {
		db.endRO(tx)
		tx.recycle()
	}
}

// flushDeferred writes the pages commits deferred (pager.Defer) to the
// file, for a reader of the map that does not go through tx.env: after it
// the map shows every page of tx's snapshot. Writing them before their
// sync point changes nothing a crash can find (pager.WriteDeferred).
func (tx *Tx) flushDeferred() error {
	if err := tx.db.pager.WriteDeferred(); err != nil {
		return fmt.Errorf("rivet: writing deferred pages: %w", err)
	}
	return nil
}

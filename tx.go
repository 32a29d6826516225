package rivet

import (
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
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

	db       *DB
	writable bool
	managed  bool
	meta     *page.Meta // the snapshot (read) or the state built on (write)
	txid     uint64     // snapshot txid (read) or the txid being written
	view     *pager.View
	env      *btree.Env
	root     *Bucket
	onCommit []func()
	stats    TxStats
	spaceOps int
	// lazy commits without waiting for a sync point (compaction steps).
	lazy bool
	// spaceEnded is set once the free-space map's transaction has been
	// committed or rolled back by Commit.
	spaceEnded bool

	envStore  btree.Env // tx.env points here
	rootStore Bucket    // tx.root points here
}

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

func (a spaceAllocator) Free(id page.ID, n uint64) error {
	a.tx.spaceOps++
	db := a.tx.db
	db.spaceMu.Lock()
	defer db.spaceMu.Unlock()
	return db.space.Free(id, n)
}

func newTx(db *DB, meta *page.Meta, view *pager.View, writable bool) *Tx {
	tx := &Tx{db: db, writable: writable, meta: meta, txid: meta.Txid, view: view}
	// One allocation for the transaction, its environment and its root
	// bucket: a short read transaction is mostly this.
	tx.env = &tx.envStore
	tx.envStore = btree.Env{
		Data:     view.Bytes(),
		PageSize: db.pageSize,
		HWM:      meta.HWM,
		Txid:     meta.Txid,
	}
	if writable {
		tx.txid = meta.Txid + 1
		tx.env.Txid = tx.txid
		tx.env.Alloc = spaceAllocator{tx}
		// The writer lock is held: the DB's run list is free until this
		// transaction ends (DB.releaseRuns).
		tx.env.Runs = db.treeRuns[:0]
		tx.env.SparePages, db.sparePages = db.sparePages, nil
		tx.env.Pool = &db.nodePool
	}
	tx.root = &tx.rootStore
	tx.rootStore = Bucket{tx: tx, FillPercent: DefaultFillPercent, isRoot: true}
	tx.rootStore.treeStore.Init(tx.env, meta.Root)
	tx.rootStore.tree = &tx.rootStore.treeStore
	return tx
}

// ID returns the transaction's id: the txid of the snapshot a read
// transaction sees, or the txid a write transaction will commit as.
func (tx *Tx) ID() int { return int(tx.txid) }

// ended reports whether the transaction has been committed or rolled back,
// or is a zero Tx that never began. Methods of an ended transaction touch
// nothing of its snapshot, whose memory map may be gone: they return
// ErrTxClosed, or nil and zero values where bbolt's method has no error.
func (tx *Tx) ended() bool { return tx == nil || tx.db == nil }

// DB returns the database the transaction belongs to (nil once it ended).
func (tx *Tx) DB() *DB { return tx.db }

// Size returns the size in bytes of the database state the transaction
// sees (what WriteTo writes). It stays valid after the transaction ends; a
// zero Tx has size 0.
func (tx *Tx) Size() int64 {
	if tx.meta == nil || tx.env == nil {
		return 0
	}
	return int64(tx.meta.HWM) * int64(tx.env.PageSize)
}

// Writable reports whether the transaction can change the database.
func (tx *Tx) Writable() bool { return tx.writable }

// Stats returns the transaction's statistics so far (its final ones once
// it has ended).
func (tx *Tx) Stats() TxStats {
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
// the top level. Its errors are MoveBucket's (see Bucket.MoveBucket).
func (tx *Tx) MoveBucket(child []byte, src, dst *Bucket) error {
	if tx.ended() {
		return ErrTxClosed
	}
	if src == nil {
		src = tx.root
	}
	if dst == nil {
		dst = tx.root
	}
	return src.MoveBucket(child, dst)
}

// ForEach calls fn for each top-level bucket, in name order.
func (tx *Tx) ForEach(fn func(name []byte, b *Bucket) error) error {
	if tx.ended() {
		return ErrTxClosed
	}
	return tx.root.ForEachBucket(func(k []byte) error {
		return fn(k, tx.root.Bucket(k))
	})
}

// Cursor returns a cursor over the top-level buckets; values are nil. The
// cursor of an ended transaction returns nil from every move.
func (tx *Tx) Cursor() *Cursor {
	if tx.ended() {
		return &Cursor{}
	}
	return tx.root.Cursor()
}

// OnCommit registers fn to run after the transaction commits successfully.
func (tx *Tx) OnCommit(fn func()) { tx.onCommit = append(tx.onCommit, fn) }

// Rollback ends the transaction, discarding its changes. For a read
// transaction this is how it ends.
func (tx *Tx) Rollback() error {
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
	}
}

package rivet

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/journal"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
	"github.com/rivetkv/rivet/internal/readers"
	"github.com/rivetkv/rivet/internal/spacemap"
	"github.com/rivetkv/rivet/internal/vfs"
)

// DB is a database: one file holding a tree of buckets. Any number of read
// transactions may run at once, beside at most one write transaction.
//
// The exported fields are bbolt's. Open sets them from Options (and the
// defaults); a program may change them on an open DB, between its own
// transactions or inside a write transaction, and each takes effect when
// bbolt v1.5 reads it: MaxSize and NoSync when a write transaction begins
// and again when it commits, StrictMode at each commit, MaxBatchSize and
// MaxBatchDelay at each Batch call. The others are accepted and have no
// effect (see each field). Changing a field while another goroutine uses
// the DB is a data race, as in bbolt.
type DB struct {
	// StrictMode runs a full Check after every commit and returns its first
	// problem as the commit's error (bbolt panics with it). Slow; for tests.
	// Read at each commit.
	StrictMode bool

	// NoSync skips the flush at commit: Durability None (see
	// Options.NoSync) while set. Read when a write transaction begins and
	// when it commits; a commit made under NoSync is durable after the
	// next flush (DB.Sync, Close, or a later commit's sync point).
	NoSync bool

	// NoFreelistSync is accepted for bbolt compatibility and has no effect:
	// rivet has no freelist to write (its free-space maps are written only
	// where a commit changed them).
	NoFreelistSync bool

	// FreelistType is accepted for bbolt compatibility and has no effect:
	// rivet has one free-space structure.
	FreelistType FreelistType

	// NoGrowSync is accepted for bbolt compatibility and has no effect: the
	// commit's own flush covers the file's new length.
	NoGrowSync bool

	// PreLoadFreelist is accepted for bbolt compatibility and has no
	// effect: free space is loaded a region at a time, when needed.
	PreLoadFreelist bool

	// MmapFlags is accepted for bbolt compatibility and has no effect:
	// rivet maps the file read-only and shared, reserving address space
	// ahead of it.
	MmapFlags int

	// MaxBatchSize is the largest batch Batch builds; <= 0 disables
	// batching. Read by each Batch call.
	MaxBatchSize int

	// MaxBatchDelay is how long Batch waits for more calls before running.
	// Read by each Batch call. Zero or below, a batch starts at once when
	// none runs and gathers the calls made while one does (see Batch).
	MaxBatchDelay time.Duration

	// AllocSize is accepted for bbolt compatibility and has no effect: the
	// file grows by doubling below 16 MiB and by 1/16 of its size (1 to
	// 16 MiB) above.
	AllocSize int

	// MaxSize caps the file size in bytes when positive: a commit whose
	// pages do not fit below it fails with errors.ErrMaxSizeReached (free
	// pages below the cap are still used). Read when a write transaction
	// begins and when it commits. Lowering it below the file's size never
	// shrinks the file; it stops growth.
	MaxSize int

	// Mlock is accepted for bbolt compatibility and has no effect: the map
	// is not locked into memory.
	Mlock bool

	// The states the DB keeps track of, newest first: a committed
	// transaction becomes head, then base, and in time durable; readers
	// see it once it is published.
	//
	//   head      the newest committed state, in memory: the next write
	//             transaction builds on it (db.head).
	//   base      the newest sealed state: published, or covered by a sync
	//             point whose writes succeeded. A sync point that fails to
	//             write takes back every commit after it (db.base).
	//   published the newest state readers begin on, the reader table's
	//             newest (db.readers.Current()). Full and Barrier publish
	//             a state once its sync point is durable, Periodic and None
	//             once its pages are written (docs/design.md §3.3).
	//   durable   the steady state: the newest sync point whose flush
	//             returned (db.durable, its txid; db.durableSlot, the meta
	//             slot holding it). The next sync point builds on it and
	//             never overwrites its pages, maps or meta.
	//   flushed   the newest sync point a full flush made durable; in
	//             Barrier mode durable may be ahead of it (db.flushed).
	//
	// Invariant: flushed <= durable <= base.Txid <= head.Txid, and
	// published.Txid <= base.Txid (a state is sealed no later than it is
	// published); no txid up to base.Txid is ever reused.
	//
	// Lock order: writer, then syncMu / spaceMu / mu (each of those is
	// held only briefly and never while taking another). batchMu is taken
	// alone.

	// Set by Open and not changed until Close.
	path     string
	opts     Options
	logger   Logger
	fs       vfs.FS      // the file seam Open used
	mode     os.FileMode // Open's mode, for files a conversion creates
	file     vfs.File
	pager    *pager.Pager
	pageSize int
	readOnly bool
	// bolt is the bbolt file a read-only DB reads (Open of a bbolt file
	// with Options.ReadOnly); nil for a rivet file. foreign is its node
	// source, handed to every transaction's tree environment; a nil
	// interface for a rivet file.
	bolt    *boltBacking
	foreign page.NodeSource
	// hooks are nil outside tests (see dbHooks).
	hooks *dbHooks

	// Options in force. noSync is NoSync's value (atomic: the periodic
	// syncer reads it); maxSizeApplied is MaxSize's, guarded by writer.
	// applyFields copies both from the exported fields.
	noSync         atomic.Bool
	maxSizeApplied int

	// Writer state. writer is held by the write transaction for its whole
	// life, and by a sync leader while it prepares its sync point
	// (prepareSync); it guards every field of this group.
	writer sync.Mutex
	head   *page.Meta
	base   *page.Meta
	// chain is what the commits after base that wait for a sync point
	// share (nil until one does); a sync point that fails to write tells
	// them through it that they were rolled back (chain.err is guarded by
	// syncMu).
	chain *commitChain
	// heldBuf is the writer's scratch list of the states readers hold, and
	// snapshotBuf that of their txids.
	heldBuf     []*page.Meta
	snapshotBuf []uint64
	// treeRuns is the backing array of a write transaction's list of
	// spilled runs (tx.env.Runs), reused by every write transaction so
	// that a commit does not allocate it anew. Between transactions it
	// holds no references (releaseRuns), so the page buffers of a commit
	// become garbage as soon as it is written.
	treeRuns []page.Run
	// spares are buffers of written runs kept for the next write
	// transaction's nodes (btree.Env.Spares), at most maxSparePages pages;
	// metaBuf is the buffer every sync point encodes its meta into.
	spares btree.Spares
	// retired holds buffers of deferred runs until no reader can read
	// them (recycleDeferred), and deadBuf is where recycleDeferred takes
	// them from the dirty table. Guarded by the writer lock.
	retired []retiredBuffer
	deadBuf [][]byte
	metaBuf []byte
	// nodePool lends the writer's materialised nodes their element arrays.
	nodePool btree.NodePool
	// writersWaiting counts the application's callers of beginRW, and
	// journal leaders, waiting for the writer lock (atomic): a lone
	// committer leads its sync point or journal write only when nobody
	// waits, and compaction lets them go before its next step.
	writersWaiting atomic.Int32
	// earlyWritePages, if positive, replaces btree.EarlyWritePages, so
	// tests reach the early writes with small commits (atomic).
	earlyWritePages atomic.Int64

	// Free space. spaceMu serialises calls into the free-space map: the
	// writer's, and the sync leader's SyncDone, which runs without writer.
	space   *spacemap.Map
	spaceMu sync.Mutex

	// Sync state: the sync point pipeline (sync.go). syncMu guards the
	// fields up to flushed; syncCond (on syncMu) wakes those waiting for
	// a sync point.
	syncMu      sync.Mutex
	syncCond    *sync.Cond
	syncing     bool   // a sync point is in flight (its leader holds it)
	durable     uint64 // the steady state's txid
	durableSlot int    // the meta slot (0 or 1) holding the steady state
	// slotMeta is the meta each slot holds on disk (nil: unknown, e.g. a
	// slot that did not decode at Open). Truncation never cuts below the
	// HWM of either (docs/design.md §4.1), and a failed meta write puts
	// the slot's meta back (restoreMetaSlot).
	slotMeta     [2]*page.Meta
	lastFullSync time.Time // Barrier: when the last full flush returned
	flushed      uint64
	// Atomics the commit path reads without syncMu. unsyncedCommits
	// counts the commits since the last sync point or journal write was
	// prepared (a sync leader lingers while it grows), compaction's steps
	// excepted: they wait for no flush, and counted they would make every
	// commit during a compaction join a group, lingering, when it could
	// lead its flush at once. lastSyncCommits is how many commits the last
	// sync point or journal write covered; lastFlushNs is how long its
	// flush took.
	unsyncedCommits atomic.Int64
	lastSyncCommits atomic.Int64
	lastFlushNs     atomic.Int64
	// bgSyncing is set while an early sync point runs in the background
	// (startBackgroundSync); Close waits for it on bgSyncs.
	bgSyncing atomic.Bool
	bgSyncs   sync.WaitGroup
	// writingBack is set while a goroutine writes deferred pages back
	// (startWriteBack); Close waits for it on bgSyncs too.
	writingBack atomic.Bool
	// bgWant is the newest txid a background sync point was asked to
	// cover (startBackgroundSync).
	bgWant atomic.Uint64
	// syncWaiters counts the goroutines waiting for a sync point led by
	// another; closing is set once Close begins. A paced sync point
	// stops pausing when either is (paceCheckpoint).
	syncWaiters atomic.Int32
	closing     atomic.Bool

	// Commit journal (journal.go; docs/design.md §3.8). jfiles are the
	// two journal files (nil when the DB does not journal) and jw appends
	// to jfiles[jactive] (nil until the first record); jlast is the newest
	// txid written to each file. jqueue holds the records of commits not
	// yet written to the journal, in txid order, and jbarrier the newest
	// commit that changed data without a record (a large one): no journal
	// write acknowledges a later commit before a sync point covers it.
	// These are guarded by writer. jsalt, this open's salt, is set by Open
	// and carried by every meta written since; jready is set once a sync
	// point carrying it is durable (only then may records be trusted by
	// recovery). jwriting (a journal write is in flight, its leader holds
	// it) and logged (the newest txid that is durable, by the journal or
	// by a sync point) are guarded by syncMu.
	jfiles   [2]vfs.File
	jw       *journal.Writer
	jactive  int
	jlast    [2]uint64
	jqueue   []journalEntry
	jbarrier uint64
	jsalt    uint64
	jready   atomic.Bool
	// jbatch and jspare are buffers kept for reuse, guarded by writer: the
	// last journal write's batch, and records journal writes are done with
	// (takeJournalBuffer).
	jbatch []byte
	jspare [][]byte
	// joff is set when the journal's files could not be made: commits
	// then flush the file (errJournalOff).
	joff atomic.Bool
	// jbehind is set while the active journal file has passed the switch
	// size and the other still waits for its checkpoint: that checkpoint
	// no longer paces itself (paceCheckpoint).
	jbehind atomic.Bool
	// jsaltBase is set by Open when the DB journals (see journalSalt):
	// journals() reports it.
	jsaltBase []byte
	// jsaltOpened is the salt of the meta Open opened at (the journal of
	// the Open before), which this open's salt must differ from.
	jsaltOpened uint64
	// openedMetaErrs are why Open found a meta slot invalid (nil where it
	// decoded), for the salt's digest of the slots as found.
	openedMetaErrs [2]error
	jwriting       bool
	logged         uint64
	// jpublishing is the txid of the state a journal write in flight will
	// publish (0: none), held against page reuse (beginRW).
	jpublishing atomic.Uint64
	// jswitchBytes, if positive, replaces journalSwitchBytes (tests).
	jswitchBytes int64
	// journalWrites and journalRecords count journal writes and the
	// records they held (Stats).
	journalWrites  atomic.Int64
	journalRecords atomic.Int64
	journalBytes   atomic.Int64

	// Publish state. readers is the reader table: the published state and
	// the older states read transactions hold (internal/readers; it has
	// its own lock). mu guards the other fields of this group. It is held
	// only for short bookkeeping, never for the life of a transaction, and
	// read transactions never take it.
	readers readers.Table
	mu      sync.Mutex
	// opened is set once Open has made the DB usable and cleared by Close;
	// a zero DB{} is not opened. Every method that needs the file checks
	// it first and returns ErrDatabaseNotOpen.
	opened bool
	// latched is the failed flush that refuses writes until reopened.
	latched error

	// Statistics. stats holds the compaction counters and spaceStats the
	// free-space map's, copied when a state is published (both guarded by
	// mu); commits and txStats change without a lock (atomics), and
	// recovered and metaReadBytes are set by Open.
	stats      Stats
	spaceStats spacemap.Stats
	// compacting is the running compaction's progress, nil when none runs.
	compacting *compactRun
	// commits counts committed write transactions.
	commits atomic.Int64
	// txStats sums the statistics of every ended transaction; only
	// TxStats' atomic accessors touch it.
	txStats TxStats
	// recovered tells how Open found the file (for diagnostics).
	recovered Recovery
	// metaReadBytes counts what Open read before the pager existed.
	metaReadBytes int64

	// Background goroutines, started by Open and stopped by Close:
	// bgStop and bgDone stop the periodic syncer (Periodic mode),
	// compactStop and compactDone the background compactor
	// (Options.AutoCompact); nil without one. compactBudget is the pages
	// one compaction step may rewrite (compactStepPages; tests lower it to
	// exercise resuming).
	bgStop        chan struct{}
	bgDone        chan struct{}
	compactStop   chan struct{}
	compactDone   chan struct{}
	compactBudget uint64

	// Batch: batchMu guards batch, the timed batch that Batch calls join
	// (MaxBatchDelay > 0); batches, the queued batches waiting to run,
	// oldest first (calls join the last); and batchRunning, set while a
	// queued batch runs.
	batchMu      sync.Mutex
	batch        *batch
	batches      []*batch
	batchRunning bool
}

// Recovery describes what Open found, so tools can tell a torn last commit
// apart from corruption.
type Recovery struct {
	// Txid is the committed state the DB opened at.
	Txid uint64
	// FellBack is true when the newest meta's sync point was incomplete (a
	// torn last commit) and Open used the previous one.
	FellBack bool
	// Reason says why Open fell back, when it did.
	Reason string
	// PagesVerified counts the pages recovery read and checked.
	PagesVerified int
	// DamagedMeta is set when one of the two meta pages failed validation
	// (a torn write, or damage) and Open used the other: it names the
	// slot, the transaction the damaged page claims to hold (unverified;
	// "unreadable" if even that is gone) and what failed. When the claimed
	// transaction is newer than the one opened, or cannot be read, FellBack
	// is set too: commits after Txid may be lost.
	DamagedMeta string
	// JournalRecords is how many commit journal records Open applied on
	// top of the file's last sync point (docs/design.md §3.8), and
	// JournalTxid the transaction of the last one.
	JournalRecords int
	JournalTxid    uint64
}

// Recovery reports what Open found when it opened the file.
func (db *DB) Recovery() Recovery { return db.recovered }

// Path returns the path of the database file.
func (db *DB) Path() string { return db.path }

// GoString returns the Go string representation of the database.
func (db *DB) GoString() string { return fmt.Sprintf("rivet.DB{path:%q}", db.path) }

// String returns the string representation of the database.
func (db *DB) String() string { return fmt.Sprintf("DB<%q>", db.path) }

// IsReadOnly reports whether the database was opened read-only.
func (db *DB) IsReadOnly() bool { return db.readOnly }

// Logger returns the database's logger.
func (db *DB) Logger() Logger { return db.logger }

// Info is kept for bbolt compatibility: Data is the address of the current
// memory map and PageSize the file's page size.
type Info struct {
	Data     uintptr
	PageSize int
}

// Info returns low-level information about the database. On a DB that is
// not open, Data is 0.
func (db *DB) Info() *Info {
	if db.isClosed() {
		return &Info{PageSize: db.pageSize}
	}
	v := db.pager.Acquire()
	defer v.Release()
	var addr uintptr
	if b := v.Bytes(); len(b) > 0 {
		addr = uintptr(pointerOf(b))
	}
	return &Info{Data: addr, PageSize: db.pageSize}
}

// Stats returns a snapshot of the database's counters. After Close it
// keeps returning the last values; on a DB never opened, zeros.
func (db *DB) Stats() Stats {
	db.mu.Lock()
	s := db.stats
	ss := db.spaceStats
	s.Latched = db.latched != nil
	if r := db.compacting; r != nil {
		s.Compacting = true
		p := r.snapshot()
		s.CompactPhase, s.CompactBytesMoved, s.CompactBytesToMove = p.Phase, p.Moved, p.ToMove
	}
	db.mu.Unlock()
	open, begun := db.readers.Stats()
	s.OpenTxN, s.TxN = open, int(begun)
	s.Commits = db.commits.Load()
	s.TxStats.add(&db.txStats)
	if db.pager == nil || db.pageSize == 0 {
		return s
	}
	ps := db.pager.Stats()
	s.PagesWritten = ps.PagesWritten
	s.BytesWritten = ps.BytesWritten
	s.WriteRuns = ps.WriteCalls
	s.Flushes = ps.Flushes
	s.JournalWrites = db.journalWrites.Load()
	s.JournalRecords = db.journalRecords.Load()
	s.JournalBytes = db.journalBytes.Load()
	s.PagesRead = ps.PagesRead + db.metaReadBytes/int64(db.pageSize)
	s.FreePageN = int(ss.FreePages - ss.PendingPages)
	s.PendingPageN = int(ss.PendingPages)
	s.FreeAlloc = s.FreePageN * db.pageSize
	s.FreelistInuse = int(ss.LoadedRegions) * 2 * db.pageSize
	return s
}

// readerYieldEvery is how often a read transaction yields its processor
// as it ends (runtime.Gosched), counted over all read transactions, so
// that goroutines making read transactions that never block still let a
// writer back from a system call onto a processor (docs/design.md §5).
// Rarer yields keep the writer waiting longer; more frequent ones show in
// the readers' own latency, since a yielding reader waits its turn.
const readerYieldEvery = 256

// Begin starts a transaction. A read transaction sees the newest committed
// state and never blocks or is blocked by the writer; a write transaction
// waits for the previous one to finish. Every transaction must end with
// Commit or Rollback (read transactions: Rollback), or the snapshot it pins
// keeps the pages it sees from being reused.
func (db *DB) Begin(writable bool) (*Tx, error) {
	if writable {
		tx, err := db.beginRW()
		if err == nil {
			db.applyFields()
		}
		return tx, err
	}
	return db.beginRO()
}

func (db *DB) beginRO() (*Tx, error) {
	slot, before := db.readers.Enter()
	if slot == nil {
		return nil, ErrDatabaseNotOpen
	}
	// The slot's view covers its state (readers.Table.Publish) and stays
	// mapped until the slot is retired, which waits for this reader.
	tx := newTx(db, slot.Meta(), slot.View(), false)
	tx.slot = slot
	tx.yield = before%readerYieldEvery == readerYieldEvery-1
	return tx, nil
}

func (db *DB) endRO(tx *Tx) {
	db.txStats.add(&tx.stats)
	db.readers.Leave(tx.slot)
	if tx.yield {
		runtime.Gosched()
	}
}

func (db *DB) beginRW() (*Tx, error) { return db.beginRWAs(true) }

// beginRWAs begins a write transaction; counted says whether the caller
// counts in writersWaiting while it waits for the writer lock: the
// application's transactions do, compaction's steps do not (they give
// way to the others, not the reverse).
func (db *DB) beginRWAs(counted bool) (*Tx, error) {
	if db.readOnly {
		return nil, ErrDatabaseReadOnly
	}
	if counted {
		db.writersWaiting.Add(1)
		db.writer.Lock()
		db.writersWaiting.Add(-1)
	} else {
		db.writer.Lock()
	}
	db.mu.Lock()
	opened, latched := db.opened, db.latched
	db.mu.Unlock()
	if !opened {
		db.writer.Unlock()
		return nil, ErrDatabaseNotOpen
	}
	if latched != nil {
		db.writer.Unlock()
		return nil, latched
	}
	// Invariant: a page freed by txn T is released (reusable) only when no
	// reader can see a state older than T. Held returns the newest
	// published state first, then every older state a reader holds; a
	// reader that begins after it, before Release below, sees the newest
	// state at that time, which is at least the first one returned — so
	// that bounds it. steady alone does not: finishSync sets db.durable
	// before it publishes the state, and a reader that began in between,
	// on the older state, saw its pages reused (a 1 GiB bench run read a
	// leaf that the next transaction had overwritten).
	held := db.readers.Held(db.heldBuf[:0])
	// A journal write in flight publishes its state once flushed: readers
	// may begin on it before the next transaction begins, so its pages are
	// held as a reader's are.
	pending := db.jpublishing.Load()
	if len(held) > 0 && pending <= held[0].Txid {
		// A newer state is published already: Publish refuses this one,
		// so no reader will begin on it.
		pending = 0
	}
	// The same bound for young frees (spacemap.ReleaseYoung): every held
	// state, the newest included for the readers that begin later.
	snaps := db.snapshotBuf[:0]
	oldest := uint64(math.MaxUint64)
	for _, m := range held {
		snaps = append(snaps, m.Txid)
		oldest = min(oldest, m.Txid)
	}
	if pending != 0 {
		snaps = append(snaps, pending)
		oldest = min(oldest, pending)
	}
	db.recycleDeferred(oldest)
	clear(held)
	db.heldBuf, db.snapshotBuf = held[:0], snaps
	if h := db.hooks; h != nil && h.beginRWOldest != nil {
		h.beginRWOldest()
	}
	db.syncMu.Lock()
	steady := db.durable
	db.syncMu.Unlock()
	view := db.pager.Acquire()
	tx := newTx(db, db.head, view, true)
	// Under NoSync the commit leaves no record (queueJournal), so none is
	// built; if NoSync is cleared inside the transaction, it commits by a
	// sync point of the file instead.
	tx.journaling = db.jready.Load() && !db.joff.Load() && !db.noSync.Load()
	db.spaceMu.Lock()
	db.space.Release(steady, oldest)
	db.space.ReleaseYoung(snaps)
	db.space.Begin(tx.txid)
	db.spaceMu.Unlock()
	return tx, nil
}

func (db *DB) endRW(tx *Tx, committed bool) {
	if !committed && !tx.spaceEnded {
		db.spaceMu.Lock()
		db.space.Rollback()
		db.spaceMu.Unlock()
	}
	tx.view.Release()
	db.releaseRuns(tx)
	db.txStats.add(&tx.stats)
	db.writer.Unlock()
}

// releaseRuns takes back the run lists of the write transaction tx, which
// is ending, for the next one, keeps up to maxSparePages pages of their
// buffers for reuse, and drops the other references to page buffers: a
// commit has written them by now, a rollback never will. The caller holds
// the writer lock.
func (db *DB) releaseRuns(tx *Tx) {
	runs := tx.env.Runs
	tx.env.Runs = nil
	tx.env.Spares = nil
	// Buffers of up to btree.MaxSpareRun pages go back to the spares for
	// the next write transaction: a one-key commit then allocates no page
	// buffer, nor does a compaction step for the leaves it packs. Deferred
	// runs' buffers belong to the pager's dirty table, where readers may
	// be reading them.
	for _, r := range runs {
		if tx.deferred || db.spares.Pages() >= maxSparePages {
			break
		}
		db.spares.Put(r.Data, db.pageSize, maxSparePages)
	}
	clear(runs)
	db.treeRuns = keepRuns(runs)
}

// recycleDeferred gives the spares the buffers of deferred runs that left
// the pager's dirty table (docs/design.md §3.9) once no reader can be
// reading them. A buffer that left the table is tagged with head's txid
// when it is taken: every reader that could have looked one of its pages
// up holds a state no newer than head (a state is published only once it
// was head, and the writer lock holds head still), and a reader that
// begins after the buffer left finds no entry and reads the map. So the
// buffer is reused once the oldest state any reader holds is newer than
// its tag. Called by beginRW with the writer lock held, with oldest as it
// computed it.
func (db *DB) recycleDeferred(oldest uint64) {
	kept := db.retired[:0]
	for _, r := range db.retired {
		switch {
		case r.tag < oldest:
			db.spares.Put(r.buf, db.pageSize, maxSparePages)
		case len(kept) < maxRetiredBuffers:
			kept = append(kept, r)
		}
	}
	clear(db.retired[len(kept):])
	db.retired = kept
	dead := db.pager.TakeDeadBuffers(db.deadBuf[:0])
	for _, b := range dead {
		if len(db.retired) >= maxRetiredBuffers {
			break
		}
		db.retired = append(db.retired, retiredBuffer{buf: b, tag: db.head.Txid})
	}
	clear(dead)
	db.deadBuf = dead[:0]
}

// retiredBuffer is a buffer of a deferred run that left the dirty table,
// waiting for the readers that might read it (recycleDeferred).
type retiredBuffer struct {
	buf []byte
	tag uint64
}

// maxRetiredBuffers bounds the buffers waiting for readers; past it they
// are left to the garbage collector.
const maxRetiredBuffers = 2 * maxSparePages

// maxKeptRuns bounds the run lists kept between write transactions: a
// one-key commit spills a handful of runs, while a bulk load's hundreds of
// thousands would otherwise stay allocated for the life of the DB.
const maxKeptRuns = 1024

// maxSparePages bounds the page buffers kept for reuse between write
// transactions (16 MiB at 4 KiB pages): deferred pages come back from the
// dirty table a sync point at a time, hundreds of pages per sync point
// under random updates, and the commits until the next one take them
// from here; nothing a bulk load could inflate further.
const maxSparePages = 4096

// keepRuns returns runs emptied for reuse, or nil if it is too large to keep.
func keepRuns(runs []page.Run) []page.Run {
	if cap(runs) > maxKeptRuns {
		return nil
	}
	return runs[:0]
}

// latch records a failed flush (or a failed StrictMode check); from then on
// every write transaction fails with it until the DB is reopened. A failed
// write does not latch: the durable state is still certain (docs/design.md
// §3.2), and the commit that failed is rolled back instead.
func (db *DB) latch(err error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.latched == nil {
		db.latched = &latchedError{err: err}
		db.logger.Errorf("flush failed, refusing writes until reopened: %v", err)
	}
	return db.latched
}

// latchedErr returns the latched error, if any.
func (db *DB) latchedErr() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.latched
}

// durability returns the mode in force; NoSync (bbolt's field, settable
// after Open and applied by the next write transaction) means None.
func (db *DB) durability() Durability {
	if db.noSync.Load() {
		return None
	}
	return db.opts.Durability
}

type latchedError struct{ err error }

func (e *latchedError) Error() string { return ErrLatched.Error() + ": " + e.err.Error() }
func (e *latchedError) Unwrap() []error {
	return []error{ErrLatched, e.err}
}

// Update runs fn in a write transaction and commits it if fn returns nil,
// or rolls it back if fn returns an error or panics. fn must not commit or
// roll back the transaction itself.
func (db *DB) Update(fn func(*Tx) error) error { return db.update(fn, nil) }

// update is Update; beforeCommit, if not nil, runs once fn has returned
// nil, just before the commit.
func (db *DB) update(fn func(*Tx) error, beforeCommit func()) error {
	tx, err := db.Begin(true)
	if err != nil {
		return err
	}
	defer func() {
		if !tx.ended() {
			tx.rollback()
		}
	}()
	tx.managed = true
	err = fn(tx)
	tx.managed = false
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	if beforeCommit != nil {
		beforeCommit()
	}
	return tx.Commit()
}

// View runs fn in a read transaction. If the transaction met corrupt data
// (which methods without an error return, like Get, record) View returns
// that error even when fn returned nil.
func (db *DB) View(fn func(*Tx) error) error {
	tx, err := db.Begin(false)
	if err != nil {
		return err
	}
	defer func() {
		if !tx.ended() {
			tx.rollback()
		}
	}()
	tx.managed = true
	err = fn(tx)
	tx.managed = false
	corrupt := tx.env.Err
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	if err == nil {
		err = corrupt
	}
	return err
}

// Sync makes every transaction committed so far durable, in any
// durability mode, with a full flush.
func (db *DB) Sync() error {
	if db.readOnly {
		return nil
	}
	if db.isClosed() {
		return ErrDatabaseNotOpen
	}
	if err := db.latchedErr(); err != nil {
		return err
	}
	return db.syncThrough(db.headTxid(), true, nil)
}

// isClosed reports whether the DB is not open: closed, or never opened.
func (db *DB) isClosed() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return !db.opened
}

// Close waits for open transactions to finish, makes everything committed
// durable (whatever the durability mode), then releases the file. Closing
// a DB that is closed or was never opened does nothing and returns nil,
// as in bbolt.
func (db *DB) Close() error {
	if db.isClosed() {
		return nil
	}
	if db.compactStop != nil && !db.isClosed() {
		// First, so no compaction step runs into the close.
		close(db.compactStop)
		<-db.compactDone
		db.compactStop = nil
	}
	if db.bgStop != nil && !db.isClosed() {
		close(db.bgStop)
		<-db.bgDone
		db.bgStop = nil
	}
	db.closing.Store(true)
	db.bgSyncs.Wait()
	var first error
	if !db.readOnly && !db.isClosed() && db.latchedErr() == nil {
		first = db.syncThrough(db.headTxid(), true, nil)
	}
	db.writer.Lock()
	defer db.writer.Unlock()
	if first == nil && !db.readOnly && !db.isClosed() && db.latchedErr() == nil {
		first = db.writeCleanMeta()
	}
	db.mu.Lock()
	if !db.opened {
		db.mu.Unlock()
		return nil
	}
	db.opened = false
	db.mu.Unlock()
	db.readers.Close()
	if first == nil && !db.readOnly && db.latchedErr() == nil {
		// Both metas name the newest state now (writeCleanMeta) and no
		// reader is left: a tail that Compact freed, or that growth left
		// unused beyond the usual slack, goes back to the file system.
		first = db.truncateSlack()
	}
	if db.bolt != nil {
		db.bolt.close()
	}
	if err := db.pager.Close(); err != nil && first == nil {
		first = err
	}
	if first == nil && db.journals() && db.latchedErr() == nil {
		// The final sync point covers every record.
		db.removeJournal()
	}
	db.closeJournal()
	if err := db.file.Unlock(); err != nil && first == nil {
		first = err
	}
	if err := db.file.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// dbHooks let a test stop a goroutine where a race window opens and replay
// an interleaving exactly. DB.hooks is nil outside tests.
type dbHooks struct {
	// afterDurable runs in finishSync after db.durable is set, before
	// the state is published to readers.
	afterDurable func()
	// beginRWOldest runs in beginRW after the oldest snapshot still seen
	// is taken, before the steady txid is read.
	beginRWOldest func()
}

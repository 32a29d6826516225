package rivet

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime"
	"time"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// compactStepPages bounds the pages one compaction transaction rewrites: a
// writer waits for at most one step (docs/design.md §4.1). Small steps cost
// little: a step's fixed work (a commit without a flush) is small beside
// its pages.
const compactStepPages = 32

// Compact gives space back while the database stays in use (docs/design.md
// §4.1): it moves the pages that live near the end of the file into free
// space lower down, in short write transactions of at most 32 pages each
// that interleave with the application's own, lowers the database's
// high-water mark once everything above it is free, and cuts the file's
// tail when no reader and no meta on disk can still reach it. Readers are
// never blocked; a writer waits for at most one step.
//
// It returns the bytes by which the database's size (its high-water mark)
// went down. The file's length follows at once when no older reader and no
// commit in flight stands in the way, else at the next Compact, Close or
// Open. On ctx's cancellation it stops after the current step and returns
// what it released with ctx's error; a later call goes on. A file with
// nothing to give back costs a walk of its trees and no write.
//
// Options.AutoCompact runs it in the background. The file's tail is not cut
// on Windows, which refuses to truncate a mapped file; there the
// high-water mark still goes down and the space is reused.
func (db *DB) Compact(ctx context.Context) (int64, error) { return db.CompactWith(ctx, nil) }

// CompactOptions tunes one call of DB.CompactWith.
type CompactOptions struct {
	// Progress, if set, is called from the compacting goroutine after
	// every step and at every change of phase. It must return quickly:
	// the next step waits for it.
	Progress func(CompactProgress)
}

// CompactProgress is where a running compaction stands.
type CompactProgress struct {
	// Phase is "pack" (packing half-empty leaves), "relocate" (moving the
	// pages near the end of the file into free space lower down) or "cut"
	// (lowering the high-water mark and cutting the file's free tail).
	Phase string
	// Moved is the bytes of pages this call has rewritten so far.
	Moved int64
	// ToMove is what it expects to rewrite in all: Moved plus the bytes
	// still to move. It is an estimate: packing's share is known only
	// as it goes, and the application's writers can add pages above the
	// target while it runs. Moved == ToMove at the end.
	ToMove int64
}

// CompactWith is Compact with options: a progress callback.
func (db *DB) CompactWith(ctx context.Context, opts *CompactOptions) (int64, error) {
	if db.readOnly {
		return 0, ErrDatabaseReadOnly
	}
	if db.isClosed() {
		return 0, ErrDatabaseNotOpen
	}
	run := &compactRun{db: db}
	if opts != nil {
		run.progress = opts.Progress
	}
	db.mu.Lock()
	db.stats.CompactCalls++
	db.compacting = run
	db.mu.Unlock()
	defer func() {
		db.mu.Lock()
		db.compacting = nil
		db.mu.Unlock()
	}()
	before := db.headHWM()
	released := func() int64 { return int64(before-db.headHWM()) * int64(db.pageSize) }
	// Pack first: it frees pages all through the file, which the
	// relocation then fills from the top.
	run.setPhase("pack", 0)
	if err := db.compactPass(ctx, run, repackPass, 0); err != nil {
		return released(), err
	}
	// Relocate until nothing is left above the target. The target moves
	// with the application's writes, and a writer that finds no free run
	// below it for a multi-page value takes one above, so the check comes
	// again after every pass, right before the cut: a pass that found
	// nothing to move would only delay the cut and widen that window.
	for pass := 0; ; pass++ {
		// The previous pass's frees become allocatable once a sync point
		// covers them (and no reader older than them remains).
		if err := db.Sync(); err != nil {
			return released(), err
		}
		limit, ok := db.compactTarget()
		if !ok {
			break
		}
		inUse, err := db.inUseFrom(limit)
		if err != nil {
			return released(), err
		}
		if inUse == 0 || pass == maxRelocationPasses {
			break
		}
		run.setPhase("relocate", inUse)
		if err := db.compactPass(ctx, run, relocatePass, limit); err != nil {
			return released(), err
		}
	}
	run.setPhase("cut", 0)
	// The last steps freed the top of the file (a pass moves the newest
	// keys last, and appended keys lie at the top), and those pages stay
	// pending while a reader holds a state from before them.
	db.waitForReaders(db.headTxid(), compactReaderWait)
	if err := db.shrinkTail(run); err != nil {
		return released(), err
	}
	if err := db.Sync(); err != nil {
		return released(), err
	}
	// The file is not cut below the HWM of a state a reader holds: the
	// readers that began before the shrink are let move on first.
	db.waitForReaders(db.headTxid(), compactReaderWait)
	return released(), db.truncateTail(run, true)
}

// A compactRun is one call of CompactWith: its progress, which DB.Stats
// also reports, and how long it has held the writer lock at once.
// Invariant: moved and toMove change only on the compacting goroutine,
// under db.mu (Stats reads them under it).
type compactRun struct {
	db       *DB
	progress func(CompactProgress)
	phase    string
	moved    int64 // pages rewritten
	toMove   int64 // pages rewritten plus pages still to move
	// lastYield is when yieldProcessor last yielded.
	lastYield time.Time
	// unwaited counts the pages rewritten since compaction last waited
	// for the file's writeback (paceWriteback).
	unwaited int64
	// leafEnd is the page after the last leaf the run's steps wrote: the
	// next step's leaves go at or after it (compactAllocator).
	leafEnd page.ID
}

// compactWritebackBytes is how much compaction writes before it waits for
// the file's dirty pages to reach storage: a compaction moving gigabytes
// would otherwise leave them all dirty, for the kernel to throttle some
// later write on (perhaps one holding the writer lock) and for the
// writers' flushes to wait on. It is small because a writer's flush also
// waits for whatever compaction has in the device's queue when it comes.
const compactWritebackBytes = 1 << 20

// paceWriteback waits, outside the writer lock, for the file's writeback
// once compaction has written compactWritebackBytes since the last wait.
func (r *compactRun) paceWriteback() {
	if r.unwaited*int64(r.db.pageSize) < compactWritebackBytes {
		return
	}
	r.unwaited = 0
	r.db.pager.WaitWriteback()
	if r.db.journals() {
		// Journaled commits make no sync point of the file, and the
		// pages this run and the writers free become reusable only at
		// one: a checkpoint now, while what it must flush was just
		// written back, keeps them coming.
		r.db.startBackgroundSync(r.db.headTxid())
	}
}

// compactAllocator is a compaction step's allocator: a transaction's
// usual one, except that each leaf goes to the lowest free run at or
// after the end of the leaf written before it (spacemap.AllocateFrom),
// across steps, rather than to the lowest free run. A step writes its
// leaves in key order and the next step goes on from the key where it
// stopped, so the leaves a pass moves follow one another on disk in key
// order; first fit would put each step's first leaves into the holes the
// steps before it left (the branches they copied again), out of order.
// Branches still go first fit: the next steps copy them again, and their
// holes are for them.
type compactAllocator struct {
	spaceAllocator
	run *compactRun
}

// AllocateLeaf places a leaf after the one the run wrote last.
func (a compactAllocator) AllocateLeaf(n uint64) (page.ID, error) {
	a.tx.spaceOps++
	db := a.tx.db
	db.spaceMu.Lock()
	defer db.spaceMu.Unlock()
	id, err := db.space.AllocateFrom(n, a.run.leafEnd)
	if err == nil {
		a.run.leafEnd = id + n
	}
	return id, err
}

// setPhase starts phase, with pages still to move in it, and reports it.
func (r *compactRun) setPhase(phase string, pages uint64) {
	r.db.mu.Lock()
	r.phase = phase
	r.toMove = max(r.moved+int64(pages), r.moved)
	r.db.mu.Unlock()
	r.report()
}

// stepDone counts a committed step's rewritten pages and reports them.
func (r *compactRun) stepDone(pages uint64) {
	r.db.mu.Lock()
	r.moved += int64(pages)
	r.unwaited += int64(pages)
	r.toMove = max(r.toMove, r.moved)
	r.db.stats.CompactSteps++
	r.db.stats.CompactPagesRewritten += int64(pages)
	r.db.mu.Unlock()
	r.report()
}

// held notes that compaction held the writer lock for d at once.
func (r *compactRun) held(d time.Duration) {
	r.db.mu.Lock()
	r.db.stats.CompactLongestHold = max(r.db.stats.CompactLongestHold, d)
	r.db.mu.Unlock()
}

func (r *compactRun) report() {
	if r.progress == nil {
		return
	}
	r.db.mu.Lock()
	p := r.snapshot()
	r.db.mu.Unlock()
	r.progress(p)
}

// snapshot is the progress in bytes; the caller holds db.mu.
func (r *compactRun) snapshot() CompactProgress {
	ps := int64(r.db.pageSize)
	return CompactProgress{Phase: r.phase, Moved: r.moved * ps, ToMove: r.toMove * ps}
}

// inUseFrom returns the pages in use at or above limit: what a relocation
// to below it must move.
func (db *DB) inUseFrom(limit page.ID) (uint64, error) {
	db.writer.Lock()
	defer db.writer.Unlock()
	db.spaceMu.Lock()
	defer db.spaceMu.Unlock()
	return db.space.InUseFrom(limit)
}

// maxRelocationPasses bounds the relocation passes of one Compact: a pass
// moves everything above its target, and the next only what the
// application's writes put above the new target meanwhile.
const maxRelocationPasses = 3

// headHWM returns the high-water mark of the newest committed state.
func (db *DB) headHWM() uint64 {
	db.writer.Lock()
	defer db.writer.Unlock()
	return db.head.HWM
}

// compactTarget returns the page the live state would fit below, with
// slack, and whether moving what lies above it is worth a pass: the HWM
// must be more than 1/16 (at least 16 pages) above it.
func (db *DB) compactTarget() (page.ID, bool) {
	db.spaceMu.Lock()
	s := db.space.Stats()
	db.spaceMu.Unlock()
	live := s.HWM - min(s.HWM, s.FreePages)
	slack := max(live/16, 16)
	target := max(live+slack, page.MinPages)
	return target, target < s.HWM
}

// A compactPos is where a compaction pass goes on: in the tree of the
// bucket at path (names from the top level down) at key, and then in that
// bucket's nested buckets and everything after it. The zero value is the
// start; a pass visits a bucket's own tree before its nested buckets, and
// those in name order.
type compactPos struct {
	path [][]byte
	key  []byte
}

// A compactStep is the state of one compaction transaction's walk.
type compactStep struct {
	limit page.ID // relocation: the page nothing may remain at or above
	// budget: the pages the step may still rewrite, and the nodes read.
	budget btree.Budget
	// fragmented: only single-page nodes move (compactFragmented).
	fragmented bool
	// scanned counts the keys read looking for nested buckets.
	scanned int
}

// compactStepScan bounds the keys one step reads looking for nested
// buckets (well under a millisecond): a bucket of millions of plain keys
// is scanned over many steps rather than in one hold of the writer lock.
const compactStepScan = 8192

// compactStepVisits bounds the pages of the nodes one step reads (about a
// millisecond of checksummed reads): a stretch of the file with nothing to
// rewrite ends a step rather than holding the writer lock for a whole pass.
const compactStepVisits = 512

// A compactPassFunc marks for rewriting what one pass changes in b's own
// tree, from key from on, within the step's budget; next is the key to
// resume at when the budget ran out.
type compactPassFunc func(b *Bucket, from []byte, st *compactStep) (next []byte, err error)

// compactPass walks every tree once, in steps of at most compactStepPages
// pages, each its own write transaction. With a limit (relocation), every
// step's allocations stay below it. A step that finds no run below the
// limit for something it moves is retried: first after a sync point (frees
// still pending may be what it lacks), then fragmented (blobs in one-page
// extents, multi-page nodes left in place for a later call); if that too
// fails, the pass ends.
func (db *DB) compactPass(ctx context.Context, run *compactRun, pass compactPassFunc, limit page.ID) error {
	// Each pass walks the keys from the first: its leaves start a stream
	// of their own, from the lowest free run.
	run.leafEnd = 0
	pos := &compactPos{}
	level := compactNormal
	var held time.Duration // how long the last step held the writer lock
	for pos != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		run.paceWriteback()
		db.yieldToWriters(held)
		run.yieldProcessor()
		var next *compactPos
		var err error
		next, held, err = db.compactStep(run, pass, limit, level, pos)
		if errors.Is(err, spacemap.ErrLimit) {
			switch level {
			case compactNormal:
				if err := db.Sync(); err != nil {
					return err
				}
				level = compactSynced
			case compactSynced:
				level = compactFragmented
			default:
				return nil
			}
			continue
		}
		if err != nil {
			return err
		}
		pos, level = next, compactNormal
	}
	return nil
}

// yieldToWriters lets the application's writers go between two
// compaction steps. It waits while writersNeedTurn says they want the
// lock or a flush, but for at most compactYieldShare times as long as the
// last step held the writer lock, and between compactMinYield and
// compactYield. Writers that commit back to back leave the lock idle only
// for microseconds, so a wait until it is idle would end only at its
// bound: that bound, proportional to the step, gives compaction about a
// third of the time against such writers, and all of it on an idle
// database. A writer waits for at most the one step that holds the lock
// when it arrives.
func (db *DB) yieldToWriters(held time.Duration) {
	deadline := time.Now().Add(min(max(compactYieldShare*held, compactMinYield), compactYield))
	for time.Now().Before(deadline) {
		if !db.writersNeedTurn() {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// writersNeedTurn reports whether a compaction step begun now would hold
// up a writer: writers wait for the writer lock (Go's mutex is not FIFO,
// and a compaction looping over steps would otherwise often win it
// again), or, without a journal, a sync point is in flight (a step run
// meanwhile adds its pages to the flush after it, which the durable
// writers then wait for). A journaled commit waits for a journal write,
// never for the file's sync points (the checkpoints), so with a journal a
// checkpoint in flight is no reason to wait: compaction starts one after
// each of its writeback waits (paceWriteback), and its steps would
// otherwise wait out their bound during every one of them.
func (db *DB) writersNeedTurn() bool {
	if db.writersWaiting.Load() > 0 {
		return true
	}
	if db.journals() {
		return false
	}
	db.syncMu.Lock()
	defer db.syncMu.Unlock()
	return db.syncing
}

// yieldProcessor lets other goroutines run once compaction has run for
// compactSlice since it last did. Compaction runs flat out between its
// waits, and a goroutine that needs a processor — a writer back from its
// flush, a reader the scheduler preempted — would otherwise wait for Go's
// time slice (10 ms) to end, on a machine with as many busy goroutines as
// processors. Yielding after every step instead would wait for the other
// goroutines' turns at every step, which against a writer committing back
// to back slows compaction more than it helps the writer.
func (r *compactRun) yieldProcessor() {
	if time.Since(r.lastYield) < compactSlice {
		return
	}
	runtime.Gosched()
	r.lastYield = time.Now()
}

// compactSlice is how long compaction runs before yieldProcessor lets
// other goroutines have its processor.
const compactSlice = 500 * time.Microsecond

// Bounds of yieldToWriters' wait: compactYieldShare times the last step's
// hold of the writer lock, at least compactMinYield and at most
// compactYield.
const (
	compactYieldShare = 2
	compactMinYield   = 200 * time.Microsecond
	compactYield      = 20 * time.Millisecond
)

// How hard a compaction step tries to fit what it moves below its limit.
const (
	compactNormal     = iota
	compactSynced     // retried after a sync point
	compactFragmented // blobs in one-page extents, multi-page nodes stay
)

// compactStep runs one step of a pass from pos, in one write transaction,
// and returns where the next step starts (nil: the pass is done).
// held is how long the step held the writer lock.
func (db *DB) compactStep(run *compactRun, pass compactPassFunc, limit page.ID, level int, pos *compactPos) (_ *compactPos, held time.Duration, err error) {
	tx, err := db.beginRWAs(false)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	defer func() {
		held = time.Since(start)
		run.held(held)
	}()
	tx.lazy = true
	tx.journaling = false
	tx.env.Alloc = compactAllocator{spaceAllocator{tx}, run}
	leafEnd := run.leafEnd
	if level == compactFragmented {
		tx.env.MaxExtentPages = 1
	}
	if limit != 0 {
		db.spaceMu.Lock()
		db.space.SetLimit(limit)
		db.spaceMu.Unlock()
	}
	budget := db.compactBudget
	if budget == 0 {
		budget = compactStepPages
	}
	st := &compactStep{limit: limit, fragmented: level == compactFragmented,
		budget: btree.Budget{Pages: budget, MaxVisits: max(compactStepVisits, budget)}}
	next, err := tx.root.compactWalk(pass, pos.path, pos.key, st)
	if err != nil {
		_ = tx.Rollback()
		return nil, 0, err
	}
	if st.budget.Pages == budget {
		// Nothing to rewrite in this stretch.
		return next, 0, tx.Rollback()
	}
	rewritten := budget - st.budget.Pages
	if err := tx.Commit(); err != nil {
		run.leafEnd = leafEnd // the step's leaves are not written
		return nil, 0, err
	}
	run.stepDone(rewritten)
	return next, 0, nil
}

// compactWalk runs pass over b's tree (unless path names one of b's nested
// buckets to resume in) and then over its nested buckets, from path and
// key on. It returns where to resume, relative to b, when the step's budget
// ran out, or nil when b and everything under it are done.
func (b *Bucket) compactWalk(pass compactPassFunc, path [][]byte, key []byte, st *compactStep) (*compactPos, error) {
	if len(path) == 0 {
		next, err := pass(b, key, st)
		if err != nil || next != nil {
			return &compactPos{key: next}, err
		}
	}
	// The nested buckets from path[0] on, one at a time: collecting every
	// name first cost each step a scan of all of b's keys, and a bucket
	// of 100,000 nested buckets a pass O(n^2).
	var start []byte
	if len(path) > 0 {
		start = path[0]
	}
	first := true
	c := b.tree.Cursor()
	for k, _, flags, ok := c.Seek(start); ok; k, _, flags, ok = c.Next() {
		if flags != page.FlagBucket {
			if st.scanned++; st.scanned >= compactStepScan {
				// Resume the scan here; a plain key at the head of
				// path names no bucket to enter.
				return &compactPos{path: [][]byte{bytes.Clone(k)}}, nil
			}
			continue
		}
		name := bytes.Clone(k)
		var subPath [][]byte
		var subKey []byte
		if first && len(path) > 0 && bytes.Equal(name, path[0]) {
			subPath, subKey = path[1:], key
		}
		first = false
		if st.budget.Spent() && subPath == nil {
			return &compactPos{path: [][]byte{name}}, nil
		}
		c := b.Bucket(name)
		if c == nil {
			return nil, firstErr(b.tx.env.Err, ErrBucketNotFound)
		}
		r, err := c.compactWalk(pass, subPath, subKey, st)
		if err != nil {
			return nil, err
		}
		if r != nil {
			return &compactPos{path: append([][]byte{name}, r.path...), key: r.key}, nil
		}
	}
	return nil, b.tx.env.Err
}

// relocatePass marks the runs of b's tree at or above the step's limit for
// rewriting: nodes are touched (Spill copies them below the limit, packing
// moved leaves), blobs put again.
func relocatePass(b *Bucket, from []byte, st *compactStep) ([]byte, error) {
	maxRun := uint64(0)
	if st.fragmented {
		maxRun = 1
	}
	nodes, blobs, pages, next, err := b.tree.Above(st.limit, maxRun, from, &st.budget)
	if err != nil {
		return nil, err
	}
	st.budget.Pages -= min(pages, st.budget.Pages)
	if err := touchForRepack(b, nodes); err != nil {
		return nil, err
	}
	for _, k := range blobs {
		// Put again: the new copy is written at spill, below the limit,
		// and the old extents are freed.
		if err := b.Put(k, bytes.Clone(b.Get(k))); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// repackPass marks the sparse leaves of b's tree for packing (btree.Tree.Sparse).
func repackPass(b *Bucket, from []byte, st *compactStep) ([]byte, error) {
	leaves, pages, next, err := b.tree.Sparse(from, &st.budget)
	if err != nil {
		return nil, err
	}
	st.budget.Pages -= min(pages, st.budget.Pages)
	return next, touchForRepack(b, leaves)
}

// touchForRepack materialises the nodes holding keys in b's tree so that
// Spill rewrites them, and has Rebalance pack the leaves among them.
func touchForRepack(b *Bucket, keys [][]byte) error {
	b.tree.Repack = true
	for _, k := range keys {
		if err := b.tree.Touch(k); err != nil {
			return err
		}
	}
	return nil
}

// compactReaderWait bounds how long Compact waits for readers to leave
// older states, before the shrink (their frees stay pending while they
// are held) and before the cut (the file keeps the pages they can reach):
// readers that hold a state longer (a backup, a long scan) leave those
// pages where they are, and the file that much longer.
const compactReaderWait = 50 * time.Millisecond

// waitForReaders waits, at most d, until every open read transaction
// began on a state of txid or newer.
func (db *DB) waitForReaders(txid uint64, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		held := db.readers.Held(nil)
		oldest := uint64(math.MaxUint64)
		for _, m := range held {
			oldest = min(oldest, m.Txid)
		}
		if oldest >= txid || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// shrinkTail lowers the high-water mark to the start of the free tail, in a
// transaction of its own. The spacemap refuses to shrink while a sync point
// is in flight, so shrinkTail first takes the sync leadership (waiting for
// the sync point in flight) and holds it until the shrink is recorded.
//
// Lock order: leadership before the writer lock, as syncThrough takes them;
// a writer holding the writer lock only ever tries the leadership
// (claimSync), so it cannot wait for us.
func (db *DB) shrinkTail(run *compactRun) error {
	db.syncMu.Lock()
	for db.syncing {
		db.syncCond.Wait()
	}
	db.syncing = true
	db.syncMu.Unlock()
	tx, err := db.beginRW()
	if err != nil {
		db.releaseSync()
		return err
	}
	start := time.Now()
	defer func() { run.held(time.Since(start)) }()
	db.spaceMu.Lock()
	tail, err := db.space.FreeTail()
	shrunk := false
	if err == nil && tail < db.space.HWM() {
		if err = db.space.ShrinkTo(tail); err == nil {
			shrunk = true
		}
	}
	db.spaceMu.Unlock()
	// The commit below leads (or joins) a sync point of its own.
	db.releaseSync()
	if err != nil || !shrunk {
		_ = tx.Rollback()
		return err
	}
	tx.spaceOps++
	return tx.Commit()
}

// truncateTail cuts the file down to what the newest state, both metas on
// disk and every open reader can reach (docs/design.md §4.1). With
// cleanMeta, and nothing in flight, it first writes the newest state into
// the other meta slot as Close does, so that both metas name it.
//
// The size is found under the writer lock, and the cut goes on without it:
// the pager keeps whatever commits write or map after that (BeginCut), so
// they need not wait for the cut, only for the piece in progress when they
// write. Cutting a file costs a fixed time per call where the file system
// discards what it frees, and time in proportion to what it drops
// everywhere, so the pieces are sized by time (nextTruncateChunk).
func (db *DB) truncateTail(run *compactRun, cleanMeta bool) error {
	db.writer.Lock()
	if cleanMeta {
		if err := db.writeCleanMeta(); err != nil {
			db.writer.Unlock()
			return err
		}
		db.syncMu.Lock()
		moved := db.head.Txid != db.durable
		db.syncMu.Unlock()
		if moved {
			// A commit came in after the last sync point, so no clean
			// meta: a sync point for it puts a state of the shrunk file
			// into the other meta slot instead, so that neither slot
			// holds the HWM from before the shrink. (Without a journal
			// the writer's own sync points do that soon enough; a
			// journaled commit writes no meta.)
			db.writer.Unlock()
			if err := db.Sync(); err != nil {
				return err
			}
			db.writer.Lock()
		}
	}
	to, ok := db.cutSize()
	if ok {
		db.pager.BeginCut(to)
	}
	db.writer.Unlock()
	if !ok {
		return nil
	}
	chunk := int64(truncateFirstChunk)
	for {
		run.yieldProcessor()
		start := time.Now()
		more, err := db.pager.Cut(chunk)
		held := time.Since(start)
		run.held(held)
		if err != nil || !more {
			return err
		}
		chunk = nextTruncateChunk(chunk, held)
	}
}

// nextTruncateChunk sizes truncateTail's next piece from how long the
// last one, of chunk bytes, took: doubled while a piece takes less than
// truncateHold, halved once one takes more than twice that, within
// truncateMinChunk and truncateMaxChunk. A piece's time has a part that
// does not depend on its size (a discard waiting behind the device's other
// writes), so a rule that halved whenever a piece took longer than the
// target would cut a megabyte at a time where every piece costs the same;
// one that never halved would hold the file's writes long where a
// megabyte costs much.
func nextTruncateChunk(chunk int64, held time.Duration) int64 {
	switch {
	case held < truncateHold:
		chunk *= 2
	case held > 2*truncateHold:
		chunk /= 2
	}
	return min(max(chunk, truncateMinChunk), truncateMaxChunk)
}

// Bounds of truncateTail's pieces: the time one aims to take, and the
// first, least and most it cuts at once. The time is short because a
// piece is one system call, and Go lets another goroutine have the
// processor of one blocked in a system call only once its monitor thread
// notices (which it does less often, up to every 10 ms, the longer it
// finds nothing to do): a goroutine queued on compaction's processor, such
// as a reader that yielded, waits for the whole piece.
const (
	truncateHold       = 4 * time.Millisecond
	truncateFirstChunk = 8 << 20
	truncateMinChunk   = 1 << 20
	truncateMaxChunk   = 256 << 20
)

// cutSize returns the size the file may be cut to: the largest HWM of the
// newest state, of both metas on disk and of every open reader's
// snapshot. ok is false when a meta slot's HWM is unknown (it did not
// decode at Open, or is being written), or the file must not be cut here.
// The caller holds the writer lock, so no commit grows the HWM meanwhile.
func (db *DB) cutSize() (size int64, ok bool) {
	if runtime.GOOS == "windows" || db.readOnly {
		// Windows refuses to truncate a file below a mapped view.
		return 0, false
	}
	db.syncMu.Lock()
	slots := db.slotMeta
	db.syncMu.Unlock()
	if slots[0] == nil || slots[1] == nil {
		return 0, false
	}
	cut := max(slots[0].HWM, slots[1].HWM)
	cut = max(cut, db.head.HWM)
	// Invariant: the file is never cut below the HWM of a state a reader
	// holds or may begin on: Held returns the newest published state and
	// every older one a reader is counted on, and retires the others, so
	// a reader that begins later counts itself on one of those.
	held := db.readers.Held(db.heldBuf[:0])
	for _, m := range held {
		cut = max(cut, m.HWM)
	}
	clear(held)
	db.heldBuf = held[:0]
	return int64(cut) * int64(db.pageSize), true
}

// truncateSlack cuts the file to cutSize in one call if it is longer by
// more than truncateExcess. The caller holds the writer lock, or is Open
// or Close with nothing else running.
func (db *DB) truncateSlack() error {
	to, ok := db.cutSize()
	if !ok {
		return nil
	}
	size, err := db.file.Size()
	if err != nil {
		return err
	}
	if size-to <= truncateExcess(size) {
		return nil
	}
	return db.pager.Truncate(to)
}

// truncateExcess is the slack Close and Open leave alone: growth steps are
// at most 1/16 of the file (or 16 MiB), so a file more than 1/8 (and 1 MiB)
// longer than anything needs has space to give back.
func truncateExcess(size int64) int64 { return max(size/8, 1<<20) }

// autoCompactFraction is the free part of the database above which
// AutoCompact compacts: cfg.FreeFraction (0.25 if unset), but at least 0.1
// above a locality slack — the free space a slack keeps on purpose is not
// waste, and compacting it away would only make the next commits grow the
// file again (Options.LocalitySlack).
func autoCompactFraction(cfg AutoCompact, slack float64) float64 {
	fraction := cfg.FreeFraction
	if fraction <= 0 {
		fraction = 0.25
	}
	if slack > 0 {
		fraction = max(fraction, slack+0.1)
	}
	return fraction
}

// autoCompactor runs Compact whenever free pages make up more than
// cfg.FreeFraction of the database, looking every cfg.Interval, until Close
// stops it (cancelling a compaction in progress after its current step).
func (db *DB) autoCompactor(cfg AutoCompact) {
	defer close(db.compactDone)
	interval := cfg.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	fraction := autoCompactFraction(cfg, db.opts.LocalitySlack)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-db.compactStop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	idle, skip := 0, 0 // calls in a row that gave nothing back; ticks to let pass
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if skip > 0 {
			skip--
			continue
		}
		db.spaceMu.Lock()
		s := db.space.Stats()
		db.spaceMu.Unlock()
		if s.HWM == 0 || float64(s.FreePages) <= fraction*float64(s.HWM) {
			idle = 0
			continue
		}
		released, err := db.Compact(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			db.logger.Errorf("automatic compaction: %v", err)
			if db.latchedErr() != nil || db.isClosed() {
				return
			}
			// A failed write (a full disk) rolled its step back: try
			// again later, backing off as when nothing is given back.
			idle = min(idle+1, maxAutoCompactBackoff)
			skip = 1<<idle - 1
		case released > 0:
			db.logger.Infof("automatic compaction gave back %d bytes of state", released)
			idle = 0
		default:
			// Nothing given back although free pages are many: they
			// cannot move yet (a reader holds them, or they lie where
			// nothing fits). Each call still reads the trees, so look
			// again after 2, 4, ... up to 64 intervals.
			idle = min(idle+1, maxAutoCompactBackoff)
			skip = 1<<idle - 1
		}
	}
}

// maxAutoCompactBackoff caps the automatic compactor's backoff at 2^6 = 64
// intervals between calls that give nothing back.
const maxAutoCompactBackoff = 6

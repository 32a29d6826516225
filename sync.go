package rivet

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
	"github.com/rivetkv/rivet/internal/spacemap"
	"github.com/rivetkv/rivet/internal/vfs"
)

// The commit pipeline (docs/design.md §3.3).
//
// A commit first commits in memory: it writes its data pages (no flush) and
// becomes db.head, the state the next write transaction builds on. A sync
// point then makes head durable: it writes the changed region maps and a
// meta for head, and flushes once. Only one sync point is in flight at a
// time (db.syncing). While it flushes — without the writer lock — later
// transactions commit in memory and wait; the next sync point covers all of
// them with one flush. That is group commit: N concurrent Updates cost
// about two flushes, not N.
//
// The states (head, base, published, durable, flushed) and the lock order
// are defined with the DB's fields (db.go).
//
// Invariant: db.durable (the steady txid) only grows, and only after the
// flush that made it durable returned nil.
//
// A sync point whose writes fail (before its flush) takes back every
// commit after db.base (abortSync): those are the commits still waiting
// for it, never seen by a reader. Only a failed flush latches
// (docs/design.md §3.2).

// syncJob is a prepared sync point: its maps and meta are written, the
// flush is still to come.
type syncJob struct {
	meta *page.Meta
	slot int
	kind vfs.SyncKind
	img  spacemap.SyncImage
}

// claimSync makes the caller the sync leader if no sync point is in flight.
func (db *DB) claimSync() bool {
	db.syncMu.Lock()
	defer db.syncMu.Unlock()
	if db.syncing {
		return false
	}
	db.syncing = true
	return true
}

// releaseSync ends the caller's leadership and wakes the waiters.
func (db *DB) releaseSync() {
	db.syncMu.Lock()
	db.syncing = false
	db.syncCond.Broadcast()
	db.syncMu.Unlock()
}

// syncKind picks the flush primitive for the next sync point.
func (db *DB) syncKind(forceFull bool) vfs.SyncKind {
	d := db.durability()
	if forceFull || d.mode != modeBarrier {
		return vfs.SyncData
	}
	db.syncMu.Lock()
	defer db.syncMu.Unlock()
	if time.Since(db.lastFullSync) >= d.interval {
		return vfs.SyncData
	}
	return vfs.SyncBarrier
}

// prepareSync writes, together with extra (a commit's data pages, so a
// lone commit still costs one write call per contiguous run), the region
// maps and then the meta of db.head. The caller holds the writer lock and
// the sync leadership. It returns nil when head is already durable.
//
// On success every commit so far is sealed: only a failed flush can fail
// it now, and that latches. If a write fails, the sync point never
// happened (abortSync): the commits after db.base are taken back and the
// error is returned, to the caller and to the commits waiting for it.
func (db *DB) prepareSync(kind vfs.SyncKind, extra []page.Run) (*syncJob, error) {
	head := db.head
	db.syncMu.Lock()
	steady, slot := db.durable, 1-db.durableSlot
	db.syncMu.Unlock()
	// The pages commits deferred go to the file before the meta that
	// names them (the flush below covers both).
	if err := db.pager.WriteDeferred(); err != nil {
		return nil, db.abortSync(nil, err)
	}
	if head.Txid == steady {
		if len(extra) > 0 {
			if err := db.pager.WriteRuns(extra); err != nil {
				return nil, db.abortSync(nil, err)
			}
		}
		db.sealSynced()
		return nil, nil
	}
	db.spaceMu.Lock()
	img := db.space.PrepareSync(head.Txid)
	db.spaceMu.Unlock()
	meta := *head
	meta.Steady = steady
	meta.Selector = img.Selector
	meta.Changed = img.Changed
	meta.Delta = img.Delta
	meta.FreePages = img.FreePages
	meta.FirstFreeRegion = img.FirstFreeRegion
	if db.journals() && !db.jready.Load() {
		// The sync point that makes records trusted names their salt.
		db.jsalt = db.journalSalt(&meta, db.jsaltOpened)
	}
	meta.JournalSalt = db.jsalt
	// The writer lock is held and WriteRuns returns only after the write,
	// so one buffer serves every sync point.
	if db.metaBuf == nil {
		db.metaBuf = make([]byte, db.pageSize)
	}
	buf := db.metaBuf
	page.EncodeMeta(buf, &meta)

	if err := db.pager.WriteRuns(slices.Concat(extra, img.Pages)); err != nil {
		return nil, db.abortSync(&img, err)
	}
	// The meta last, on its own: when a write before it fails, no meta
	// names the taken-back commits, so no crash can bring them back. When
	// the meta's own write fails, restoreMetaSlot takes care of that.
	if err := db.pager.WriteRuns([]page.Run{{ID: page.ID(slot), Data: buf}}); err != nil {
		db.restoreMetaSlot(slot)
		return nil, db.abortSync(&img, err)
	}
	db.sealSynced()
	return &syncJob{meta: &meta, slot: slot, kind: kind, img: img}, nil
}

// sealSynced seals every commit so far, once the sync point taking them up
// is written.
func (db *DB) sealSynced() {
	// Every commit so far is taken up by this sync point (or was by one
	// before).
	db.lastSyncCommits.Store(db.unsyncedCommits.Swap(0))
	db.seal()
}

// abortSync ends a sync point whose writes failed (err) before its flush.
// The steady meta and the maps it names were not written (invariants 2
// and 3), so the durable state is certain and nothing latches: the free
// space map takes back the image (if one was prepared) and every commit
// after db.base, head goes back to base, and the commits waiting for this
// sync point learn that they were rolled back. The caller holds the
// writer lock and the sync leadership. It returns the error the commits
// report.
func (db *DB) abortSync(img *spacemap.SyncImage, err error) error {
	db.spaceMu.Lock()
	if img != nil {
		db.space.AbortSync(*img)
	}
	undone := db.space.Undo()
	db.spaceMu.Unlock()
	err = fmt.Errorf("rivet: sync point failed to write (commits rolled back: %d): %w", undone, err)
	db.head = db.base
	db.dropJournalAfter(db.base.Txid)
	// undone may count compaction steps, which unsyncedCommits does not;
	// the writer lock keeps commits from changing it meanwhile.
	db.unsyncedCommits.Store(max(0, db.unsyncedCommits.Load()-int64(undone)))
	db.commits.Add(-int64(undone))
	if db.chain != nil {
		db.syncMu.Lock()
		db.chain.err = err
		db.syncMu.Unlock()
		db.chain = nil
	}
	db.logger.Warningf("%v", err)
	return err
}

// finishSync flushes a prepared sync point and makes it the steady state.
// It runs without the writer lock, so transactions go on meanwhile.
func (db *DB) finishSync(job *syncJob) error {
	start := time.Now()
	if err := db.pager.Sync(job.kind); err != nil {
		return db.latch(err)
	}
	db.lastFlushNs.Store(int64(time.Since(start)))
	db.spaceMu.Lock()
	db.space.SyncDone(job.img)
	stats := db.space.Stats()
	db.spaceMu.Unlock()

	db.syncMu.Lock()
	db.durable = job.meta.Txid
	db.durableSlot = job.slot
	db.slotMeta[job.slot] = job.meta
	if job.kind == vfs.SyncData {
		db.lastFullSync = time.Now()
		db.flushed = job.meta.Txid
	}
	db.logged = max(db.logged, job.meta.Txid)
	db.syncMu.Unlock()
	if db.journals() && job.meta.JournalSalt == db.jsalt {
		// Records written from now on are trusted by recovery: a durable
		// meta names their salt.
		db.jready.Store(true)
	}
	if h := db.hooks; h != nil && h.afterDurable != nil {
		h.afterDurable()
	}

	// In Full and Barrier mode this is where readers first see the
	// transactions of this sync point; in the others they saw them at
	// commit, and this only records the selector for the stats (unless
	// later commits are published already).
	db.readers.Publish(job.meta, db.pager.Acquire())
	db.mu.Lock()
	db.spaceStats = stats
	db.mu.Unlock()
	return nil
}

// syncThrough makes every transaction up to txid durable, leading sync
// points itself whenever none is in flight; with forceFull, durable by a
// full flush (a Barrier sync point's barrier does not count). Called
// without the writer lock.
//
// A commit passes its chain: if a sync point fails to write and takes the
// commit back, syncThrough returns that error (txid may then be reused by
// a later commit, so durable >= txid alone does not say the commit is
// durable). It returns early, with nil, when head itself is durable: a
// transaction above it was taken back.
func (db *DB) syncThrough(txid uint64, forceFull bool, w *commitChain) error {
	return db.syncThroughPaced(txid, forceFull, w, false)
}

// syncThroughPaced is syncThrough; with paced, the sync points it leads
// write their deferred pages back piece by piece, pausing between pieces
// while nobody waits for them (paceCheckpoint). Background sync points
// are paced: no commit is waiting for them.
func (db *DB) syncThroughPaced(txid uint64, forceFull bool, w *commitChain, paced bool) error {
	done := func() bool { return db.durable >= txid && (!forceFull || db.flushed >= txid) }
	db.syncMu.Lock()
	for {
		lead, err := db.waitOrLead(w, done, &db.syncing)
		db.syncMu.Unlock()
		if !lead {
			return err
		}

		db.lingerForCommits()
		var between func(lo, hi int64)
		if paced {
			between = db.paceCheckpoint
		}
		db.writeDeferredUnlocked(between)
		db.writer.Lock()
		job, err := db.prepareSync(db.syncKind(forceFull), nil)
		db.writer.Unlock()
		switch {
		case err == nil && job != nil:
			err = db.finishSync(job)
		case err == nil && forceFull:
			// Head is steady, perhaps only behind a barrier.
			err = db.flushSteady()
		}
		db.releaseSync()
		if err != nil || job == nil {
			return err
		}
		db.syncMu.Lock()
	}
}

// writeDeferredUnlocked writes most deferred pages to the file before a
// sync point's leader takes the writer lock, so that commits go on
// meanwhile; prepareSync writes those deferred since, under the lock.
// Writing them early is safe (pager.WriteDeferred), and a failure leaves
// them in the table for prepareSync, which reports it. In pieces, with
// between (if set) run after each: a commit defers its pages through the
// same pager lock. The first sweep takes the runs deferred before it
// began; commits defer more while it runs (a paced sweep may take many
// milliseconds, and a journaled commit may defer hundreds of pages), so
// unpaced sweeps follow while more than a piece is left, at most
// maxDeferredSweeps in all: what remains for the lock is what commits
// deferred during the last sweep.
func (db *DB) writeDeferredUnlocked(between func(lo, hi int64)) {
	_ = db.pager.WriteDeferredInPieces(deferredPiecePages, between)
	for range maxDeferredSweeps - 1 {
		if db.pager.DeferredPages() <= deferredPiecePages {
			return
		}
		_ = db.pager.WriteDeferredInPieces(deferredPiecePages, nil)
	}
}

// maxDeferredSweeps bounds the sweeps writeDeferredUnlocked makes over
// the dirty table, so that commits deferring as fast as it writes cannot
// keep a sync point from taking the lock.
const maxDeferredSweeps = 4

// deferredPiecePages is how many deferred pages a sync point writes
// before it lets a commit through the pager (WriteDeferredInPieces).
const deferredPiecePages = 64

// maxCheckpointPause bounds one pause of a paced sync point
// (paceCheckpoint).
const maxCheckpointPause = 2 * time.Millisecond

// paceCheckpoint runs between the pieces of deferred pages a background
// sync point writes: it writes the piece back to the device and waits for
// it, then pauses as long as that took. Written at once, a checkpoint's
// pages reach the device in one burst at its flush, and every journal
// flush issued meanwhile queues behind the burst (docs/design.md §3.9);
// paced, the device serves those flushes between pieces. It does neither
// while a commit or Sync waits for a sync point, the journal has outrun
// its checkpoints (db.jbehind), or Close is under way: then the sync
// point is what someone waits for. Nor while the deferred pages pass a
// quarter of their bound: commits defer pages faster than a paced sync
// point writes them, and at the bound a commit would write them all.
func (db *DB) paceCheckpoint(lo, hi int64) {
	if db.syncWaiters.Load() > 0 || db.jbehind.Load() || db.closing.Load() ||
		db.pager.DeferredPages()*int64(db.pageSize) > maxDeferredBytes/4 {
		return
	}
	start := time.Now()
	if !db.pager.WaitWritebackRange(lo, hi) {
		return
	}
	time.Sleep(min(time.Since(start), maxCheckpointPause))
}

// waitOrLead is the head of the loops of syncThrough and journalThrough,
// called with syncMu held, which it holds again when it returns: it waits
// until done holds (nil) or the commit's chain, the latch or Close gives an
// error, or, when no leader is in flight (*turn false), makes the caller
// the leader (lead true, *turn set).
func (db *DB) waitOrLead(w *commitChain, done func() bool, turn *bool) (lead bool, err error) {
	for {
		switch {
		case w != nil && w.err != nil:
			return false, w.err
		case done():
			return false, nil
		}
		if err := db.latchedErr(); err != nil {
			return false, err
		}
		if db.isClosed() {
			return false, ErrDatabaseNotOpen
		}
		if !*turn {
			*turn = true
			return true, nil
		}
		if turn == &db.syncing {
			// A paced sync point in flight hurries (paceCheckpoint).
			db.syncWaiters.Add(1)
			db.syncCond.Wait()
			db.syncWaiters.Add(-1)
			continue
		}
		db.syncCond.Wait()
	}
}

// flushSteady makes the steady state durable with a full flush: in Barrier
// mode its sync point may have been ordered by a barrier only. The caller
// leads (no sync point is in flight).
func (db *DB) flushSteady() error {
	db.syncMu.Lock()
	steady := db.durable
	done := db.flushed >= steady
	db.syncMu.Unlock()
	if done {
		return nil
	}
	if err := db.pager.Sync(vfs.SyncData); err != nil {
		return db.latch(err)
	}
	db.syncMu.Lock()
	db.flushed = max(db.flushed, steady)
	db.lastFullSync = time.Now()
	db.syncMu.Unlock()
	return nil
}

// lingerForCommits puts off the sync point this goroutine leads while
// commits keep coming, for at most half a flush (docs/design.md §3.3). It
// is reached only when a sync point was in flight at commit time, that is
// under contention. Without it a flush covers the writers that committed
// during the previous flush but not those it has just released, which come
// back within microseconds, so N writers share flushes N/2 at a time.
func (db *DB) lingerForCommits() {
	start := time.Now()
	// Waiting longer than a flush costs would lose more than it saves:
	// at most half the last flush's duration (a 0.1 ms flush on a plain
	// SSD, 2-8 ms on a cloud volume or macOS), and maxGroupDelay.
	limit := min(maxGroupDelay, time.Duration(db.lastFlushNs.Load())/2)
	quietSince := start
	seen := db.unsyncedCommits.Load()
	for time.Since(start) < limit {
		if db.writersWaiting.Load() > 0 {
			quietSince = time.Now()
		} else if n := db.unsyncedCommits.Load(); n != seen {
			seen, quietSince = n, time.Now()
		} else if time.Since(quietSince) >= lingerQuiet {
			return
		}
		runtime.Gosched()
	}
}

// maxGroupDelay bounds how long a sync leader lingers for more commits
// (lingerForCommits): with writers arriving without pause commits never
// stop coming, and those waiting for a flush must not wait for ever.
const maxGroupDelay = time.Millisecond

// lingerQuiet is how long a sync leader waits with no new commit and no
// writer queued before it stops lingering: a writer that a flush released
// begins its next commit well within it.
const lingerQuiet = 50 * time.Microsecond

// startBackgroundSync starts a sync point covering txid on its own
// goroutine. The committing transaction does not wait for it (Periodic and
// None, a journal switch; see commit). While one started this way runs, a
// request is not dropped: the running goroutine takes it up when it is
// done (a request that came as it finished would otherwise find it still
// marked running, and a journal switch would be left without the
// checkpoint that frees the other file).
func (db *DB) startBackgroundSync(txid uint64) {
	for {
		w := db.bgWant.Load()
		if w >= txid || db.bgWant.CompareAndSwap(w, txid) {
			break
		}
	}
	if !db.bgSyncing.CompareAndSwap(false, true) {
		return
	}
	db.bgSyncs.Add(1)
	go func() {
		defer db.bgSyncs.Done()
		for {
			want := db.bgWant.Load()
			err := db.syncThroughPaced(want, false, nil, true)
			if err != nil && err != ErrDatabaseNotOpen {
				db.logger.Errorf("early sync point: %v", err)
			}
			db.bgSyncing.Store(false)
			// Invariant: a request stored in bgWant before the store
			// above is seen by the load below; one stored after it
			// finds bgSyncing false and starts its own goroutine, or
			// this one takes it up (the swap below picks one of them).
			if err != nil || db.bgWant.Load() <= want || !db.bgSyncing.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// headTxid returns the txid of the newest committed state.
func (db *DB) headTxid() uint64 {
	db.writer.Lock()
	defer db.writer.Unlock()
	return db.head.Txid
}

// periodicSyncer runs a sync point every interval while the DB is open
// (Periodic mode).
func (db *DB) periodicSyncer(interval time.Duration) {
	defer close(db.bgDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-db.bgStop:
			return
		case <-t.C:
			if db.noSync.Load() {
				continue
			}
			if err := db.syncThrough(db.headTxid(), false, nil); err != nil {
				if err == ErrDatabaseNotOpen {
					return
				}
				db.logger.Errorf("periodic sync point: %v", err)
				if errors.Is(err, ErrLatched) {
					return
				}
				// A failed write (a full disk) is tried again at the
				// next tick.
			}
		}
	}
}

// writeCleanMeta runs at Close, after the final sync point, and before
// compaction cuts the file, with the writer lock held. The newest meta N normally names a steady txid below its own,
// so the next Open would verify everything N's sync point wrote (every page
// of a large last transaction). When N is durable and nothing is in flight,
// it writes a copy of N as sync point N+1 with steady txid N+1 and nothing
// changed, into the other meta slot, and flushes it: Open then reads the
// two metas and verifies nothing. The copy builds on N's durable maps and
// pages and writes none, so invariants 1-3 hold; if it is torn, Open falls
// back to N, which is durable and verifies.
func (db *DB) writeCleanMeta() error {
	db.syncMu.Lock()
	busy := db.syncing
	durable, slot := db.durable, 1-db.durableSlot
	// The steady meta as it is on disk: the published state may be the same
	// transaction published by a journal write, whose meta carries no
	// free-space fields (selector, delta, free count) to copy.
	steady := db.slotMeta[db.durableSlot]
	db.syncMu.Unlock()
	published := db.readers.Current()
	if busy || steady == nil || steady.Txid != durable || db.head.Txid != durable || published.Txid != durable || steady.Steady == steady.Txid {
		return nil
	}
	meta := *steady
	meta.Txid++
	meta.Steady = meta.Txid
	meta.Changed = make([]byte, len(steady.Changed))
	meta.JournalSalt = db.jsalt
	buf := make([]byte, db.pageSize)
	page.EncodeMeta(buf, &meta)
	// The writer lock is held throughout, so nothing reads slotMeta[slot]
	// while the slot is being overwritten.
	if err := db.pager.WriteRuns([]page.Run{{ID: page.ID(slot), Data: buf}}); err != nil {
		db.restoreMetaSlot(slot)
		return err
	}
	if err := db.pager.Sync(vfs.SyncData); err != nil {
		return db.latch(err)
	}
	// The copy is now the steady state, under its own txid, which the next
	// commit must not reuse: a journal record of that commit would
	// otherwise carry the txid of a state that does not hold it, and
	// recovery, which applies the records after the state it opens at,
	// would skip it.
	db.syncMu.Lock()
	db.slotMeta[slot] = &meta
	db.durable, db.durableSlot = meta.Txid, slot
	db.flushed = meta.Txid
	db.logged = max(db.logged, meta.Txid)
	db.syncMu.Unlock()
	db.head, db.base = &meta, &meta
	db.readers.Publish(&meta, db.pager.Acquire())
	return nil
}

// restoreMetaSlot puts back the meta slot held before a write into it
// failed, and flushes it. A failed write may still have put part of the new
// meta in the file — enough, if its checksummed bytes made it, for Open to
// take it after a crash, bringing back a state whose commits were told they
// failed. Rewriting the slot's previous meta (or zeros, if it held none
// that decoded) and flushing closes that window before the error reaches
// anyone. If the rewrite fails too the slot is unknown (truncation stops
// cutting); if its flush fails the DB latches. The caller holds the writer
// lock.
func (db *DB) restoreMetaSlot(slot int) {
	db.syncMu.Lock()
	prev := db.slotMeta[slot]
	db.slotMeta[slot] = nil
	db.syncMu.Unlock()
	buf := make([]byte, db.pageSize)
	if prev != nil {
		page.EncodeMeta(buf, prev)
	}
	if err := db.pager.WriteRuns([]page.Run{{ID: page.ID(slot), Data: buf}}); err != nil {
		db.logger.Errorf("meta slot %d: writing back its previous meta after a failed write: %v", slot, err)
		return
	}
	if err := db.pager.Sync(vfs.SyncData); err != nil {
		_ = db.latch(err)
		return
	}
	db.syncMu.Lock()
	db.slotMeta[slot] = prev
	db.syncMu.Unlock()
}

// startWriteBack writes the deferred pages to the file from a goroutine of
// its own, piece by piece, unless one is doing so already. Commits that
// wait for no flush (Periodic, None) call it once the dirty table passes a
// quarter of its bound, so that the table rarely reaches the bound, where
// the commit that finds it full writes every page while it holds the
// writer lock. Writing deferred pages early changes nothing a crash can
// find (pager.WriteDeferred); it flushes nothing.
func (db *DB) startWriteBack() {
	if db.closing.Load() || !db.writingBack.CompareAndSwap(false, true) {
		return
	}
	db.bgSyncs.Add(1)
	go func() {
		defer db.bgSyncs.Done()
		defer db.writingBack.Store(false)
		err := db.pager.WriteDeferredInPieces(deferredPiecePages, nil)
		if err != nil && !errors.Is(err, pager.ErrClosed) {
			db.logger.Errorf("writing deferred pages back: %v", err)
		}
	}()
}

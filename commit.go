package rivet

import (
	"time"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// Commit writes the transaction's changes and, in Full and Barrier
// durability, returns once they are durable — sharing one flush with the
// commits running concurrently (docs/design.md §3.3). Then it runs the
// OnCommit handlers. On an error before the changes were written the
// transaction is rolled back; an error from writing or flushing latches
// the DB (see ErrLatched), and the transaction may or may not survive a
// crash, but the file stays consistent.
func (tx *Tx) Commit() error {
	if tx.ended() {
		return ErrTxClosed
	}
	if tx.managed {
		panic("managed tx commit not allowed")
	}
	db := tx.db
	if !tx.writable {
		return ErrTxNotWritable
	}
	job, wait, err := tx.commit()
	if err != nil {
		tx.rollback()
		return err
	}
	tx.foldTreeStats(&tx.stats)
	tx.db = nil
	db.endRW(tx, true) // the next transaction may begin: it builds on this one
	start := time.Now()
	if job != nil {
		err = db.finishSync(job)
	}
	if job != nil || wait == claimedNothing {
		db.releaseSync()
	}
	if err == nil && wait != noWait {
		err = db.syncThrough(tx.txid, false)
	}
	tx.stats.IncWriteTime(time.Since(start))
	if err != nil {
		return err
	}
	for _, fn := range tx.onCommit {
		fn()
	}
	return nil
}

// How Commit finishes after the writer lock is released.
const (
	noWait         = iota // not durable yet by design (Periodic, None)
	waitDurable           // wait for a sync point to cover the transaction
	claimedNothing        // leadership claimed, nothing to flush: release it
)

// commit commits the transaction in memory and, if it leads the next sync
// point, prepares it. Called with the writer lock held.
func (tx *Tx) commit() (*syncJob, int, error) {
	db := tx.db
	if tx.env.Err != nil {
		return nil, noWait, tx.env.Err
	}
	if db.durability().syncsEachCommit() && !tx.lazy {
		// A flush follows this commit: start writing its pages while
		// Spill encodes the rest (btree.Env.WriteEarly).
		tx.env.WriteEarly = db.writeEarly
		if n := db.earlyWritePages.Load(); n > 0 {
			tx.env.EarlyWriteBytes = int(n) * db.pageSize
		}
	}
	if _, err := tx.root.spill(); err != nil {
		return nil, noWait, err
	}
	if tx.env.Err != nil {
		return nil, noWait, tx.env.Err
	}
	newRoot := tx.root.tree.Root()
	if len(tx.env.Runs) == 0 && newRoot == tx.meta.Root && tx.spaceOps == 0 {
		// Nothing changed: no sync point, no I/O.
		db.spaceMu.Lock()
		db.space.Rollback()
		db.spaceMu.Unlock()
		tx.spaceEnded = true
		return nil, noWait, nil
	}
	db.spaceMu.Lock()
	db.space.Commit()
	hwm := db.space.HWM()
	stats := db.space.Stats()
	db.spaceMu.Unlock()
	// From here a failure latches the DB, which never touches the map again.
	tx.spaceEnded = true
	head := &page.Meta{
		PageSize:    db.pageSize,
		Txid:        tx.txid,
		HWM:         hwm,
		Root:        newRoot,
		RegionPages: page.RegionPages(db.pageSize),
	}
	start := time.Now()
	// EnsureMapped grows the file to the HWM before mapping it.
	if err := db.pager.EnsureMapped(hwm); err != nil {
		return nil, noWait, db.latch(err)
	}
	// The runs are written before commit returns (below, or by prepareSync),
	// and neither the pager nor prepareSync keeps the slice, so one slice
	// owned by the writer serves every commit; releaseRuns drops the
	// references to the page buffers afterwards.
	runs := appendPagerRuns(db.pagerRuns[:0], tx.env.Runs[tx.env.EarlyWritten:])
	db.pagerRuns = runs
	db.head = head
	db.commits.Add(1)
	// A lazy transaction (a compaction step) is committed as in None
	// mode whatever the durability: it changes where data lives, not what
	// it is, so losing it in a crash loses nothing, and the next sync
	// point (the application's next durable commit, or Compact's own
	// Sync) covers it with the flush it makes anyway.
	syncs := db.durability().syncsEachCommit() && !tx.lazy

	db.unsyncedCommits.Add(1)
	var job *syncJob
	wait := noWait
	switch {
	case syncs:
		wait = waitDurable
		if db.unsyncedCommits.Load() > 1 || db.writersWaiting.Load() > 0 || db.lastSyncCommits.Load() > 1 {
			// Other commits wait for a sync point, writers are queued
			// for the lock, or the last sync point covered several
			// writers (who are on their way back): lead (or join) it
			// from syncThrough, which lingers while commits keep
			// coming, so that one flush covers them all
			// (docs/design.md §3.3). Leading here, at once, covered
			// only the writers that committed during the previous
			// flush. A lone writer still leads at once.
			break
		}
		if db.claimSync() {
			var err error
			if job, err = db.prepareSync(db.syncKind(false), runs); err != nil {
				db.releaseSync()
				return nil, noWait, err
			}
			runs = nil
			if job == nil {
				wait = claimedNothing
			}
		}
	}
	if runs != nil {
		if err := db.pager.WriteRuns(runs); err != nil {
			return nil, noWait, db.latch(err)
		}
	}
	if !syncs {
		// Periodic and None: readers see the transaction as soon as its
		// pages are written (not before: a reader would read stale pages).
		db.readers.Publish(head, db.pager.Acquire())
		db.mu.Lock()
		db.spaceStats = stats
		db.mu.Unlock()
	}
	tx.stats.IncWrite(int64(len(tx.env.Runs)))
	tx.stats.IncWriteTime(time.Since(start))

	if db.StrictMode {
		if err := db.strictCheck(head); err != nil {
			if job != nil {
				db.releaseSync()
			}
			return nil, noWait, db.latch(err)
		}
	}
	if wait == noWait {
		// Pages freed since the last sync point cannot be reused before the
		// next, so Periodic and None run one early when they pile up: in
		// the background past the soft limit, and blocking this commit past
		// twice that, which bounds the file's growth.
		switch soft := pendingLimit(stats); {
		case stats.PendingPages > 2*soft:
			wait = waitDurable
		case stats.PendingPages > soft:
			db.startBackgroundSync(tx.txid)
		}
	}
	return job, wait, nil
}

// writeEarly writes runs a commit's Spill has encoded so far and starts
// their writeback (btree.Env.WriteEarly). A failed write latches the DB.
func (db *DB) writeEarly(runs []btree.Run) error {
	pr := appendPagerRuns(db.earlyRuns[:0], runs)
	err := db.pager.WriteRunsAndStart(pr)
	clear(pr)
	db.earlyRuns = pr[:0]
	if err != nil {
		return db.latch(err)
	}
	return nil
}

// appendPagerRuns appends the tree's runs to dst as the pager's.
func appendPagerRuns(dst []pager.Run, runs []btree.Run) []pager.Run {
	for _, r := range runs {
		dst = append(dst, pager.Run{ID: r.ID, Data: r.Data})
	}
	return dst
}

// maxGroupDelay bounds how long a sync leader lingers for more commits
// (lingerForCommits): with writers arriving without pause commits never
// stop coming, and those waiting for a flush must not wait for ever.
const maxGroupDelay = time.Millisecond

// pendingLimit is the soft limit on pages waiting for a sync point: a
// quarter of the file, at least 4,096 pages.
func pendingLimit(s spacemap.Stats) uint64 {
	limit := s.HWM / 4
	if limit < 4096 {
		limit = 4096
	}
	return limit
}

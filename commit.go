package rivet

import (
	"errors"
	"fmt"
	"time"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// Commit writes the transaction's changes and, in Full and Barrier
// durability, returns once they are durable — sharing one flush with the
// commits running concurrently (docs/design.md §3.3). Then it runs the
// OnCommit handlers.
//
// On an error the transaction is rolled back and the database goes on
// from the state before it: a failed write or file growth (a full disk,
// errors.Is(err, syscall.ENOSPC)) leaves nothing of the transaction
// behind, and the next transaction may succeed once there is room. Only a
// failed flush latches the DB (see ErrLatched): the file's durable state is
// then uncertain, the transaction may or may not survive a crash, but the
// file stays consistent (docs/design.md §3.2).
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
	c, err := tx.commit()
	if err != nil {
		tx.rollback()
		return err
	}
	tx.foldTreeStats(&tx.stats)
	tx.db = nil
	db.endRW(tx, true) // the next transaction may begin: it builds on this one
	start := time.Now()
	if c.job != nil {
		err = db.finishSync(c.job)
	}
	if c.job != nil || c.wait == claimedNothing {
		db.releaseSync()
	}
	if c.jjob != nil {
		err = db.finishJournal(c.jjob)
	}
	if c.jlead {
		db.releaseJournal()
	}
	if err == nil && c.wait == waitJournal {
		err = db.journalThrough(tx.txid, c.chain)
		if err == nil && c.syncAfter {
			// Pages waiting for a sync point passed twice their limit:
			// this commit waits for the checkpoint that frees them.
			err = db.syncThrough(tx.txid, false, nil)
		}
	} else if err == nil && c.wait != noWait {
		err = db.syncThrough(tx.txid, false, c.chain)
		if err != nil && c.published && !errors.Is(err, ErrLatched) {
			// The transaction is committed and readers see it; the sync
			// point it ran only bounds the file's growth (Periodic, None).
			db.logger.Errorf("sync point after commit %d: %v", tx.txid, err)
			err = nil
		}
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
	waitJournal           // wait for a journal write to cover the transaction
)

// committed says how Commit finishes a transaction committed in memory.
type committed struct {
	job  *syncJob // a sync point this commit leads, to flush
	wait int
	// chain is how a sync point that fails to write tells this commit it
	// was rolled back; nil unless the commit waits for a sync point while
	// it is not sealed.
	chain *commitChain
	// published is set when readers see the transaction already.
	published bool
	// jjob is a journal write this commit leads, to flush; jlead is set
	// while the commit holds the journal writer's turn (released after
	// the flush). syncAfter makes a journaled commit wait for a sync point
	// as well (see commit).
	jjob      *journalJob
	jlead     bool
	syncAfter bool
}

// commitChain is shared by the commits after db.base that wait for a sync
// point: if a sync point fails to write and takes them back, err says so.
// A seal ends the chain (its commits stay, err stays nil). err is guarded
// by syncMu.
type commitChain struct{ err error }

// commit commits the transaction in memory and, if it leads the next sync
// point, prepares it. Called with the writer lock held.
//
// Everything that can fail without a flush — growing the file, writing the
// pages — happens before the free-space map commits, so that a failure
// leaves the caller an ordinary rollback. The exception is a commit that
// leads its sync point at once: it writes its pages together with the
// sync point's maps and meta, and a failure there takes the commit back
// (prepareSync).
func (tx *Tx) commit() (committed, error) {
	db := tx.db
	if tx.env.Err != nil {
		return committed{}, tx.env.Err
	}
	if !tx.lazy {
		// bbolt reads MaxSize and NoSync while it commits: a program may
		// have changed them inside the transaction.
		db.applyFields()
	}
	// A journaled commit (journal_ops.go) writes its record to the
	// journal and the file is flushed later, by a checkpoint; recorded is
	// decided here, since NoSync may have changed inside the transaction.
	journaling := db.jready.Load() && !db.joff.Load() && !tx.lazy
	recorded := journaling && tx.journaling
	if db.durability().syncsEachCommit() && !tx.lazy && !recorded {
		// A flush follows this commit: start writing its pages while
		// Spill encodes the rest (btree.Env.WriteEarly).
		tx.env.WriteEarly = db.writeEarly
		if n := db.earlyWritePages.Load(); n > 0 {
			tx.env.EarlyWriteBytes = int(n) * db.pageSize
		}
	}
	if _, err := tx.root.spill(); err != nil {
		return committed{}, err
	}
	if tx.env.Err != nil {
		return committed{}, tx.env.Err
	}
	newRoot := tx.root.tree.Root()
	if len(tx.env.Runs) == 0 && newRoot == tx.meta.Root && tx.spaceOps == 0 {
		// Nothing changed: no sync point, no I/O.
		db.spaceMu.Lock()
		db.space.Rollback()
		db.spaceMu.Unlock()
		tx.spaceEnded = true
		return committed{}, nil
	}
	db.spaceMu.Lock()
	hwm := db.space.HWM()
	db.spaceMu.Unlock()
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
		return committed{}, fmt.Errorf("rivet: growing the file for commit %d: %w", tx.txid, err)
	}
	// The runs Spill did not hand to writeEarly. They are written before
	// commit returns (below, or by prepareSync), and neither the pager nor
	// prepareSync keeps the slice; releaseRuns drops the references to the
	// page buffers afterwards.
	runs := tx.env.Runs[tx.env.EarlyWritten:]
	// A lazy transaction (a compaction step) is committed as in None
	// mode whatever the durability: it changes where data lives, not what
	// it is, so losing it in a crash loses nothing, and the next sync
	// point (the application's next durable commit, or Compact's own
	// Sync) covers it with the flush it makes anyway.
	syncs := db.durability().syncsEachCommit() && !tx.lazy
	viaJournal := syncs && recorded
	// A lone committer leads its sync point at once. When other commits
	// wait for a sync point, writers are queued for the lock, or the last
	// sync point covered several writers (who are on their way back), it
	// leads (or joins) one from syncThrough instead, which lingers while
	// commits keep coming, so that one flush covers them all
	// (docs/design.md §3.3). Leading here, at once, covered only the
	// writers that committed during the previous flush.
	lone := db.unsyncedCommits.Load() == 0 && db.writersWaiting.Load() == 0 && db.lastSyncCommits.Load() <= 1
	lead := syncs && !viaJournal && lone && db.claimSync()
	if !lead {
		write := db.pager.WriteRuns
		switch {
		case tx.replay:
			// The journal's replay at Open: its pages wait in memory
			// for the sync point that makes it durable, as a journaled
			// commit's do, so Open writes none of them.
			write = db.pager.Defer
			tx.deferred = true
		case tx.lazy:
			// A later flush covers a compaction step: start sending its
			// pages to storage now, so that flush finds less to write.
			write = db.pager.WriteRunsAndStart
		case viaJournal && journalDefers(runPages(runs, db.pageSize), tx.freedPages, db.pager.DeferredPages(), db.pageSize),
			!syncs && runPages(runs, db.pageSize) <= maxDeferredCommitPages:
			// Nothing reads these pages from the file before the next
			// sync point: the journal, or nothing (Periodic, None),
			// carries the commit to it. They wait in memory, where
			// readers find them, and the sync point writes the ones
			// still in use (docs/design.md §3.9). A journaled commit's
			// checkpoint is at most a journal file away, and its
			// pages, large commit or small, are then written once
			// however many commits rewrote them and with no system call
			// on the commit's path. Under Periodic and None only small
			// commits defer: theirs are the path from the root that the
			// next commits rewrite, while a large commit's are mostly
			// pages no other commit touches before a sync point that may
			// be far away.
			write = db.pager.Defer
			tx.deferred = true
		}
		if err := write(runs); err != nil {
			tx.deferred = false
			return committed{}, fmt.Errorf("rivet: writing commit %d: %w", tx.txid, err)
		}
		deferredPages := db.pager.DeferredPages()
		if tx.deferred && !syncs && deferredPages > maxDeferredBytes/4/int64(db.pageSize) {
			db.startWriteBack()
		}
		if tx.deferred && deferredPages > maxDeferredBytes/int64(db.pageSize) {
			// Bound the memory deferred pages take without a sync point,
			// which would age the young pages (§4) and grow the file:
			// write them to the file now, unflushed, as a commit without
			// the table would have.
			if err := db.pager.WriteDeferred(); err != nil {
				return committed{}, fmt.Errorf("rivet: writing deferred pages at commit %d: %w", tx.txid, err)
			}
		}
	}

	// Committed in memory from here: the next write transaction builds on
	// head. Until it is sealed (published, or covered by a written sync
	// point) a failed sync point write can still take it back.
	db.spaceMu.Lock()
	db.space.Commit()
	stats := db.space.Stats()
	db.spaceMu.Unlock()
	tx.spaceEnded = true
	db.head = head
	db.commits.Add(1)
	if !tx.lazy {
		db.unsyncedCommits.Add(1)
	}

	c := committed{}
	if syncs {
		c.wait = waitDurable
	}
	if journaling {
		db.queueJournal(tx, recorded && syncs)
	}
	if viaJournal {
		c.wait = waitJournal
		if lone && db.claimJournal() {
			c.jlead = true
			job, err := db.writeJournal()
			switch {
			case err == errJournalFull:
				// journalThrough runs the checkpoint it waits for.
				db.releaseJournal()
				c.jlead = false
			case err == errJournalOff || err == errJournalBarrier:
				// A sync point of the file makes it durable instead.
				db.releaseJournal()
				c.jlead = false
				c.wait = waitDurable
			case err != nil:
				// writeJournal took this commit back.
				db.releaseJournal()
				return committed{}, err
			default:
				c.jjob = job
			}
		}
	}
	if lead {
		job, err := db.prepareSync(db.syncKind(false), runs)
		if err != nil {
			// prepareSync took this commit back.
			db.releaseSync()
			return committed{}, err
		}
		c.job = job
		if job == nil {
			c.wait = claimedNothing
		}
	}
	if !syncs && (!tx.lazy || tx.meta == db.base) {
		// Periodic and None: readers see the transaction as soon as its
		// pages are written (not before: a reader would read stale
		// pages), and it is final. A lazy commit over commits still
		// waiting for their sync point is not published: readers would
		// see those before they are durable.
		db.readers.Publish(head, db.pager.Acquire())
		db.mu.Lock()
		db.spaceStats = stats
		db.mu.Unlock()
		db.seal()
		c.published = true
	}
	tx.stats.IncWrite(int64(len(tx.env.Runs)))
	tx.stats.IncWriteTime(time.Since(start))

	if db.StrictMode {
		if err := db.strictCheck(head); err != nil {
			if c.job != nil {
				db.releaseSync()
			}
			return committed{}, db.latch(err)
		}
	}
	if c.wait == noWait || c.wait == waitJournal {
		// Pages freed since the last sync point cannot be reused before the
		// next, so Periodic, None and journaled commits run one early when
		// they pile up: in the background past the soft limit, and
		// blocking this commit past twice that, which bounds the file's
		// growth.
		soft := pendingLimit(stats)
		if c.wait == waitJournal {
			soft = journalPendingLimit(stats)
		}
		switch {
		case stats.PendingPages > 2*soft && c.wait == waitJournal:
			c.syncAfter = true
		case stats.PendingPages > 2*soft:
			c.wait = waitDurable
		case stats.PendingPages > soft:
			db.startBackgroundSync(tx.txid)
		}
	}
	if (c.wait == waitDurable || c.wait == waitJournal) && db.base != head {
		if db.chain == nil {
			db.chain = new(commitChain)
		}
		c.chain = db.chain
	}
	return c, nil
}

// seal makes every commit so far final (db.base = db.head): a sync point
// that fails to write no longer takes it back. Called with the writer lock
// held, when head is published to readers or a sync point covering it has
// been written.
func (db *DB) seal() {
	db.spaceMu.Lock()
	db.space.Seal()
	db.spaceMu.Unlock()
	db.base = db.head
	db.chain = nil
}

// writeEarly writes runs a commit's Spill has encoded so far and starts
// their writeback (btree.Env.WriteEarly). A failed write fails the commit,
// which is rolled back: the pages are in space no state uses.
func (db *DB) writeEarly(runs []page.Run) error {
	if err := db.pager.WriteRunsAndStart(runs); err != nil {
		return fmt.Errorf("rivet: writing pages of the commit: %w", err)
	}
	return nil
}

// maxDeferredBytes bounds the pages commits keep in the dirty table between
// sync points (docs/design.md §3.9).
const maxDeferredBytes = 64 << 20

// maxDeferredCommitPages is the largest Periodic or None commit, in pages,
// that defers its writes (docs/design.md §3.9).
const maxDeferredCommitPages = 32

// maxDeferredJournalPages is the largest journaled commit, in pages, that
// defers its writes (docs/design.md §3.9): an eighth of maxDeferredBytes
// at 4 KiB pages, so that one commit cannot fill the table.
const maxDeferredJournalPages = 2048

// journalDefers reports whether a journaled commit of pages pages, which
// freed freed pages, defers them to a table already holding deferred pages
// of pageSize bytes: a small one always, as a Periodic or None commit does; a larger one, up to maxDeferredJournalPages, if it
// rewrote pages — freed at least half as many as it wrote — and the table
// stays under half its bound with them.
//
// A commit that rewrote pages (random updates) makes pages the next
// commits of the same checkpoint rewrite again, which the table writes
// once. One that mostly added pages (a load in key order, a large value)
// makes pages nothing rewrites, and keeping them in the table would only
// make the reads after a load look every page up there until the next
// checkpoint. Past the bound a commit writes the whole table under the
// writer lock, and large commits deferring faster than a paced checkpoint
// writes would make some commit pay for that; written at commit instead,
// each pays for its own pages.
func journalDefers(pages int, freed uint64, deferred int64, pageSize int) bool {
	if pages <= maxDeferredCommitPages {
		return true
	}
	return pages <= maxDeferredJournalPages && 2*freed >= uint64(pages) &&
		(deferred+int64(pages))*int64(pageSize) <= maxDeferredBytes/2
}

// runPages returns the pages runs hold.
func runPages(runs []page.Run, pageSize int) int {
	n := 0
	for _, r := range runs {
		n += len(r.Data) / pageSize
	}
	return n
}

// journalPendingLimit is pendingLimit for journaled commits: a quarter of
// the file, at least 256 pages. Full durability promises files the size of
// bbolt's; a checkpoint of a small file costs little, so small files do not
// grow by 4,096 pages first.
func journalPendingLimit(s spacemap.Stats) uint64 {
	return max(s.HWM/4, 256)
}

// pendingLimit is the soft limit on pages waiting for a sync point: a
// quarter of the file, at least 4,096 pages.
func pendingLimit(s spacemap.Stats) uint64 {
	limit := s.HWM / 4
	if limit < 4096 {
		limit = 4096
	}
	return limit
}

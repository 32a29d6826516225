package rivet

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// compactStepPages bounds the pages one relocation transaction moves: a
// writer waits for at most one such step (docs/design.md §4.1).
const compactStepPages = 1024

// Compact gives space back while the database stays in use (docs/design.md
// §4.1): it moves the pages that live near the end of the file into free
// space lower down, in short write transactions of at most 1,024 pages each
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
func (db *DB) Compact(ctx context.Context) (int64, error) {
	if db.readOnly {
		return 0, ErrDatabaseReadOnly
	}
	if db.isClosed() {
		return 0, ErrDatabaseNotOpen
	}
	before := db.headHWM()
	released := func() int64 { return int64(before-db.headHWM()) * int64(db.pageSize) }
	for {
		if err := ctx.Err(); err != nil {
			return released(), err
		}
		limit, ok := db.compactTarget()
		if !ok {
			break
		}
		more, err := db.relocateStep(limit, compactStepPages)
		if errors.Is(err, spacemap.ErrLimit) {
			// Free space below the target is too fragmented for some run
			// (a multi-page node or a blob extent): nothing more to do
			// this call without growing the target, which the next step
			// does by itself once this one's frees are released.
			break
		}
		if err != nil {
			return released(), err
		}
		if !more {
			break
		}
	}
	// The relocations' frees become allocatable once a sync point covers
	// them (and no reader older than them remains): then the tail is free.
	if err := db.Sync(); err != nil {
		return released(), err
	}
	if err := db.shrinkTail(); err != nil {
		return released(), err
	}
	if err := db.Sync(); err != nil {
		return released(), err
	}
	return released(), db.truncateTail(true)
}

// headHWM returns the high-water mark of the newest committed state.
func (db *DB) headHWM() uint64 {
	db.writer.Lock()
	defer db.writer.Unlock()
	return db.head.HWM
}

// compactTarget returns the page the live state would fit below, with
// slack, and whether moving what lies above it is worth a step: the HWM
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

// relocateStep moves, in one write transaction, up to budget pages of the
// runs at or above limit to pages below it. more reports that runs at or
// above limit remain.
func (db *DB) relocateStep(limit page.ID, budget uint64) (more bool, err error) {
	tx, err := db.beginRW()
	if err != nil {
		return false, err
	}
	db.spaceMu.Lock()
	db.space.SetLimit(limit)
	db.spaceMu.Unlock()
	left, visits := budget, uint64(0)
	more, err = tx.root.relocate(limit, &left, &visits)
	if err == nil && left == budget && !more {
		// Nothing lies above the limit any more.
		return false, tx.Rollback()
	}
	if err != nil {
		_ = tx.Rollback()
		return false, err
	}
	return more, tx.Commit()
}

// relocate marks for rewriting the runs of b's tree and of its nested
// buckets' trees that lie at or above limit, spending budget pages; it
// reports whether it stopped with runs left. visits bounds the nodes read
// (see btree.Tree.Above).
func (b *Bucket) relocate(limit page.ID, budget, visits *uint64) (bool, error) {
	nodes, blobs, pages, more, err := b.tree.Above(limit, *budget, visits)
	if err != nil {
		return false, err
	}
	*budget -= min(pages, *budget)
	// Moved leaves merge with a sibling when both fit one page.
	b.tree.Repack = true
	for _, k := range nodes {
		if err := b.tree.Touch(k); err != nil {
			return false, err
		}
	}
	for _, k := range blobs {
		// Put again: the new copy is written at spill, below the limit,
		// and the old extents are freed.
		if err := b.Put(k, bytes.Clone(b.Get(k))); err != nil {
			return false, err
		}
	}
	if more || *budget == 0 {
		return true, nil
	}
	var names [][]byte
	if err := b.ForEachBucket(func(k []byte) error {
		names = append(names, bytes.Clone(k))
		return nil
	}); err != nil {
		return false, err
	}
	for _, name := range names {
		c := b.Bucket(name)
		if c == nil {
			return false, firstErr(b.tx.env.Err, ErrBucketNotFound)
		}
		m, err := c.relocate(limit, budget, visits)
		if err != nil || m {
			return m, err
		}
	}
	return false, nil
}

// shrinkTail lowers the high-water mark to the start of the free tail, in a
// transaction of its own. A sync point in flight is waited out.
func (db *DB) shrinkTail() error {
	for attempt := 0; ; attempt++ {
		tx, err := db.beginRW()
		if err != nil {
			return err
		}
		db.spaceMu.Lock()
		tail, err := db.space.FreeTail()
		shrunk := false
		if err == nil && tail < db.space.HWM() {
			if err = db.space.ShrinkTo(tail); err == nil {
				shrunk = true
			}
		}
		db.spaceMu.Unlock()
		if errors.Is(err, spacemap.ErrSyncInFlight) && attempt < 10 {
			_ = tx.Rollback()
			if err := db.Sync(); err != nil {
				return err
			}
			continue
		}
		if err != nil || !shrunk {
			_ = tx.Rollback()
			return err
		}
		tx.spaceOps++
		return tx.Commit()
	}
}

// truncateTail cuts the file down to what the newest state, both metas on
// disk and every open reader can reach (docs/design.md §4.1). With
// cleanMeta, and nothing in flight, it first writes the newest state into
// the other meta slot as Close does, so that both metas name it.
func (db *DB) truncateTail(cleanMeta bool) error {
	db.writer.Lock()
	defer db.writer.Unlock()
	if cleanMeta {
		if err := db.writeCleanMeta(); err != nil {
			return db.latch(err)
		}
	}
	return db.truncateLocked(0)
}

// truncateLocked cuts the file to the largest HWM of the newest state, of
// both metas on disk and of every open reader's snapshot, if that gives
// back more than minExcess bytes. The caller holds the writer lock, so no
// commit grows the file meanwhile. A meta slot whose HWM is unknown (it did
// not decode at Open, or is being written) stops it.
func (db *DB) truncateLocked(minExcess int64) error {
	if runtime.GOOS == "windows" || db.readOnly {
		// Windows refuses to truncate a file below a mapped view.
		return nil
	}
	db.syncMu.Lock()
	cut := max(db.slotHWM[0], db.slotHWM[1])
	unknown := db.slotHWM[0] == 0 || db.slotHWM[1] == 0
	db.syncMu.Unlock()
	if unknown {
		return nil
	}
	cut = max(cut, db.head.HWM)
	db.mu.Lock()
	for _, hwm := range db.readerHWM {
		cut = max(cut, hwm)
	}
	db.mu.Unlock()
	size, err := db.file.Size()
	if err != nil {
		return err
	}
	if size-int64(cut)*int64(db.pageSize) <= minExcess {
		return nil
	}
	return db.pager.Truncate(int64(cut) * int64(db.pageSize))
}

// truncateExcess is the slack Close and Open leave alone: growth steps are
// at most 1/16 of the file (or 16 MiB), so a file more than 1/8 (and 1 MiB)
// longer than anything needs has space to give back.
func truncateExcess(size int64) int64 { return max(size/8, 1<<20) }

// autoCompactor runs Compact whenever free pages make up more than
// cfg.FreeFraction of the database, looking every cfg.Interval, until Close
// stops it (cancelling a compaction in progress after its current step).
func (db *DB) autoCompactor(cfg AutoCompact) {
	defer close(db.compactDone)
	interval, fraction := cfg.Interval, cfg.FreeFraction
	if interval <= 0 {
		interval = time.Minute
	}
	if fraction <= 0 {
		fraction = 0.25
	}
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		db.spaceMu.Lock()
		s := db.space.Stats()
		db.spaceMu.Unlock()
		if s.HWM == 0 || float64(s.FreePages) <= fraction*float64(s.HWM) {
			continue
		}
		if released, err := db.Compact(ctx); err != nil && ctx.Err() == nil {
			db.logger.Errorf("automatic compaction: %v", err)
			return
		} else if released > 0 {
			db.logger.Infof("automatic compaction gave back %d bytes of state", released)
		}
	}
}

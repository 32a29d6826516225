package rivet

import "github.com/rivetkv/rivet/internal/page"

// The exported fields of DB are bbolt's, and a program may change them on
// an open DB: they take effect when bbolt v1.5 reads them (see DB).
// MaxBatchSize and MaxBatchDelay are read by every Batch call and
// StrictMode by every commit, directly; MaxSize and NoSync govern work
// that also runs off the caller's goroutine (sync points, growth,
// compaction), so the caller's values are copied in here, where bbolt
// reads them, and the rest of rivet reads the copies.

// applyFields makes the caller's DB.MaxSize and DB.NoSync the ones in
// force. It runs in the goroutine that begins or commits a write
// transaction (the goroutine in which bbolt reads them), with the writer
// lock held. Background transactions (compaction steps) do not call it:
// they keep what the application's last transaction applied, and a
// program that changes a field between its own transactions races with
// nothing of rivet's.
func (db *DB) applyFields() {
	db.noSync.Store(db.NoSync)
	if db.MaxSize == db.maxSizeApplied {
		return
	}
	db.maxSizeApplied = db.MaxSize
	db.pager.SetMaxSize(int64(db.MaxSize))
	db.spaceMu.Lock()
	db.space.SetMaxPages(maxPagesFor(db.pageSize, db.MaxSize))
	db.spaceMu.Unlock()
}

// maxPagesFor is the bound on the high-water mark for a file of page size
// ps capped at maxSize bytes (no cap if maxSize <= 0): the cap in whole
// pages, or the pages a meta's region bitmaps can describe if that is less.
func maxPagesFor(ps, maxSize int) uint64 {
	limit := page.MaxRegions(ps) * page.RegionPages(ps)
	if maxSize > 0 && uint64(maxSize/ps) < limit {
		limit = uint64(maxSize / ps)
	}
	return limit
}

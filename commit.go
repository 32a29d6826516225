package rivet

import (
	"time"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
	"github.com/rivetkv/rivet/internal/vfs"
)

// Commit writes the transaction's changes and makes them durable with one
// flush (docs/design.md §3.1), then runs the OnCommit handlers. On any error
// the transaction is rolled back; an error from writing or flushing also
// latches the DB (see ErrLatched).
func (tx *Tx) Commit() error {
	if tx.managed {
		panic("managed tx commit not allowed")
	}
	db := tx.db
	if db == nil {
		return ErrTxClosed
	}
	if !tx.writable {
		return ErrTxNotWritable
	}
	if err := tx.commit(); err != nil {
		tx.rollback()
		return err
	}
	tx.foldTreeStats(&tx.stats)
	tx.db = nil
	db.endRW(tx, true)
	for _, fn := range tx.onCommit {
		fn()
	}
	return nil
}

func (tx *Tx) commit() error {
	db := tx.db
	if tx.env.Err != nil {
		return tx.env.Err
	}
	if _, err := tx.root.spill(); err != nil {
		return err
	}
	if tx.env.Err != nil {
		return tx.env.Err
	}
	newRoot := tx.root.tree.Root()
	if len(tx.env.Runs) == 0 && newRoot == tx.meta.Root && tx.spaceOps == 0 {
		// Nothing changed: no sync point, no I/O.
		db.space.Rollback()
		tx.spaceEnded = true
		return nil
	}
	db.space.Commit()
	// From here a failure latches the DB, which never touches the map again.
	tx.spaceEnded = true
	img := db.space.PrepareSync(tx.txid)
	hwm := db.space.HWM()
	meta := &page.Meta{
		PageSize:        db.pageSize,
		Txid:            tx.txid,
		Steady:          db.steady,
		HWM:             hwm,
		Root:            newRoot,
		RegionPages:     page.RegionPages(db.pageSize),
		FreePages:       img.FreePages,
		FirstFreeRegion: img.FirstFreeRegion,
		Selector:        img.Selector,
		Changed:         img.Changed,
	}
	slot := 1 - db.steadySlot
	metaBuf := make([]byte, db.pageSize)
	page.EncodeMeta(metaBuf, meta)

	runs := make([]pager.Run, 0, len(tx.env.Runs)+len(img.Pages)+1)
	for _, r := range tx.env.Runs {
		runs = append(runs, pager.Run{ID: r.ID, Data: r.Data})
	}
	for _, r := range img.Pages {
		runs = append(runs, pager.Run{ID: r.ID, Data: r.Data})
	}
	runs = append(runs, pager.Run{ID: page.ID(slot), Data: metaBuf})

	start := time.Now()
	if err := db.pager.Grow(hwm); err != nil {
		return db.latch(err)
	}
	if err := db.pager.EnsureMapped(hwm); err != nil {
		return db.latch(err)
	}
	if err := db.pager.WriteRuns(runs); err != nil {
		return db.latch(err)
	}
	if !db.NoSync {
		if err := db.pager.Sync(vfs.SyncData); err != nil {
			return db.latch(err)
		}
	}
	tx.stats.IncWrite(int64(len(runs)))
	tx.stats.IncWriteTime(time.Since(start))
	db.space.SyncDone(img)
	db.steady = tx.txid
	db.steadySlot = slot

	if db.StrictMode {
		if err := db.strictCheck(meta); err != nil {
			return db.latch(err)
		}
	}
	db.mu.Lock()
	db.cur = meta
	db.stats.Commits++
	db.spaceStats = db.space.Stats()
	db.mu.Unlock()
	return nil
}

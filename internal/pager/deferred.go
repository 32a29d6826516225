package pager

import (
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/dirty"
	"github.com/rivetkv/rivet/internal/page"
)

// Defer keeps runs in memory instead of writing them: readers find them in
// the dirty table (Dirty) before the map, and WriteDeferred writes them to
// the file. The file is grown to cover them first, as WriteRuns does, so
// that a later write of theirs never extends the file and a cut never
// reaches them. The runs' buffers then belong to the pager.
func (p *Pager) Defer(runs []page.Run) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.writable(); err != nil {
		return err
	}
	var end int64
	for _, r := range runs {
		off, ok := p.pageOffset(r.ID)
		if !ok || off > maxOffset-int64(len(r.Data)) {
			return fmt.Errorf("pager: run at page %d lies past the largest file offset", r.ID)
		}
		end = max(end, off+int64(len(r.Data)))
	}
	if end > 0 {
		if err := p.grow(end); err != nil {
			return err
		}
	}
	return p.dirty.Put(runs)
}

// WriteDeferred writes the deferred pages to the file and forgets them;
// the entries that later writes replaced are not written. A sync point
// calls it before it writes its meta, and whatever reads the map or the
// file directly rather than through a transaction's btree.Env calls it
// before it reads.
//
// Only pages of commits after the file's last sync point are deferred,
// and the free-space rules keep those out of every state a crash can open
// (docs/design.md §3.9), so writing them early changes nothing a crash
// can find. If the write fails, the table is left as it was.
func (p *Pager) WriteDeferred() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.waitPiece()
	if p.closed.Load() {
		return ErrClosed
	}
	if p.readOnly && p.dirty.Pages() > 0 {
		return rerrors.ErrDatabaseReadOnly
	}
	return p.dirty.Flush(func(runs []page.Run) error {
		_, _, err := p.writeRunsLocked(runs)
		return err
	})
}

// WriteDeferredInPieces writes the pages deferred before the call as
// WriteDeferred does, in pieces of about piecePages pages, and lets go of
// the pager between pieces, so that a commit deferring or writing its
// pages meanwhile waits for one piece at most, not for the whole table.
// After each piece it calls between, if not nil, with the byte range the
// piece spans, without the pager's lock. Pages deferred after the call
// began are left for the next one. If a write fails, the pieces not yet
// written stay in the table.
func (p *Pager) WriteDeferredInPieces(piecePages int, between func(lo, hi int64)) error {
	p.wmu.Lock()
	left := p.dirty.Runs()
	p.wmu.Unlock()
	for left > 0 {
		var lo, hi int64
		n, err := p.writeDeferredPiece(left, piecePages, &lo, &hi)
		if err != nil || n == 0 {
			return err
		}
		left -= n
		if between != nil && hi > lo {
			between(lo, hi)
		}
	}
	return nil
}

// writeDeferredPiece writes the pages of the oldest deferred runs, at most
// maxRuns of them and about maxPages pages, and sets [*lo, *hi) to the
// bytes they span. It returns how many runs it took.
//
// It writes them without wmu, so that commits deferring their pages do
// not wait for the writes: it takes the piece from the table and grows the
// file under wmu, marks the pager busy (pieceBusy: every other write, cut
// and take from the table waits), writes, and forgets the piece under wmu
// again. A commit may meanwhile replace a page of the piece; its newer
// entry stays, and is written after these bytes.
func (p *Pager) writeDeferredPiece(maxRuns, maxPages int, lo, hi *int64) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.waitPiece()
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if p.readOnly && p.dirty.Pages() > 0 {
		return 0, rerrors.ErrDatabaseReadOnly
	}
	piece := p.dirty.TakeSome(maxRuns, maxPages)
	if len(piece.Runs) > 0 {
		var err error
		if *lo, *hi, err = p.prepareWrite(piece.Runs); err != nil {
			return 0, err
		}
		p.pieceBusy = true
		p.wmu.Unlock()
		err = p.writeSorted(piece.Runs, &p.pieceScratch)
		p.wmu.Lock()
		p.pieceBusy = false
		p.pieceDone.Broadcast()
		if err != nil {
			return 0, err
		}
	}
	p.dirty.Finish(piece)
	return piece.Taken(), nil
}

// Dirty returns the table of deferred pages, which readers consult before
// the map.
func (p *Pager) Dirty() *dirty.Table { return p.dirty }

// DeferredPages returns how many pages are deferred.
func (p *Pager) DeferredPages() int64 { return p.dirty.Pages() }

// TakeDeadBuffers appends to dst the buffers of deferred runs that no
// longer have a page in the dirty table (dirty.Table.TakeDead) and returns
// it: the caller may reuse one once every reader that was running before
// this call has ended. While a piece is being written it takes none: a run
// of the piece whose pages were all deferred again meanwhile is dead, but
// the piece still writes from its buffer, so the buffers wait for the next
// call.
func (p *Pager) TakeDeadBuffers(dst [][]byte) [][]byte {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.pieceBusy {
		return dst
	}
	return p.dirty.TakeDead(dst)
}

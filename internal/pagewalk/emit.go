package pagewalk

import (
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
)

// Emit calls fn for every run of pages in [0, HWM), in order, each page in
// exactly one run. fn's error stops it and is returned.
func (w *Walk) Emit(fn func(Use) error) error {
	for p := uint64(0); p < w.pages; {
		u := w.use(p)
		if err := fn(u); err != nil {
			return err
		}
		p += uint64(u.Pages)
	}
	if w.pages < w.hwm {
		u := Use{ID: w.pages, Pages: int(w.hwm - w.pages), Kind: Damaged,
			Err: page.Corruptf(w.pages, "pages %d to %d are below the high-water mark but past the end of the file", w.pages, w.hwm-1)}
		if err := fn(u); err != nil {
			return err
		}
	}
	return nil
}

func (w *Walk) isFree(p page.ID) bool { return w.free[p/64]&(1<<(p%64)) != 0 }

// freeKnown reports whether page p's free state is known, and if not why.
func (w *Walk) freeKnown(p page.ID) (bool, error) {
	if w.freeErr != nil {
		return false, w.freeErr
	}
	if err, ok := w.regionErr[p/w.rp]; ok {
		return false, fmt.Errorf("free set of region %d not known: %w", p/w.rp, err)
	}
	return true, nil
}

// firstErr returns the first problem the walk recorded for a page in
// [from, to).
func (w *Walk) firstErr(from, to page.ID) error {
	if len(w.errs) == 0 {
		return nil
	}
	for p := from; p < to; p++ {
		if err, ok := w.errs[p]; ok {
			return err
		}
	}
	return nil
}

// use describes the run of pages starting at p (p < w.pages).
func (w *Walk) use(p page.ID) Use {
	switch {
	case p < 2:
		return w.metaUse(p)
	case w.fixed(p):
		return w.mapUse(p)
	}
	st := w.state[p]
	kind := Kind(st & kindMask)
	known, unknownErr := w.freeKnown(p)
	end := p + 1
	if kind != 0 {
		// A run: its pages carry the same kind and owner; it ends at the
		// next run's start or at a fixed page.
		for end < w.pages && w.state[end]&runStart == 0 && Kind(w.state[end]&kindMask) == kind &&
			w.owner[end] == w.owner[p] && !w.fixed(end) {
			end++
		}
		u := Use{ID: p, Pages: int(end - p), Kind: kind, Checksum: Checksum(st >> sumShift & 3),
			Depth: int(w.depth[p])}
		if o := w.owners[w.owner[p]]; w.owner[p] != 0 {
			u.Bucket, u.Key = o.bucket, o.key
		}
		if st&runStart != 0 {
			if h, err := page.ReadHeader(p, w.data[p*uint64(w.ps):]); err == nil {
				u.Txid, u.Count = h.Txid, int(h.Count)
			}
		}
		u.Err = w.firstErr(p, end)
		if u.Err == nil && known && kind != Damaged {
			for q := p; q < end; q++ {
				if w.isFree(q) {
					u.Err = page.Corruptf(q, "page is both reachable and free")
					break
				}
			}
		}
		return u
	}
	// A stretch of pages no tree reached: free, leaked or unknown, in
	// runs that stop at fixed pages and region boundaries.
	var free bool
	if known {
		free = w.isFree(p)
	}
	for end < w.pages && w.state[end] == 0 && !w.fixed(end) && end/w.rp == p/w.rp {
		if known && w.isFree(end) != free {
			break
		}
		end++
	}
	u := Use{ID: p, Pages: int(end - p)}
	switch {
	case !known:
		u.Kind, u.Err = Unknown, unknownErr
	case free:
		u.Kind = Free
	default:
		u.Kind = Unreachable
		why := "leaked"
		if w.walkErr {
			why = "leaked, or below a damaged page"
		}
		u.Err = page.Corruptf(p, "%d page(s) neither reachable nor free (%s)", end-p, why)
	}
	if err := w.firstErr(p, end); err != nil {
		u.Err = err
	}
	return u
}

// metaUse describes meta page p (0 or 1).
func (w *Walk) metaUse(p page.ID) Use {
	u := Use{ID: p, Pages: 1, Kind: Meta}
	buf := w.data[p*uint64(w.ps) : (p+1)*uint64(w.ps)]
	if page.IsZeroPage(buf) {
		u.Err = page.Corruptf(p, "meta page is all zeros")
		return u
	}
	m, err := page.DecodeMeta(p, buf)
	if err != nil {
		u.Checksum, u.Err = ChecksumBad, err
		u.Txid, _ = page.ClaimedTxid(buf)
		return u
	}
	u.Checksum, u.Txid = ChecksumOK, m.Txid
	u.Current = m.Txid == w.meta.Txid && m.HWM == w.meta.HWM && m.Root == w.meta.Root
	if u.Current {
		u.Err = w.countErr
		if u.Err == nil {
			u.Err = w.other
		}
	}
	return u
}

// mapUse describes map slot p.
func (w *Walk) mapUse(p page.ID) Use {
	r := p / w.rp
	u := Use{ID: p, Pages: 1, Kind: RegionMap}
	slot := 0
	if p == page.MapSlot(w.ps, r, 1) {
		slot = 1
	}
	if w.meta.Selector != nil {
		sel := 0
		if page.BitmapGet(w.meta.Selector, r) {
			sel = 1
		}
		u.Current = sel == slot
	}
	buf := w.data[p*uint64(w.ps) : (p+1)*uint64(w.ps)]
	if !page.IsZeroPage(buf) {
		h, _ := page.ReadHeader(p, buf)
		u.Txid, u.Count = h.Txid, int(h.Count)
		u.Checksum = ChecksumOK
		if _, _, err := page.DecodeRegionMap(buf, w.ps, p); err != nil {
			u.Checksum = ChecksumBad
		}
	}
	if u.Current {
		u.Err = w.regionErr[r]
	}
	if err := w.firstErr(p, p+1); err != nil && u.Err == nil {
		u.Err = err
	}
	return u
}

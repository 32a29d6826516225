package rivet

import (
	"encoding/binary"
	"errors"
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// PageKind says what a page is used for in a transaction's snapshot
// (docs/design.md §2): WalkPages and Page report it for every page below
// the high-water mark.
type PageKind uint8

// The page kinds. Every page in [0, HWM) is exactly one of them.
const (
	// PageMeta is one of the two meta pages (pages 0 and 1).
	PageMeta PageKind = iota + 1
	// PageRegionMap is one of a region's two map slots, current or not.
	PageRegionMap
	// PageBranch, PageLeaf and PageBlob are runs reachable from the
	// snapshot's root: tree nodes and the extents of large values.
	PageBranch
	PageLeaf
	PageBlob
	// PageFree is free in the snapshot's free set (the region maps its
	// meta names, with the meta's delta applied).
	PageFree
	// PageUnreachable is neither reachable nor free: leaked (Check reports
	// it) or below a damaged page, which hides what it points to.
	PageUnreachable
	// PageDamaged is a run a valid page points to that failed validation
	// (wrong type, own id or txid, checksum, bounds), or pages past the end
	// of a truncated file.
	PageDamaged
	// PageUnknown is not reachable, and whether it is free is not known:
	// its region's map could not be read, or the free set of the snapshot
	// is not available (see WalkPages).
	PageUnknown
)

// String returns the kind's name as the rivet tool prints it.
func (k PageKind) String() string {
	switch k {
	case PageMeta:
		return "meta"
	case PageRegionMap:
		return "regionmap"
	case PageBranch:
		return "branch"
	case PageLeaf:
		return "leaf"
	case PageBlob:
		return "blob"
	case PageFree:
		return "free"
	case PageUnreachable:
		return "unreachable"
	case PageDamaged:
		return "damaged"
	case PageUnknown:
		return "unknown"
	}
	return fmt.Sprintf("PageKind(%d)", uint8(k))
}

// ChecksumState says whether a page's checksum was verified.
type ChecksumState uint8

const (
	// ChecksumNotStored: nothing records a checksum for the page (free,
	// unreachable and unknown pages, a map slot never written).
	ChecksumNotStored ChecksumState = iota
	// ChecksumOK: the page's CRC-32C matches — its parent's record for a
	// tree node or blob extent, its own for a meta or region map.
	ChecksumOK
	// ChecksumBad: it does not, or the page could not be read to compute it.
	ChecksumBad
)

// String returns "ok", "bad" or "not stored".
func (c ChecksumState) String() string {
	switch c {
	case ChecksumOK:
		return "ok"
	case ChecksumBad:
		return "bad"
	}
	return "not stored"
}

// PageUse describes one run of pages of a snapshot: a meta, a map slot, a
// tree node or blob extent (which may span several pages), or a stretch of
// free, unreachable, damaged or unknown pages.
type PageUse struct {
	// ID is the run's first page and Pages its length (at least 1).
	ID    Pgid
	Pages int
	Kind  PageKind
	// Txid is the transaction that wrote the run, as its header says (a
	// meta: its txid; 0 for free, unreachable and unknown pages, whose
	// bytes are not part of the state).
	Txid uint64
	// Count is the header's count: elements of a branch or leaf, payload
	// bytes of a blob extent, free pages of a region map; 0 otherwise.
	Count int
	// Checksum says whether the run's checksum was verified.
	Checksum ChecksumState
	// Bucket is the path of the bucket whose tree holds a branch, leaf,
	// blob or damaged run: empty for the root bucket's own tree (the
	// top-level bucket records), one name for a top-level bucket, more for
	// nested ones. The slices are shared between uses and must not be
	// modified; unlike keys read in a transaction they stay valid after it.
	Bucket [][]byte
	// Depth is the run's level in its bucket's tree, 0 at the tree's root
	// (a blob: the depth of the leaf that refers to it).
	Depth int
	// Key is, for a blob run, the key whose value it stores (a copy).
	Key []byte
	// Current is set for the meta that describes the snapshot and for the
	// map slot of each region that the snapshot's meta selects.
	Current bool
	// Err says what is wrong with the run: the damage (an error matching
	// errors.ErrCorrupt, naming the page), what Check finds wrong with a
	// reachable run, a leak, or why the free set is unknown. Nil when
	// nothing is wrong.
	Err error
}

// PageInfo describes the page run holding one page; Tx.Page returns it.
// ID, Type, Count and OverflowCount are bbolt's fields; Use has rivet's.
type PageInfo struct {
	// ID is the first page of the run (the page asked for, unless it lies
	// inside a multi-page run).
	ID int
	// Type is Use.Kind's name: "meta", "regionmap", "branch", "leaf",
	// "blob", "free", "unreachable", "damaged" or "unknown".
	Type string
	// Count is the header's count (Use.Count).
	Count int
	// OverflowCount is the number of pages after the first in the run.
	OverflowCount int
	// Use is the full description of the run.
	Use PageUse
}

// Page returns what the page id is used for in the transaction's snapshot,
// or nil if id is outside [0, HWM). It is bbolt's Tx.Page with rivet's
// fields added (PageInfo.Use); pages inside a multi-page run describe the
// whole run. Each call walks the whole snapshot, as Check does (the use of
// a page — its owner, whether it is reachable — is only known from its
// parents); to list many pages, call WalkPages once.
func (tx *Tx) Page(id int) (*PageInfo, error) {
	if tx.ended() {
		return nil, ErrTxClosed
	}
	if tx.db.bolt != nil {
		return nil, errBboltBacked("Tx.Page")
	}
	if id < 0 || uint64(id) >= tx.meta.HWM {
		return nil, nil
	}
	var found *PageInfo
	stop := errors.New("found")
	err := tx.WalkPages(func(u PageUse) error {
		if uint64(u.ID)+uint64(u.Pages) <= uint64(id) {
			return nil
		}
		found = &PageInfo{ID: int(u.ID), Type: u.Kind.String(), Count: u.Count, OverflowCount: u.Pages - 1, Use: u}
		return stop
	})
	if err != nil && err != stop {
		return nil, err
	}
	return found, nil
}

// WalkPages calls fn for every run of pages of the transaction's snapshot,
// in page order, covering every page in [0, HWM) exactly once: the metas,
// the region-map slots, every branch, leaf and blob run reachable from the
// root (with the bucket that owns it and its depth), the free pages (in
// runs), and pages neither reachable nor free. fn's error stops the walk
// and is returned.
//
// It does not stop at damage: a run that fails validation is reported as
// PageDamaged with the error (the bucket it belongs to comes from its
// parent), and the walk goes on with the rest. It validates what Check
// validates — structure, key order, the checksum each parent records — so
// the problems it attaches to uses are the ones Check reports, and counts
// of reachable pages agree with Check and Bucket.Stats.
//
// The free set is that of the snapshot: on a read-only DB the region maps
// its meta names, with the meta's delta applied; on a writable one, the
// free-space map when the snapshot is the newest state and no write
// transaction is running (the one Check compares with), or, in a write
// transaction that has not allocated yet, its own. Otherwise the pages that
// are not reachable are reported as PageUnknown, with an Err saying why.
//
// Cost: a read of every reachable page (checksums included) and of every
// region map; memory about six bytes per page of the file. It allocates in
// proportion to the file's size, never to what its bytes claim.
func (tx *Tx) WalkPages(fn func(PageUse) error) error {
	if tx.ended() {
		return ErrTxClosed
	}
	if tx.db.bolt != nil {
		return errBboltBacked("Tx.WalkPages")
	}
	w := tx.newPageWalk()
	w.walkTrees()
	tx.readFreeSet(w)
	return w.emit(fn)
}

// Per-page state bits of a pageWalk.
const (
	pwKindMask  = 0x0f // PageBranch, PageLeaf, PageBlob or PageDamaged; 0: not reached
	pwStart     = 0x10 // the first page of a run
	pwSumShift  = 5    // ChecksumState in bits 5-6
	pwMaxErrors = 1 << 20
)

// pageOwner is an entry of a pageWalk's owner table.
type pageOwner struct {
	bucket [][]byte
	key    []byte // blobs: the key
}

// pageWalk is the state of one WalkPages call.
//
// Invariant: every per-page slice has one entry per page in [0, pages),
// where pages = min(HWM, the pages the mapping holds): allocation is
// bounded by the file's size even when a damaged meta claims a larger HWM.
type pageWalk struct {
	ps    int
	meta  *page.Meta
	data  []byte
	hwm   uint64 // the meta's HWM
	pages uint64 // pages present in data, at most hwm
	rp    uint64 // pages per region

	state  []uint8
	owner  []uint32 // index into owners, for pages of reached runs
	depth  []uint8
	owners []pageOwner
	byPath map[string]uint32
	// lastPath and lastOwner cache the bucket of the previous run.
	lastPath  [][]byte
	lastOwner uint32

	// readahead is the transaction's, for the walk of the trees.
	readahead btree.Readahead

	errs    map[page.ID]error // the first problem the walk found per page
	walkErr bool              // the walk found a problem
	other   error             // a problem naming no page

	free      []uint64         // bit p: page p free (only where known)
	regionErr map[uint64]error // regions whose free set is unknown, and why
	freeErr   error            // set: the whole free set is unknown, and why
	countErr  error            // the maps do not add up to the meta's free count
}

func (tx *Tx) newPageWalk() *pageWalk {
	ps := tx.env.PageSize
	hwm := tx.meta.HWM
	data := tx.env.Data
	pages := min(hwm, uint64(len(data))/uint64(ps))
	w := &pageWalk{
		ps: ps, meta: tx.meta, data: data, hwm: hwm, pages: pages, readahead: tx.env.Readahead,
		rp:     page.RegionPages(ps),
		state:  make([]uint8, pages),
		owner:  make([]uint32, pages),
		depth:  make([]uint8, pages),
		owners: []pageOwner{{}}, // 0: no owner
		byPath: map[string]uint32{},
		errs:   map[page.ID]error{},
	}
	return w
}

// fetch returns the bytes of pages [id, id+n), if the file holds them.
func (w *pageWalk) fetch(id page.ID, n uint64) ([]byte, error) {
	if n == 0 || id >= w.pages || n > w.pages-id {
		return nil, page.Corruptf(id, "run of %d pages beyond the file", n)
	}
	return w.data[id*uint64(w.ps) : (id+n)*uint64(w.ps)], nil
}

// fixed reports whether page p is a meta or a map slot.
func (w *pageWalk) fixed(p page.ID) bool {
	r := p / w.rp
	return p < 2 || p < page.RegionFirstData(w.ps, r)
}

// walkTrees validates the trees as Check does (pass 1, the btree
// Walker), then finds the owner of every run it accepted and of every run
// it rejected below an accepted parent (pass 2, Walker.Owners).
func (w *pageWalk) walkTrees() {
	report := func(err error) bool {
		w.walkErr = true
		var ce *rerrors.CorruptError
		if errors.As(err, &ce) {
			if _, ok := w.errs[ce.Page]; !ok && len(w.errs) < pwMaxErrors {
				w.errs[ce.Page] = err
			}
		} else if w.other == nil {
			w.other = err
		}
		return true
	}
	walker := btree.Walker{
		Fetch:           w.fetch,
		PageSize:        w.ps,
		HWM:             w.hwm,
		All:             true,
		VerifyChecksums: true,
		Report:          report,
		Readahead:       w.readahead,
		Visit: func(id page.ID, n uint64, t page.Type) error {
			end := min(id+n, w.pages)
			for p := id; p < end; p++ {
				if w.state[p] != 0 {
					// Check's words, so both report the same problem.
					return page.Corruptf(p, "page reachable twice (%v run at %d)", t, id)
				}
			}
			kind := PageLeaf
			switch t {
			case page.TypeBranch:
				kind = PageBranch
			case page.TypeBlob:
				kind = PageBlob
			}
			for p := id; p < end; p++ {
				w.state[p] = uint8(kind) | uint8(ChecksumOK)<<pwSumShift
			}
			if id < end {
				w.state[id] |= pwStart
			}
			return nil
		},
	}
	_ = walker.Walk(w.meta.Root)

	accepted := func(id page.ID) bool {
		if id >= w.pages || w.state[id]&pwStart == 0 {
			return false
		}
		k := PageKind(w.state[id] & pwKindMask)
		return k == PageBranch || k == PageLeaf || k == PageBlob
	}
	// The second pass never reads past the file: its HWM is the pages the
	// file holds, so a reference beyond them is reported, with Pages 0,
	// for its parent to carry.
	owners := btree.Walker{Fetch: w.fetch, PageSize: w.ps, HWM: w.pages}
	owners.Owners(w.meta.Root, accepted, w.owned)
}

// owned records what Walker.Owners reports about one run.
func (w *pageWalk) owned(r btree.RunOwner) {
	if r.Pages == 0 {
		// A reference outside the file: the walk's error names the
		// missing page; it belongs to the parent that holds the reference.
		if err, ok := w.errs[r.ID]; ok {
			if _, has := w.errs[r.Parent]; !has {
				w.errs[r.Parent] = err
			}
			if r.ID < 2 || r.ID >= w.pages {
				delete(w.errs, r.ID)
			}
		}
		return
	}
	o := w.ownerOf(r.Bucket, r.Key, r.Type == page.TypeBlob || r.Key != nil)
	depth := uint8(min(r.Depth, 255))
	if r.Accepted {
		end := min(r.ID+r.Pages, w.pages)
		for p := r.ID; p < end; p++ {
			w.owner[p], w.depth[p] = o, depth
		}
		return
	}
	if w.state[r.ID] != 0 {
		// The reference points into a run reached another way: the walk
		// reported it against the run it lands in.
		return
	}
	sum := ChecksumBad
	if r.Summed && r.ChecksumOK {
		sum = ChecksumOK
	}
	end := min(r.ID+r.Pages, w.pages)
	for p := r.ID; p < end; p++ {
		if w.state[p] != 0 || (p > r.ID && w.fixed(p)) {
			break
		}
		w.state[p] = uint8(PageDamaged) | uint8(sum)<<pwSumShift
		w.owner[p], w.depth[p] = o, depth
	}
	w.state[r.ID] |= pwStart
	if _, ok := w.errs[r.ID]; !ok {
		// The walk stopped at the parent; the run is named by its own
		// page, with the parent's problem as the reason.
		if perr, ok := w.errs[r.Parent]; ok {
			w.errs[r.ID] = page.Corruptf(r.ID, "not validated: its parent page %d failed a check (%v)", r.Parent, perr)
		} else {
			w.errs[r.ID] = page.Corruptf(r.ID, "not validated (parent page %d)", r.Parent)
		}
	}
}

// ownerOf returns the owner table index of bucket (and, for a blob, key),
// adding it if needed. The table holds one entry per bucket with a page
// and one per blob: never more entries than runs.
func (w *pageWalk) ownerOf(bucket [][]byte, key []byte, blob bool) uint32 {
	o, ok := w.lastOwner, w.lastOwner != 0 && sameSlice(bucket, w.lastPath)
	if !ok {
		o = w.internBucket(bucket)
		w.lastPath, w.lastOwner = bucket, o
	}
	if !blob || len(w.owners) >= 1<<32-1 {
		return o
	}
	w.owners = append(w.owners, pageOwner{bucket: w.owners[o].bucket, key: append([]byte{}, key...)})
	return uint32(len(w.owners) - 1)
}

// sameSlice reports whether a and b are the same slice (Walker.Owners
// passes one path slice for all the runs of a bucket's tree).
func sameSlice(a, b [][]byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// internBucket returns the owner table index of bucket, adding a copy of
// the path if it is new.
func (w *pageWalk) internBucket(bucket [][]byte) uint32 {
	var id []byte
	for _, name := range bucket {
		id = binary.AppendUvarint(id, uint64(len(name)))
		id = append(id, name...)
	}
	o, ok := w.byPath[string(id)]
	if !ok {
		if len(w.owners) >= 1<<32-1 {
			return 0
		}
		path := make([][]byte, len(bucket))
		for i, name := range bucket {
			path[i] = append([]byte{}, name...)
		}
		o = uint32(len(w.owners))
		w.owners = append(w.owners, pageOwner{bucket: path})
		w.byPath[string(id)] = o
	}
	return o
}

// pageLoader reads region maps from the transaction's mapping.
type pageLoader struct{ w *pageWalk }

func (l pageLoader) ReadPages(id page.ID, n uint64) ([]byte, error) { return l.w.fetch(id, n) }

// readFreeSet fills w.free with the snapshot's free set, where it can be
// known (see WalkPages).
func (tx *Tx) readFreeSet(w *pageWalk) {
	w.free = make([]uint64, (w.pages+63)/64)
	w.regionErr = map[uint64]error{}
	db := tx.db
	collect := func(m *spacemap.Map) {
		err := m.ForEachRegionFree(func(r uint64, free []uint64, err error) error {
			if err != nil {
				w.regionErr[r] = err
				return nil
			}
			// A region is a whole number of words (R is a multiple of 64
			// for every page size), so its bitmap lands word for word.
			base := r * w.rp / 64
			for i, word := range free {
				if base+uint64(i) >= uint64(len(w.free)) {
					break
				}
				w.free[base+uint64(i)] = word
			}
			return nil
		})
		w.countErr = err
	}
	switch {
	case db.readOnly:
		m, err := spacemap.New(spacemap.Config{
			PageSize:        w.ps,
			HWM:             w.meta.HWM,
			Txid:            w.meta.Txid,
			Selector:        w.meta.Selector,
			FirstFreeRegion: w.meta.FirstFreeRegion,
			FreePages:       w.meta.FreePages,
			Delta:           w.meta.Delta,
			Loader:          pageLoader{w},
		})
		if err != nil {
			w.freeErr = fmt.Errorf("the free set of the snapshot cannot be read: %w", err)
			return
		}
		collect(m)
	case tx.writable:
		if tx.spaceOps != 0 {
			w.freeErr = errors.New("free set not known: this write transaction has allocated or freed pages")
			return
		}
		db.spaceMu.Lock()
		defer db.spaceMu.Unlock()
		collect(db.space)
	default:
		if !db.writer.TryLock() {
			w.freeErr = errors.New("free set not known: a write transaction is running")
			return
		}
		defer db.writer.Unlock()
		if db.head.Txid != w.meta.Txid || db.head.Root != w.meta.Root {
			w.freeErr = errors.New("free set not known: a newer state was committed after this snapshot")
			return
		}
		db.spaceMu.Lock()
		defer db.spaceMu.Unlock()
		collect(db.space)
	}
}

// emit calls fn for every run of pages in [0, HWM), in order.
func (w *pageWalk) emit(fn func(PageUse) error) error {
	for p := uint64(0); p < w.pages; {
		u := w.use(p)
		if err := fn(u); err != nil {
			return err
		}
		p += uint64(u.Pages)
	}
	if w.pages < w.hwm {
		u := PageUse{ID: Pgid(w.pages), Pages: int(w.hwm - w.pages), Kind: PageDamaged,
			Err: page.Corruptf(w.pages, "pages %d to %d are below the high-water mark but past the end of the file", w.pages, w.hwm-1)}
		if err := fn(u); err != nil {
			return err
		}
	}
	return nil
}

func (w *pageWalk) isFree(p page.ID) bool { return w.free[p/64]&(1<<(p%64)) != 0 }

// freeKnown reports whether page p's free state is known, and if not why.
func (w *pageWalk) freeKnown(p page.ID) (bool, error) {
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
func (w *pageWalk) firstErr(from, to page.ID) error {
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
func (w *pageWalk) use(p page.ID) PageUse {
	switch {
	case p < 2:
		return w.metaUse(p)
	case w.fixed(p):
		return w.mapUse(p)
	}
	st := w.state[p]
	kind := PageKind(st & pwKindMask)
	known, unknownErr := w.freeKnown(p)
	end := p + 1
	if kind != 0 {
		// A run: its pages carry the same kind and owner; it ends at the
		// next run's start or at a fixed page.
		for end < w.pages && w.state[end]&pwStart == 0 && PageKind(w.state[end]&pwKindMask) == kind &&
			w.owner[end] == w.owner[p] && !w.fixed(end) {
			end++
		}
		u := PageUse{ID: Pgid(p), Pages: int(end - p), Kind: kind, Checksum: ChecksumState(st >> pwSumShift & 3),
			Depth: int(w.depth[p])}
		if o := w.owners[w.owner[p]]; w.owner[p] != 0 {
			u.Bucket, u.Key = o.bucket, o.key
		}
		if st&pwStart != 0 {
			if h, err := page.ReadHeader(p, w.data[p*uint64(w.ps):]); err == nil {
				u.Txid, u.Count = h.Txid, int(h.Count)
			}
		}
		u.Err = w.firstErr(p, end)
		if u.Err == nil && known && kind != PageDamaged {
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
	u := PageUse{ID: Pgid(p), Pages: int(end - p)}
	switch {
	case !known:
		u.Kind, u.Err = PageUnknown, unknownErr
	case free:
		u.Kind = PageFree
	default:
		u.Kind = PageUnreachable
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
func (w *pageWalk) metaUse(p page.ID) PageUse {
	u := PageUse{ID: Pgid(p), Pages: 1, Kind: PageMeta}
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
func (w *pageWalk) mapUse(p page.ID) PageUse {
	r := p / w.rp
	u := PageUse{ID: Pgid(p), Pages: 1, Kind: PageRegionMap}
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

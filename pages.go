package rivet

import (
	"errors"
	"fmt"

	"github.com/rivetkv/rivet/internal/pagewalk"
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
	if err := tx.flushDeferred(); err != nil {
		return err
	}
	w := pagewalk.New(tx.env.Data, tx.env.PageSize, tx.meta)
	w.Readahead = tx.env.Readahead
	w.Trees()
	tx.readFreeSet(w)
	return w.Emit(func(u pagewalk.Use) error { return fn(publicPageUse(u)) })
}

// readFreeSet hands w the snapshot's free set from where WalkPages says it
// comes, holding the locks that guard it while w reads it.
func (tx *Tx) readFreeSet(w *pagewalk.Walk) {
	db := tx.db
	switch {
	case db.readOnly:
		w.ReadFreeSet(pagewalk.FreeSource{}) // the region maps the meta names
	case tx.writable:
		if tx.spaceOps != 0 {
			w.ReadFreeSet(pagewalk.FreeSource{Unknown: errors.New("free set not known: this write transaction has allocated or freed pages")})
			return
		}
		db.spaceMu.Lock()
		defer db.spaceMu.Unlock()
		w.ReadFreeSet(pagewalk.FreeSource{Space: db.space})
	default:
		if !db.writer.TryLock() {
			w.ReadFreeSet(pagewalk.FreeSource{Unknown: errors.New("free set not known: a write transaction is running")})
			return
		}
		defer db.writer.Unlock()
		if db.head.Txid != tx.meta.Txid || db.head.Root != tx.meta.Root {
			w.ReadFreeSet(pagewalk.FreeSource{Unknown: errors.New("free set not known: a newer state was committed after this snapshot")})
			return
		}
		db.spaceMu.Lock()
		defer db.spaceMu.Unlock()
		w.ReadFreeSet(pagewalk.FreeSource{Space: db.space})
	}
}

// pageKinds and checksumStates map the walk's values to the public ones,
// so neither side depends on the other's numbering.
var (
	pageKinds = [...]PageKind{
		pagewalk.Meta: PageMeta, pagewalk.RegionMap: PageRegionMap,
		pagewalk.Branch: PageBranch, pagewalk.Leaf: PageLeaf, pagewalk.Blob: PageBlob,
		pagewalk.Free: PageFree, pagewalk.Unreachable: PageUnreachable,
		pagewalk.Damaged: PageDamaged, pagewalk.Unknown: PageUnknown,
	}
	checksumStates = [...]ChecksumState{
		pagewalk.ChecksumNotStored: ChecksumNotStored,
		pagewalk.ChecksumOK:        ChecksumOK,
		pagewalk.ChecksumBad:       ChecksumBad,
	}
)

// publicPageUse converts one use; it copies no bytes (Bucket and Key are
// the walk's slices, which outlive it).
func publicPageUse(u pagewalk.Use) PageUse {
	return PageUse{
		ID: Pgid(u.ID), Pages: u.Pages, Kind: pageKinds[u.Kind],
		Txid: u.Txid, Count: u.Count, Checksum: checksumStates[u.Checksum],
		Bucket: u.Bucket, Depth: u.Depth, Key: u.Key, Current: u.Current, Err: u.Err,
	}
}

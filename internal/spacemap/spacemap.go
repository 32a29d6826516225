// Package spacemap keeps rivet's free-space maps and allocates pages
// (docs/design.md §2.6 and §4).
//
// The file is cut into regions of R = page.RegionPages(pageSize) pages. Each
// region's free set lives on disk as a map page in one of its two map slots;
// the meta's selector bitmap names the current slot. The Map loads a region's
// map lazily, the first time an allocation or a free needs it, and keeps two
// bitmaps per loaded region:
//
//   - free: pages free in the newest committed state. This is what the next
//     sync point writes.
//   - allocatable: pages that may be handed out now.
//
// Invariant: allocatable ⊆ free, and a page is in at most one of {live,
// pending, allocatable}: a page freed at txn N is set in free when N
// commits but stays out of allocatable (pending) until N <= steady and every
// reader's snapshot is >= N (Release) — or, for a page written after the
// newest state a sync point was begun for (a young page, see FreeBorn),
// until no reader's snapshot lies between its writing and N (ReleaseYoung).
//
// Invariant: the bits of map slots, metas and pages at or above the HWM are
// clear in both bitmaps, so every run found in a bitmap lies inside one
// region's data pages and below the HWM.
//
// A Map is not safe for concurrent use: it belongs to the writer, which holds
// the write lock around every call. Misusing the transaction protocol
// (Allocate outside Begin/Commit, PrepareSync inside a transaction, ...) is a
// programming error and panics; bad bytes from disk never panic, they are
// returned as errors matching errors.ErrCorrupt.
package spacemap

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// Loader reads pages for the Map. The pager implements it with File.ReadAt,
// so region loads are ordinary, countable I/O that does not depend on the
// memory map covering the page.
type Loader interface {
	// ReadPages returns the n pages starting at id (n·pageSize bytes). The
	// Map neither modifies nor keeps the returned slice.
	ReadPages(id page.ID, n uint64) ([]byte, error)
}

// Config describes the committed state a Map starts from: the fields come
// from the meta being opened.
type Config struct {
	// PageSize is the file's page size.
	PageSize int
	// HWM is the meta's high-water mark: pages [0, HWM) belong to the
	// state. 0 means a fresh file with no state yet: the Map creates region
	// 0 in memory and starts with HWM = page.RegionFirstData(PageSize, 0).
	HWM uint64
	// Txid is the meta's txid. No map written by a later sync point can be
	// part of this state, so a loaded map with a larger txid is corrupt.
	Txid uint64
	// Selector is the meta's selector bitmap: bit r set means region r's
	// current map is in slot B, clear means slot A. Its length must be
	// ceil(regions/8) with the bits past the last region clear.
	Selector []byte
	// FirstFreeRegion is the meta's hint: regions below it have no free
	// pages, so they are never loaded to search for space.
	FirstFreeRegion uint32
	// FreePages is the meta's free-page count, kept up to date as a
	// statistic (Stats, SyncImage) and checked by ForEachFree.
	FreePages uint64
	// MaxPages bounds the HWM; 0 means unlimited. An allocation that would
	// move the HWM past it fails with errors.ErrMaxSizeReached.
	MaxPages uint64
	// Delta is the meta's free-space delta: runs whose state differs from
	// the selected maps (page.Meta.Delta). It is applied to a region when
	// the region is loaded.
	Delta []page.DeltaRun
	// MaxDeltaRuns bounds the delta a sync point may put in its meta
	// instead of writing region maps: 0 means as many runs as the meta page
	// has room for (page.MaxDeltaRuns), a negative value means none, so
	// every region that changed gets its map written (tests use it to
	// exercise both paths).
	MaxDeltaRuns int
	// Loader reads region maps. It may be nil only when HWM is 0.
	Loader Loader
}

// SyncImage is what a sync point writes for the free-space maps: the meta
// fields that describe the free set of the state being synced, and the map
// pages of the regions whose changes are not carried in the meta's delta.
//
// A region whose free set differs from its map on disk is either written
// (a page in Pages, its bit in Changed) or described by runs in Delta.
// When the differences of all such regions fit in the meta (MaxDeltaRuns),
// only regions with no map on disk yet are written: a one-key commit then
// writes no map page at all. Otherwise every differing region is written
// and Delta keeps only the runs of regions not loaded since open.
type SyncImage struct {
	// Txid is the sync point's txid, stored in every page of Pages.
	Txid uint64
	// Pages holds one map page per dirty region, each for the slot the
	// steady selector does not name (invariant 2: the steady map is never
	// overwritten), in ascending page order.
	Pages []page.Run
	// HWM is the high-water mark of the state being synced.
	HWM uint64
	// RegionCount is ceil(HWM/R), the number of regions of that state.
	RegionCount uint64
	// Selector is the new selector: the steady one with the written regions
	// flipped. Length ceil(RegionCount/8).
	Selector []byte
	// Changed has bit r set for every region written by this sync point.
	// Same length as Selector.
	Changed []byte
	// FirstFreeRegion is the lowest region that may have free pages.
	FirstFreeRegion uint32
	// FreePages is the number of free pages in the state (pending included).
	FreePages uint64
	// Delta is the meta's free-space delta (page.Meta.Delta), ascending.
	Delta []page.DeltaRun

	// gen is the Map's change generation when the image was taken; SyncDone
	// leaves regions changed after it dirty.
	gen uint64
	// prepared is the Map's prepared txid before the image raised it, for
	// AbortSync.
	prepared uint64
	// written holds, for each region in Pages, the free bitmap the page
	// encodes: it becomes the region's disk bitmap at SyncDone.
	written []writtenMap
	// same lists the dirty regions whose free bitmap equalled their map on
	// disk when the image was taken: SyncDone may mark them clean.
	same []uint64
}

// writtenMap is one region map a SyncImage writes.
type writtenMap struct {
	r    uint64
	bits []uint64
}

// Stats describes the Map's current state.
type Stats struct {
	// HWM is the high-water mark including the current transaction.
	HWM uint64
	// Regions is ceil(HWM/R).
	Regions uint64
	// FreePages counts pages free in the newest state, pending ones
	// included, in all regions (loaded or not).
	FreePages uint64
	// PendingPages counts committed frees not yet released.
	PendingPages uint64
	// AllocatablePages counts the pages that may be handed out now, among
	// loaded regions.
	AllocatablePages uint64
	// LoadedRegions is the number of regions held in memory.
	LoadedRegions int
	// DirtyRegions is the number of regions whose free set may differ from
	// their map on disk: the next sync point writes them or carries their
	// differences in the meta's delta.
	DirtyRegions int
	// DeltaRuns is the number of runs the last sync point put in its meta's
	// delta instead of writing region maps.
	DeltaRuns int
	// RegionLoads counts map pages read through the Loader.
	RegionLoads uint64
}

// MaxRunPages returns the longest run Allocate accepts for a page size: the
// data pages of region 0, the smallest region (it also holds the metas), so
// that a run of that length fits into any fresh region.
func MaxRunPages(pageSize int) uint64 {
	return page.RegionPages(pageSize) - (page.RegionFirstData(pageSize, 0))
}

// maxRegions is the number of regions a meta can describe: its selector and
// changed bitmaps share the page after the 128-byte fixed part
// (docs/design.md §2.2, §7).
func maxRegions(pageSize int) uint64 { return uint64(pageSize-128) * 4 }

// run is a page run [id, id+n).
type run struct {
	id page.ID
	n  uint64
}

// batch is the runs freed by one committed transaction.
type batch struct {
	txid  uint64
	runs  []run
	pages uint64
}

// youngBatch is the young runs (FreeBorn) freed by one committed
// transaction: every page was written at txid born or later, after the
// newest state any sync point was begun for.
type youngBatch struct {
	txid, born uint64
	runs       []run
	pages      uint64
}

// region is a loaded (or created) region.
//
// Invariant: disk is the bitmap of the map the steady selector names (nil
// for a region created since the last sync point, which has none), and
// !dirty implies free == disk. The steady state's free set of the region is
// disk with the steady meta's delta runs applied.
//
// Invariants: nfree == popcount(free), nalloc == popcount(alloc),
// alloc ⊆ free, no set bit below reserved or at/above the HWM; no word below
// allocHint has a set alloc bit; if noFit != 0, alloc holds no run of noFit
// or more pages.
type region struct {
	idx    uint64
	free   []uint64
	alloc  []uint64
	disk   []uint64
	nfree  uint64
	nalloc uint64
	// allocHint is the lowest word that may have an allocatable bit.
	allocHint int
	// noFit caches a failed search: 0 = unknown. It is reset whenever a
	// bit is added to alloc, and stays valid while bits are only removed.
	noFit uint64
	// dirty is set when free may differ from disk; dirtyGen is the Map's
	// generation at the latest change.
	dirty    bool
	dirtyGen uint64
	// txFreed holds the current transaction's frees in this region (nil
	// until the region sees one); [txLo, txHi) bounds the set bits.
	txFreed    []uint64
	txLo, txHi uint64
	// runs summarises alloc's runs for allocation under a locality slack
	// (locality.go); nil until first needed. Invariant: when not nil, it
	// summarises alloc as it is (allocChanged follows every change).
	runs *runTree
}

// txState is the undo log of the open write transaction.
type txState struct {
	active     bool
	txid       uint64
	hwm        uint64 // HWM at Begin
	freePages  uint64 // freePages at Begin
	firstFree  uint64 // firstFree at Begin
	allocs     []run  // allocations from free space, in order
	freed      []*region
	dirtied    []*region // regions that went from clean to dirty in this txn
	freedPages uint64
	// young holds the transaction's young frees (also set in the regions'
	// txFreed); youngBorn is the oldest txid that wrote one of them.
	young     []run
	youngBorn uint64
	// shrink is set by ShrinkTo, which must be the transaction's only
	// change; Rollback undoes it.
	shrink *shrinkUndo
	// limit, if not 0, is the page no allocation of this transaction may
	// reach (SetLimit).
	limit page.ID
	// local is the transaction's place in the extents it fills under a
	// locality slack.
	local localCursor
}

// Map is the free-space map of one open file. See the package comment.
type Map struct {
	pageSize   int
	rp         uint64 // R: pages per region
	words      int    // words per region bitmap
	maxRun     uint64
	maxPages   uint64
	maxRegions uint64
	loader     Loader
	// maxDelta bounds the runs of a meta's delta; -1 disables it.
	maxDelta int

	// What the file held at open. Regions below diskRegions that are not
	// loaded still have exactly these properties, because a region is only
	// changed (and written) after it is loaded.
	diskHWM     uint64
	diskTxid    uint64
	diskRegions uint64
	diskHint    uint64
	// diskDelta holds the open meta's delta runs of regions not loaded
	// since open, by region. Every sync point repeats them, since the map
	// the selector names does not include them. Invariant: they fit the
	// meta of the current region count (see allocateAtHWM).
	diskDelta map[uint64][]page.DeltaRun
	// lastDeltaRuns is the length of the newest image's delta (Stats).
	lastDeltaRuns int

	hwm     uint64
	regions map[uint64]*region
	dirty   map[uint64]*region
	// steadySel is the selector of the last completed sync point. Regions
	// past its length are treated as slot A (they have no map on disk).
	steadySel []byte

	// firstFree: every region below it is loaded with nfree == 0, or not
	// loaded and below diskHint. allocHint: the same with nalloc == 0.
	firstFree uint64
	allocHint uint64

	freePages    uint64
	pendingPages uint64
	// pending is ordered by ascending txid (commits happen in txid order).
	pending []batch
	// young is the pending young frees, in ascending txid order.
	young []youngBatch
	// prepared is the txid of the newest state a sync point was begun for
	// (PrepareSync), or the opened state's. A page written by a later
	// transaction is in no state that is, or may become, durable.
	prepared uint64

	// chain holds what Undo needs of every transaction committed since
	// the last Seal, oldest first (undo.go); spareAllocs is an emptied
	// allocation log kept for the next transaction.
	chain       []committedTx
	spareAllocs []run

	gen   uint64
	loads uint64
	// syncing is set from PrepareSync to SyncDone. Invariant: at most one
	// sync point is in flight, because a second image would be built on the
	// same steady selector and could write the slots the first one just
	// wrote before its meta is durable.
	syncing bool
	tx      txState
	// slack is the locality slack (SetLocalitySlack); 0: first fit.
	slack float64
}

// corruptMeta reports a Config field (from the meta) that is inconsistent.
func corruptMeta(format string, args ...any) error {
	return fmt.Errorf("spacemap: meta: %s: %w", fmt.Sprintf(format, args...), rerrors.ErrCorrupt)
}

// New returns a Map for the state described by cfg. It validates cfg but
// reads nothing: regions are loaded on first use.
func New(cfg Config) (*Map, error) {
	ps := cfg.PageSize
	if !page.ValidPageSize(ps) {
		return nil, fmt.Errorf("spacemap: invalid page size %d", ps)
	}
	rp := page.RegionPages(ps)
	m := &Map{
		pageSize:   ps,
		rp:         rp,
		words:      page.RegionMapWords(ps),
		maxRun:     MaxRunPages(ps),
		maxPages:   cfg.MaxPages,
		maxRegions: maxRegions(ps),
		loader:     cfg.Loader,
		diskHWM:    cfg.HWM,
		diskTxid:   cfg.Txid,
		prepared:   cfg.Txid,
		hwm:        cfg.HWM,
		regions:    make(map[uint64]*region),
		dirty:      make(map[uint64]*region),
		freePages:  cfg.FreePages,
		maxDelta:   cfg.MaxDeltaRuns,
	}
	if m.maxDelta < 0 {
		m.maxDelta = -1
	}
	if cfg.HWM == 0 {
		// A fresh file: region 0 exists from the start, with its map slots
		// and the metas in use and nothing free.
		if len(cfg.Selector) != 0 || cfg.FirstFreeRegion != 0 || cfg.FreePages != 0 || len(cfg.Delta) != 0 {
			return nil, corruptMeta("empty state with a selector, a free-region hint, free pages or a delta")
		}
		m.createRegion(0)
		m.hwm = page.RegionFirstData(ps, 0)
		return m, nil
	}
	regions := (cfg.HWM + rp - 1) / rp
	last := regions - 1
	if regions > m.maxRegions {
		return nil, corruptMeta("HWM %d needs %d regions, a meta holds at most %d", cfg.HWM, regions, m.maxRegions)
	}
	if cfg.HWM%rp != 0 && cfg.HWM < page.RegionFirstData(ps, last) {
		return nil, corruptMeta("HWM %d ends inside region %d's map slots", cfg.HWM, last)
	}
	if len(cfg.Selector) != int((regions+7)/8) {
		return nil, corruptMeta("selector is %d bytes, %d regions need %d", len(cfg.Selector), regions, (regions+7)/8)
	}
	if regions%8 != 0 && cfg.Selector[len(cfg.Selector)-1]>>(regions%8) != 0 {
		return nil, corruptMeta("selector has bits set past region %d", last)
	}
	if uint64(cfg.FirstFreeRegion) > regions {
		return nil, corruptMeta("first free region %d is past the %d regions", cfg.FirstFreeRegion, regions)
	}
	if cfg.FreePages > cfg.HWM {
		return nil, corruptMeta("%d free pages exceed the HWM %d", cfg.FreePages, cfg.HWM)
	}
	if cfg.Loader == nil {
		return nil, fmt.Errorf("spacemap: a Loader is required for a non-empty state")
	}
	if len(cfg.Delta) > page.MaxDeltaRuns(ps, regions) {
		return nil, corruptMeta("delta of %d runs, a meta holds at most %d", len(cfg.Delta), page.MaxDeltaRuns(ps, regions))
	}
	if err := page.CheckDelta(cfg.Delta, ps, cfg.HWM, nil); err != nil {
		return nil, corruptMeta("delta: %v", err)
	}
	if len(cfg.Delta) > 0 {
		m.diskDelta = make(map[uint64][]page.DeltaRun)
		for _, d := range cfg.Delta {
			r := d.ID / rp
			m.diskDelta[r] = append(m.diskDelta[r], d)
		}
	}
	m.steadySel = slices.Clone(cfg.Selector)
	m.diskRegions = regions
	m.diskHint = uint64(cfg.FirstFreeRegion)
	m.firstFree = m.diskHint
	m.allocHint = m.diskHint
	return m, nil
}

// HWM returns the high-water mark, including the open transaction's growth.
func (m *Map) HWM() uint64 { return m.hwm }

// SetMaxPages replaces Config.MaxPages (0: unlimited) for the allocations
// that follow, inside a transaction or between them. A bound below the HWM
// refuses growth only: runs below the HWM stay allocatable, as bbolt's
// freelist pages do under a lowered DB.MaxSize.
func (m *Map) SetMaxPages(n uint64) { m.maxPages = n }

// regionCount returns ceil(HWM/R).
func (m *Map) regionCount() uint64 { return (m.hwm + m.rp - 1) / m.rp }

// selBit returns the slot (0 = A, 1 = B) sel names for region r; regions
// past the selector have no map yet and count as slot A.
func selBit(sel []byte, r uint64) int {
	if r/8 >= uint64(len(sel)) {
		return 0
	}
	return int(sel[r/8] >> (r % 8) & 1)
}

// flipBit flips bit r of b.
func flipBit(b []byte, r uint64) { b[r/8] ^= 1 << (r % 8) }

// setBit sets bit r of b.
func setBit(b []byte, r uint64) { b[r/8] |= 1 << (r % 8) }

// region returns region r, loading it if needed. r must be below the region
// count.
func (m *Map) region(r uint64) (*region, error) {
	if reg := m.regions[r]; reg != nil {
		return reg, nil
	}
	return m.load(r)
}

// load reads and validates the current map of region r, which must be a
// region that existed at open and is not loaded.
//
// Invariant: an unloaded region was never changed since open, so the steady
// selector still names the map it had at open and the open-time HWM, txid
// and hint still describe it.
func (m *Map) load(r uint64) (*region, error) {
	if r >= m.diskRegions {
		// Regions created after open are never unloaded; reaching here is a
		// bug in the Map, reported rather than dereferenced.
		return nil, fmt.Errorf("spacemap: region %d is neither loaded nor on disk", r)
	}
	slot := page.MapSlot(m.pageSize, r, selBit(m.steadySel, r))
	m.loads++
	buf, err := m.loader.ReadPages(slot, 1)
	if err != nil {
		return nil, fmt.Errorf("spacemap: reading map of region %d (page %d): %w", r, slot, err)
	}
	txid, free, err := page.DecodeRegionMap(buf, m.pageSize, slot)
	if err != nil {
		return nil, err
	}
	if txid > m.diskTxid {
		return nil, page.Corruptf(slot, "region map written by txn %d, after the state's txn %d", txid, m.diskTxid)
	}
	base := r * m.rp
	disk := slices.Clone(free)
	for _, d := range m.diskDelta[r] {
		// Every run must change every page it covers: the encoder only
		// records differences, so anything else is not a state rivet wrote.
		start := d.ID - base
		if d.Free {
			if c := countRange(free, start, d.N); c != 0 {
				return nil, page.Corruptf(d.ID, "meta delta frees pages %d+%d, but region map %d already has %d of them free", d.ID, d.N, slot, c)
			}
			setRange(free, start, d.N)
		} else {
			if c := countRange(free, start, d.N); c != d.N {
				return nil, page.Corruptf(d.ID, "meta delta marks pages %d+%d used, but region map %d has only %d of them free", d.ID, d.N, slot, c)
			}
			clearRange(free, start, d.N)
		}
	}
	if end := base + m.rp; end > m.diskHWM {
		// r is the last region at open; New rejected an HWM inside its map
		// slots, so from lies past them.
		from := m.diskHWM - base
		if c := countRange(free, from, m.rp-from); c != 0 {
			s, _ := nextSet(free, from)
			return nil, page.Corruptf(slot, "region map marks page %d free, at or above the HWM %d", base+s, m.diskHWM)
		}
	}
	nfree := popcount(free)
	if r < m.diskHint && nfree != 0 {
		return nil, page.Corruptf(slot, "region %d has %d free pages but the meta says regions below %d have none", r, nfree, m.diskHint)
	}
	// Invariant: freePages >= the free pages of the loaded regions. Every
	// later change moves both by the same amount, so the counter can never
	// underflow, whatever count the meta carried.
	loaded := nfree
	for _, reg := range m.regions {
		loaded += reg.nfree
	}
	if loaded > m.freePages {
		return nil, page.Corruptf(slot, "region maps hold %d free pages, more than the meta's count (now %d)", loaded, m.freePages)
	}
	// Nothing was freed since open in an unloaded region and there are no
	// readers of older states at open, so every free page is allocatable.
	reg := &region{
		idx:    r,
		free:   free,
		alloc:  slices.Clone(free),
		disk:   disk,
		nfree:  nfree,
		nalloc: nfree,
	}
	reg.allocHint = firstNonZeroWord(reg.alloc, 0)
	m.regions[r] = reg
	if _, ok := m.diskDelta[r]; ok {
		// free != disk: the region differs from its map, and from now on
		// its runs are derived from the bitmaps, not repeated verbatim. Not
		// through markDirty: a Rollback of the transaction that loaded it
		// must not make it clean, since free was never equal to disk.
		delete(m.diskDelta, r)
		reg.dirty = true
		reg.dirtyGen = m.gen
		m.dirty[r] = reg
	}
	return reg, nil
}

// createRegion makes region r in memory: no page is free, it has no map on
// disk yet, so it is dirty.
func (m *Map) createRegion(r uint64) *region {
	reg := &region{
		idx:       r,
		free:      make([]uint64, m.words),
		alloc:     make([]uint64, m.words),
		allocHint: m.words,
	}
	m.regions[r] = reg
	m.markDirty(reg)
	return reg
}

// markDirty records that reg's free bitmap changed.
func (m *Map) markDirty(reg *region) {
	reg.dirtyGen = m.gen
	if reg.dirty {
		return
	}
	reg.dirty = true
	m.dirty[reg.idx] = reg
	if m.tx.active {
		m.tx.dirtied = append(m.tx.dirtied, reg)
	}
}

// addAllocatable sets [start, start+n) (region-relative) in reg.alloc; the
// bits must be set in free and clear in alloc.
func (m *Map) addAllocatable(reg *region, start, n uint64) {
	setRange(reg.alloc, start, n)
	reg.allocChanged(start, n)
	reg.nalloc += n
	reg.allocHint = min(reg.allocHint, int(start/64))
	reg.noFit = 0
	m.allocHint = min(m.allocHint, reg.idx)
}

// take marks [start, start+n) (region-relative) used in both bitmaps; the
// bits must be set in alloc.
func (m *Map) take(reg *region, start, n uint64) {
	clearRange(reg.free, start, n)
	clearRange(reg.alloc, start, n)
	reg.allocChanged(start, n)
	reg.nfree -= n
	reg.nalloc -= n
	m.freePages -= n
	if int(start/64) == reg.allocHint {
		reg.allocHint = firstNonZeroWord(reg.alloc, reg.allocHint)
	}
	m.markDirty(reg)
}

// Begin starts a write transaction with txid: from here until Commit or
// Rollback every change is logged so Rollback can undo it.
func (m *Map) Begin(txid uint64) {
	if m.tx.active {
		panic("spacemap: Begin inside a transaction")
	}
	if n := len(m.pending); n > 0 && txid <= m.pending[n-1].txid {
		panic(fmt.Sprintf("spacemap: Begin(%d) after txn %d committed frees", txid, m.pending[n-1].txid))
	}
	allocs := m.tx.allocs[:0]
	if allocs == nil {
		// The last Commit handed its log to the chain; Seal may have
		// given one back.
		allocs, m.spareAllocs = m.spareAllocs, nil
	}
	m.tx = txState{
		active:    true,
		txid:      txid,
		hwm:       m.hwm,
		freePages: m.freePages,
		firstFree: m.firstFree,
		allocs:    allocs,
		freed:     m.tx.freed[:0],
		dirtied:   m.tx.dirtied[:0],
		young:     m.tx.young[:0],
	}
}

func (m *Map) mustTx(op string) {
	if !m.tx.active {
		panic("spacemap: " + op + " outside a transaction")
	}
}

// Allocate returns the first page of a run of n contiguous pages inside one
// region, marked used. It is address-ordered first fit: the lowest
// allocatable run among the existing regions (from the free-region hint up,
// loading regions as it goes), and only if none fits, pages at the HWM. A
// run at the HWM that would cross into the next region starts at that
// region's first data page instead, and the skipped pages at the end of the
// old region become free and allocatable.
//
// n must be in [1, MaxRunPages]. Errors: errors.ErrMaxSizeReached when the
// HWM would pass Config.MaxPages or the meta's region limit; a load error
// (I/O or ErrCorrupt) from a region map. A failed Allocate changes nothing
// but the set of loaded regions.
func (m *Map) Allocate(n uint64) (page.ID, error) {
	m.mustTx("Allocate")
	if m.tx.shrink != nil {
		panic("spacemap: Allocate after ShrinkTo in one transaction")
	}
	if n == 0 || n > m.maxRun {
		return 0, fmt.Errorf("spacemap: cannot allocate a run of %d pages (1..%d)", n, m.maxRun)
	}
	if m.slack > 0 && m.tx.limit == 0 {
		if id, ok, err := m.allocateLocal(n); err != nil || ok {
			return id, err
		}
	}
	count := m.regionCount()
	if lim := m.tx.limit; lim != 0 {
		count = min(count, (lim+m.rp-1)/m.rp)
	}
	// advancing: every region below r has no allocatable page, so the
	// map-wide hint can follow r.
	advancing := true
	for r := m.allocHint; r < count; r++ {
		reg := m.regions[r]
		if reg == nil {
			if r < m.diskHint {
				// Unloaded below the meta's hint: nothing free there.
				if advancing {
					m.allocHint = r + 1
				}
				continue
			}
			var err error
			if reg, err = m.load(r); err != nil {
				return 0, err
			}
		}
		if reg.nalloc == 0 {
			if advancing {
				m.allocHint = r + 1
			}
			continue
		}
		advancing = false
		if reg.nalloc < n || (reg.noFit != 0 && n >= reg.noFit) {
			continue
		}
		start, ok := findRun(reg.alloc, uint64(reg.allocHint)*64, n)
		if !ok {
			if reg.noFit == 0 || n < reg.noFit {
				reg.noFit = n
			}
			continue
		}
		if lim := m.tx.limit; lim != 0 && r*m.rp+start+n > lim {
			// The lowest fitting run crosses the limit: nothing below it
			// fits (first fit), and nothing above may be used.
			break
		}
		m.take(reg, start, n)
		id := r*m.rp + start
		m.tx.allocs = append(m.tx.allocs, run{id, n})
		return id, nil
	}
	if lim := m.tx.limit; lim != 0 && m.hwm >= lim {
		return 0, fmt.Errorf("spacemap: no run of %d pages below the limit %d: %w", n, lim, ErrLimit)
	}
	return m.allocateAtHWM(n)
}

// ErrLimit is returned by Allocate when no run fits below the transaction's
// limit (SetLimit).
var ErrLimit = errors.New("spacemap: no room below the allocation limit")

// SetLimit makes every later allocation of the open transaction lie below
// page limit (0: no limit): runs are searched below it only, and the HWM
// may not grow past it. Compaction sets it so that the pages it moves land
// below the size it shrinks the file to. It ends with the transaction.
func (m *Map) SetLimit(limit page.ID) {
	m.mustTx("SetLimit")
	m.tx.limit = limit
}

// allocateAtHWM takes n pages at the HWM (see Allocate).
func (m *Map) allocateAtHWM(n uint64) (page.ID, error) {
	start := m.hwm
	r := start / m.rp
	var last *region // the region whose tail becomes free, if any
	fresh := false   // whether the run opens a new region
	if start%m.rp == 0 {
		start = page.RegionFirstData(m.pageSize, r)
		fresh = true
	} else if start+n > (r+1)*m.rp {
		reg, err := m.region(r)
		if err != nil {
			return 0, err
		}
		last = reg
		r++
		start = page.RegionFirstData(m.pageSize, r)
		fresh = true
	}
	end := start + n
	if lim := m.tx.limit; lim != 0 && end > lim {
		return 0, fmt.Errorf("spacemap: allocating %d pages needs page %d, the limit is %d: %w", n, end, lim, ErrLimit)
	}
	if m.maxPages != 0 && end > m.maxPages {
		return 0, fmt.Errorf("spacemap: allocating %d pages needs HWM %d, the limit is %d: %w", n, end, m.maxPages, rerrors.ErrMaxSizeReached)
	}
	if r >= m.maxRegions {
		return 0, fmt.Errorf("spacemap: allocating %d pages needs region %d, a meta holds %d: %w", n, r, m.maxRegions, rerrors.ErrMaxSizeReached)
	}
	if fresh && len(m.diskDelta) > 0 {
		// One more region makes the meta's bitmaps longer and its delta
		// room smaller; the runs repeated from the open meta might no
		// longer fit. Loading their regions turns them into ordinary
		// differences, which a sync point may write as maps instead.
		for _, dr := range slices.Sorted(maps.Keys(m.diskDelta)) {
			if _, err := m.load(dr); err != nil {
				return 0, err
			}
		}
	}
	if last != nil {
		// The tail of the old last region was above the HWM (all clear) and
		// is now inside it, unused: free, and allocatable at once because
		// no state ever used it.
		from := m.hwm - last.idx*m.rp
		k := m.rp - from
		setRange(last.free, from, k)
		last.nfree += k
		m.freePages += k
		m.addAllocatable(last, from, k)
		m.firstFree = min(m.firstFree, last.idx)
		m.markDirty(last)
	}
	if fresh {
		m.createRegion(r)
	}
	// Pages at or above the old HWM have clear bits already, so taking them
	// changes no bitmap: only the HWM moves.
	m.hwm = end
	return start, nil
}

// Free records that the run [id, id+n) is no longer used by the open
// transaction's state. It becomes free (pending at this txid) when the
// transaction commits and is dropped by Rollback; it is never handed out by
// this transaction. The run must lie below the HWM inside one region's data
// pages and none of its pages may be free already or freed earlier in this
// transaction: a violation means two owners of a page or a map that
// disagrees with the tree, and is reported as ErrCorrupt (nothing changes).
func (m *Map) Free(id page.ID, n uint64) error { return m.FreeBorn(id, n, 0) }

// FreeBorn is Free for a run whose pages were written by txn born (0:
// unknown). When born is after the newest state a sync point was begun for
// (and not after this transaction), no state that is or may become durable
// holds the run, so the rule that keeps the steady state's pages intact does
// not apply to it: it is released by ReleaseYoung as soon as no reader can
// see it, without waiting for a sync point. In Periodic and None modes,
// where many commits share a sync point, this is what lets a page that one
// commit wrote and the next replaced be written again by the one after,
// instead of every such page waiting for the sync point in new space.
func (m *Map) FreeBorn(id page.ID, n, born uint64) error {
	m.mustTx("Free")
	if m.tx.shrink != nil {
		panic("spacemap: Free after ShrinkTo in one transaction")
	}
	if n == 0 {
		return fmt.Errorf("spacemap: freeing an empty run at page %d", id)
	}
	end := id + n
	if end < id || end > m.hwm {
		return page.Corruptf(id, "freeing %d pages past the HWM %d", n, m.hwm)
	}
	r := id / m.rp
	if (end-1)/m.rp != r {
		return page.Corruptf(id, "freeing %d pages across the end of region %d", n, r)
	}
	if id < page.RegionFirstData(m.pageSize, r) {
		return page.Corruptf(id, "freeing %d pages covering a meta or map slot of region %d", n, r)
	}
	reg, err := m.region(r)
	if err != nil {
		return err
	}
	start := id - r*m.rp
	if countRange(reg.free, start, n) != 0 {
		s := nextSetFrom(reg.free, start)
		return page.Corruptf(r*m.rp+s, "page freed twice: already free or pending (freeing run %d+%d)", id, n)
	}
	if reg.txFreed != nil && countRange(reg.txFreed, start, n) != 0 {
		s := nextSetFrom(reg.txFreed, start)
		return page.Corruptf(r*m.rp+s, "page freed twice in txn %d (freeing run %d+%d)", m.tx.txid, id, n)
	}
	if reg.txFreed == nil {
		reg.txFreed = make([]uint64, m.words)
	}
	if reg.txHi == 0 {
		reg.txLo, reg.txHi = start, start+n
		m.tx.freed = append(m.tx.freed, reg)
	} else {
		reg.txLo, reg.txHi = min(reg.txLo, start), max(reg.txHi, start+n)
	}
	setRange(reg.txFreed, start, n)
	m.tx.freedPages += n
	if born > m.prepared && born <= m.tx.txid {
		if len(m.tx.young) == 0 || born < m.tx.youngBorn {
			m.tx.youngBorn = born
		}
		m.tx.young = append(m.tx.young, run{id, n})
	}
	return nil
}

// nextSetFrom returns the first set bit at or after pos; the caller knows
// one exists.
func nextSetFrom(w []uint64, pos uint64) uint64 {
	s, _ := nextSet(w, pos)
	return s
}

// Commit ends the transaction: its allocations stay, its frees become set
// in free and pending at its txid (not allocatable until Release allows).
// Until the next Seal, Undo can still take it back.
func (m *Map) Commit() {
	m.mustTx("Commit")
	rec := committedTx{
		txid:      m.tx.txid,
		hwm:       m.tx.hwm,
		freePages: m.tx.freePages,
		firstFree: m.tx.firstFree,
		allocs:    m.tx.allocs,
		shrink:    m.tx.shrink,
	}
	if len(m.tx.young) > 0 {
		// Young runs leave txFreed first, so the walk below sees only the
		// others.
		yb := youngBatch{txid: m.tx.txid, born: m.tx.youngBorn, runs: slices.Clone(m.tx.young)}
		rec.young = yb.runs
		for _, rn := range m.tx.young {
			reg := m.regions[rn.id/m.rp]
			s := rn.id - reg.idx*m.rp
			setRange(reg.free, s, rn.n)
			clearRange(reg.txFreed, s, rn.n)
			reg.nfree += rn.n
			yb.pages += rn.n
		}
		m.tx.freedPages -= yb.pages
		m.freePages += yb.pages
		m.pendingPages += yb.pages
		m.young = append(m.young, yb)
		for _, reg := range m.tx.freed {
			m.firstFree = min(m.firstFree, reg.idx)
			m.markDirty(reg)
			if m.tx.freedPages == 0 {
				// No other frees: the walk below does not run, and txFreed
				// is clear again.
				reg.txLo, reg.txHi = 0, 0
			}
		}
	}
	if m.tx.freedPages > 0 {
		slices.SortFunc(m.tx.freed, func(a, b *region) int { return cmp.Compare(a.idx, b.idx) })
		b := batch{txid: m.tx.txid, pages: m.tx.freedPages}
		for _, reg := range m.tx.freed {
			base := reg.idx * m.rp
			// Walk the freed bits as runs, so pending holds each freed
			// stretch once however it was freed.
			for pos := reg.txLo; pos < reg.txHi; {
				s, ok := nextSet(reg.txFreed, pos)
				if !ok || s >= reg.txHi {
					break
				}
				e := nextClear(reg.txFreed, s, reg.txHi)
				b.runs = append(b.runs, run{base + s, e - s})
				setRange(reg.free, s, e-s)
				clearRange(reg.txFreed, s, e-s)
				reg.nfree += e - s
				pos = e
			}
			reg.txLo, reg.txHi = 0, 0
			m.firstFree = min(m.firstFree, reg.idx)
			m.markDirty(reg)
		}
		m.freePages += m.tx.freedPages
		m.pendingPages += m.tx.freedPages
		m.pending = append(m.pending, b)
		rec.batch = true
	}
	m.chain = append(m.chain, rec)
	// The log now belongs to the chain.
	m.tx.allocs = nil
	m.endTx()
}

// endTx closes the transaction, keeping the log slices for reuse.
func (m *Map) endTx() {
	clear(m.tx.freed)
	clear(m.tx.dirtied)
	m.tx = txState{allocs: m.tx.allocs[:0], freed: m.tx.freed[:0], dirtied: m.tx.dirtied[:0], young: m.tx.young[:0]}
}

// Rollback undoes the transaction: its allocations become free and
// allocatable again, the HWM and the regions it created go back, regions it
// made dirty are clean again, and its frees are dropped.
//
// Outside a transaction (after Commit) it does nothing, so a caller whose
// commit fails after Commit may still run its ordinary rollback path; a
// committed transaction is taken back by Undo.
func (m *Map) Rollback() {
	if !m.tx.active {
		return
	}
	if u := m.tx.shrink; u != nil {
		m.undoShrink(u)
		m.endTx()
		return
	}
	for i := len(m.tx.allocs) - 1; i >= 0; i-- {
		a := m.tx.allocs[i]
		reg := m.regions[a.id/m.rp]
		start := a.id - reg.idx*m.rp
		setRange(reg.free, start, a.n)
		reg.nfree += a.n
		m.addAllocatable(reg, start, a.n)
	}
	m.shrinkHWMTo(m.tx.hwm)
	for _, reg := range m.tx.freed {
		if reg.txHi > 0 {
			clearRange(reg.txFreed, reg.txLo, reg.txHi-reg.txLo)
			reg.txLo, reg.txHi = 0, 0
		}
	}
	// A region that was clean at Begin has its free bitmap back as it was,
	// which is what its current map on disk says.
	for _, reg := range m.tx.dirtied {
		if m.regions[reg.idx] == reg {
			reg.dirty = false
			delete(m.dirty, reg.idx)
		}
	}
	m.freePages = m.tx.freePages
	m.firstFree = min(m.firstFree, m.tx.firstFree)
	m.endTx()
}

// shrinkHWMTo takes back the growth of a transaction that began at HWM
// hwm, once its allocations from free space are taken back: the regions it
// created go, and the tail of the old last region, which became free when
// a run crossed into a new region, is clear again above hwm. It does not
// touch freePages, which the caller restores.
func (m *Map) shrinkHWMTo(hwm uint64) {
	count0 := (hwm + m.rp - 1) / m.rp
	for r := count0; r < m.regionCount(); r++ {
		delete(m.regions, r)
		delete(m.dirty, r)
	}
	if m.hwm > hwm && hwm%m.rp != 0 {
		if reg := m.regions[count0-1]; reg != nil {
			from := hwm - reg.idx*m.rp
			k := countRange(reg.free, from, m.rp-from)
			ka := countRange(reg.alloc, from, m.rp-from)
			clearRange(reg.free, from, m.rp-from)
			clearRange(reg.alloc, from, m.rp-from)
			reg.allocChanged(from, m.rp-from)
			reg.nfree -= k
			reg.nalloc -= ka
		}
	}
	m.hwm = hwm
}

// Release makes allocatable every pending run freed at a txid N with
// N <= steady and N <= oldestReader. A reader at snapshot S can see pages
// freed at N iff S < N, and a page live in the steady state must not be
// rewritten before the next sync point (invariant 1); both rules are met
// exactly then. oldestReader is the oldest open read snapshot, or
// math.MaxUint64 when there are none.
func (m *Map) Release(steady, oldestReader uint64) {
	limit := min(steady, oldestReader)
	i := 0
	for ; i < len(m.pending) && m.pending[i].txid <= limit; i++ {
		for _, rn := range m.pending[i].runs {
			reg := m.regions[rn.id/m.rp]
			m.addAllocatable(reg, rn.id-reg.idx*m.rp, rn.n)
		}
		m.pendingPages -= m.pending[i].pages
	}
	if i > 0 {
		n := copy(m.pending, m.pending[i:])
		clear(m.pending[n:])
		m.pending = m.pending[:n]
	}
}

// ReleaseYoung makes allocatable every pending young batch (FreeBorn) that
// no snapshot in snapshots can see: a snapshot S sees the pages of a batch
// written at born or later and freed at N iff born <= S < N. snapshots must
// hold every open reader's txid and a bound for readers that begin before
// the next call (the writer passes the newest published state, which in
// Full mode is older than every young page and otherwise at least N).
func (m *Map) ReleaseYoung(snapshots []uint64) {
	kept := m.young[:0]
	for _, b := range m.young {
		seen := false
		for _, s := range snapshots {
			if b.born <= s && s < b.txid {
				seen = true
				break
			}
		}
		if seen {
			kept = append(kept, b)
			continue
		}
		for _, rn := range b.runs {
			reg := m.regions[rn.id/m.rp]
			m.addAllocatable(reg, rn.id-reg.idx*m.rp, rn.n)
		}
		m.pendingPages -= b.pages
	}
	clear(m.young[len(kept):])
	m.young = kept
}

// PrepareSync builds the map pages and meta fields of a sync point at txid,
// which must follow Commit (not inside a transaction). Each region written
// goes to the slot the steady selector does not name; regions with no map
// on disk yet count as slot A, so their first map goes to slot B. Which
// regions are written and which go into the delta is described at
// SyncImage. The Map does not change until SyncDone; transactions may run
// in between, but not a second PrepareSync (one sync point in flight at a
// time).
func (m *Map) PrepareSync(txid uint64) SyncImage {
	if m.tx.active {
		panic("spacemap: PrepareSync inside a transaction")
	}
	if m.syncing {
		panic("spacemap: PrepareSync while an earlier sync point is in flight")
	}
	m.syncing = true
	count := m.regionCount()
	img := SyncImage{
		Txid:        txid,
		HWM:         m.hwm,
		RegionCount: count,
		Selector:    make([]byte, (count+7)/8),
		Changed:     make([]byte, (count+7)/8),
		FreePages:   m.freePages,
		gen:         m.gen,
		prepared:    m.prepared,
	}
	m.prepared = max(m.prepared, txid)
	// The copy keeps the steady slot of every region still counted; after
	// a ShrinkTo the steady selector may be longer, and its bits of regions
	// past the count are cleared (a meta has none).
	copy(img.Selector, m.steadySel)
	if count%8 != 0 {
		img.Selector[len(img.Selector)-1] &= byte(1)<<(count%8) - 1
	}

	// Sort the regions that may differ from disk into those that must be
	// written (no map yet), those that turned out not to differ, and those
	// whose differences could go into the delta.
	idx := make([]uint64, 0, len(m.dirty)+len(m.diskDelta))
	for r := range m.dirty {
		idx = append(idx, r)
	}
	for r := range m.diskDelta {
		idx = append(idx, r)
	}
	slices.Sort(idx)
	limit := m.maxDelta
	if limit == 0 || limit > page.MaxDeltaRuns(m.pageSize, count) {
		limit = page.MaxDeltaRuns(m.pageSize, count)
	}
	var delta []page.DeltaRun
	write := make([]uint64, 0, len(idx))
	fits := limit > 0
	for _, r := range idx {
		if dd, ok := m.diskDelta[r]; ok {
			// They are always repeated, so they count against the room
			// the dirty regions' runs may take: without this check, runs
			// of a region sorted after the last dirty one could take the
			// delta past the meta's room (found by the model test, seed
			// 1795556672226579390: 75 runs where the meta holds 74).
			delta = append(delta, dd...)
			fits = fits && len(delta) <= limit
			continue
		}
		reg := m.regions[r]
		if reg.disk == nil {
			write = append(write, r)
			continue
		}
		before := len(delta)
		if fits {
			delta = appendDiffRuns(delta, reg.free, reg.disk, r*m.rp, limit+1)
			fits = len(delta) <= limit
		}
		if fits && len(delta) == before {
			img.same = append(img.same, r)
		}
	}
	if !fits {
		// Too many differences for the meta: write every differing region
		// and keep only the runs of unloaded regions, which fit (invariant
		// of diskDelta).
		delta = delta[:0]
		write = write[:0]
		for _, r := range idx {
			if dd, ok := m.diskDelta[r]; ok {
				delta = append(delta, dd...)
			} else {
				write = append(write, r)
			}
		}
		img.same = nil
	}
	img.Delta = delta
	m.lastDeltaRuns = len(delta)
	for _, r := range write {
		slot := page.MapSlot(m.pageSize, r, 1-selBit(m.steadySel, r))
		buf := make([]byte, m.pageSize)
		free := m.regions[r].free
		page.EncodeRegionMap(buf, m.pageSize, slot, txid, free)
		img.Pages = append(img.Pages, page.Run{ID: slot, Data: buf})
		img.written = append(img.written, writtenMap{r: r, bits: slices.Clone(free)})
		flipBit(img.Selector, r)
		setBit(img.Changed, r)
	}
	// Raise the hint past regions known to be full; it stays a lower bound.
	r := m.firstFree
	for r < count {
		reg := m.regions[r]
		if (reg == nil && r >= m.diskHint) || (reg != nil && reg.nfree > 0) {
			break
		}
		r++
	}
	m.firstFree = r
	img.FirstFreeRegion = uint32(r) // r <= count <= maxRegions < 2^32
	m.gen++
	return img
}

// appendDiffRuns appends to delta the runs of region pages (numbered from
// base) whose bit in free differs from disk, with their state in free. It
// stops once delta holds stop runs, since the caller then gives up on the
// delta anyway.
func appendDiffRuns(delta []page.DeltaRun, free, disk []uint64, base uint64, stop int) []page.DeltaRun {
	for i := 0; i < len(free); i++ {
		if free[i] == disk[i] {
			continue
		}
		// A run may continue across words: extend the last run when it
		// ends exactly here with the same state.
		diff := free[i] ^ disk[i]
		for diff != 0 {
			b := uint64(bits.TrailingZeros64(diff))
			state := free[i]>>b&1 != 0
			// The run of equal differences starting at bit b.
			var same uint64
			if state {
				same = diff & free[i] >> b
			} else {
				same = diff &^ free[i] >> b
			}
			n := uint64(bits.TrailingZeros64(^same))
			id := base + uint64(i)*64 + b
			if k := len(delta); k > 0 && delta[k-1].Free == state && delta[k-1].ID+delta[k-1].N == id {
				delta[k-1].N += n
			} else {
				if len(delta) >= stop {
					return delta
				}
				delta = append(delta, page.DeltaRun{ID: id, N: n, Free: state})
			}
			if b+n == 64 {
				diff = 0
			} else {
				diff &^= (uint64(1)<<n - 1) << b
			}
		}
	}
	return delta
}

// SyncDone records that the sync point of img is durable (its flush
// returned nil): img's selector becomes the steady one, the maps it wrote
// become their regions' disk bitmaps, and regions not changed since
// PrepareSync whose free set now equals their map are clean. If the flush
// fails the caller latches the database and discards the Map, so there is
// nothing to undo; if writing the image fails, AbortSync takes it back.
func (m *Map) SyncDone(img SyncImage) {
	m.syncing = false
	m.steadySel = slices.Clone(img.Selector)
	for _, w := range img.written {
		reg := m.regions[w.r]
		reg.disk = w.bits
		if reg.dirtyGen <= img.gen {
			m.markClean(reg)
		}
	}
	for _, r := range img.same {
		if reg := m.regions[r]; reg.dirtyGen <= img.gen {
			m.markClean(reg)
		}
	}
}

// markClean records that reg's free bitmap equals its map on disk.
func (m *Map) markClean(reg *region) {
	reg.dirty = false
	delete(m.dirty, reg.idx)
}

// Stats returns counters describing the Map.
func (m *Map) Stats() Stats {
	s := Stats{
		HWM:           m.hwm,
		Regions:       m.regionCount(),
		FreePages:     m.freePages,
		PendingPages:  m.pendingPages,
		LoadedRegions: len(m.regions),
		DirtyRegions:  len(m.dirty),
		DeltaRuns:     m.lastDeltaRuns,
		RegionLoads:   m.loads,
	}
	for _, reg := range m.regions {
		s.AllocatablePages += reg.nalloc
	}
	return s
}

// ForEachFree loads every region and calls fn for each run of pages free in
// the newest committed state, pending ones included, in ascending order;
// runs never cross a region boundary. It is meant for Check: together with
// the tree walk it lets the caller verify that no page is both reachable and
// free and that every page below the HWM is accounted for. Before calling
// fn it checks that the maps' free pages add up to the meta's count (as
// kept up to date since open). Called inside a transaction, it shows that
// transaction's allocations but not its frees.
func (m *Map) ForEachFree(fn func(id page.ID, n uint64) error) error {
	count := m.regionCount()
	var total uint64
	for r := uint64(0); r < count; r++ {
		reg, err := m.region(r)
		if err != nil {
			return err
		}
		total += reg.nfree
	}
	if total != m.freePages {
		return fmt.Errorf("spacemap: the meta counts %d free pages, the region maps hold %d: %w", m.freePages, total, rerrors.ErrCorrupt)
	}
	for r := uint64(0); r < count; r++ {
		reg := m.regions[r]
		limit := m.rp
		for pos := uint64(0); ; {
			s, ok := nextSet(reg.free, pos)
			if !ok {
				break
			}
			e := nextClear(reg.free, s, limit)
			if err := fn(r*m.rp+s, e-s); err != nil {
				return err
			}
			pos = e
		}
	}
	return nil
}

package spacemap

import (
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
)

// Standalone is the free-space part of a state written out as a file of its
// own (a copy made by Tx.WriteTo): one map per region, all in slot A, and
// the meta fields that describe them. It carries nothing of the file the
// state came from — no selector, no delta, no changed bits — because those
// describe that file's map slots and pending frees, which the copy does not
// contain: the copy's free set is derived from the state's reachable pages
// alone.
//
// Invariant: a meta built from these fields (with steady txid == txid and
// an empty delta) agrees with every map page it names: the selector names
// slot A of every region, each map holds exactly the region's unreachable
// data pages, and FreePages is the sum of the maps' counts. That is a state
// a sync point of rivet's own could have left, so Open, Check and the next
// write transaction accept the copy as they accept any file.
type Standalone struct {
	// Selector and Changed are the meta's bitmaps: all clear (every region
	// in slot A, nothing for recovery to verify).
	Selector []byte
	Changed  []byte
	// FreePages counts the free pages of all maps.
	FreePages uint64
	// FirstFreeRegion is the lowest region with a free page (the region
	// count if none has one).
	FirstFreeRegion uint32

	pageSize int
	hwm      uint64
	txid     uint64
	used     []uint64
}

// NewStandalone describes the free space of a state whose pages [0, hwm)
// are either used — set in used, a bitmap of at least hwm bits (bit p in
// word p/64) — or free. Metas and map slots are neither: their bits in used
// are ignored and their map bits stay clear, as every map page requires.
// Every map records txid, the txid of the state's meta. The caller keeps
// used unchanged until it has encoded the last map.
func NewStandalone(pageSize int, hwm, txid uint64, used []uint64) (*Standalone, error) {
	if !page.ValidPageSize(pageSize) {
		return nil, fmt.Errorf("spacemap: standalone image with invalid page size %d", pageSize)
	}
	rp := page.RegionPages(pageSize)
	if hwm < page.RegionFirstData(pageSize, 0) || uint64(len(used)) < (hwm+63)/64 {
		return nil, fmt.Errorf("spacemap: standalone image of %d pages with a %d-word used bitmap", hwm, len(used))
	}
	regions := (hwm + rp - 1) / rp
	if regions > maxRegions(pageSize) {
		return nil, fmt.Errorf("spacemap: standalone image of %d regions, at most %d fit a meta", regions, maxRegions(pageSize))
	}
	s := &Standalone{
		Selector:        make([]byte, page.BitmapLen(regions)),
		Changed:         make([]byte, page.BitmapLen(regions)),
		FirstFreeRegion: uint32(regions),
		pageSize:        pageSize,
		hwm:             hwm,
		txid:            txid,
		used:            used,
	}
	words := make([]uint64, page.RegionMapWords(pageSize))
	for r := uint64(0); r < regions; r++ {
		n := s.regionFree(r, words)
		if n > 0 && s.FirstFreeRegion == uint32(regions) {
			s.FirstFreeRegion = uint32(r)
		}
		s.FreePages += n
	}
	return s, nil
}

// Regions returns the number of regions of the state.
func (s *Standalone) Regions() uint64 {
	rp := page.RegionPages(s.pageSize)
	return (s.hwm + rp - 1) / rp
}

// EncodeMap encodes region r's map into buf (one page) and returns the
// slot it belongs in (slot A). words is scratch of page.RegionMapWords
// words, or nil.
func (s *Standalone) EncodeMap(r uint64, buf []byte, words []uint64) page.ID {
	if words == nil {
		words = make([]uint64, page.RegionMapWords(s.pageSize))
	}
	s.regionFree(r, words)
	slot := page.MapSlot(s.pageSize, r, 0)
	page.EncodeRegionMap(buf, s.pageSize, slot, s.txid, words)
	return slot
}

// regionFree fills free with region r's free bitmap and returns its count.
func (s *Standalone) regionFree(r uint64, free []uint64) uint64 {
	clear(free)
	rp := page.RegionPages(s.pageSize)
	end := min((r+1)*rp, s.hwm)
	n := uint64(0)
	for p := page.RegionFirstData(s.pageSize, r); p < end; p++ {
		if s.used[p/64]&(1<<(p%64)) == 0 {
			i := p - r*rp
			free[i/64] |= 1 << (i % 64)
			n++
		}
	}
	return n
}

// IsMapSlot reports whether page p is one of its region's two map slots,
// and which (0 for slot A).
func (s *Standalone) IsMapSlot(p page.ID) (slot int, ok bool) {
	rp := page.RegionPages(s.pageSize)
	r := p / rp
	switch p {
	case page.MapSlot(s.pageSize, r, 0):
		return 0, true
	case page.MapSlot(s.pageSize, r, 1):
		return 1, true
	}
	return 0, false
}

package page

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Region map pages (docs/design.md §2.6).
//
// A map page is the common header followed by RegionPages(pageSize) bits, one
// per page of its region: bit i lives in byte HeaderSize+i/8 at bit i%8 (LSB
// first) and is set when page r·R+i is free. In memory the bitmap is a
// []uint64 of RegionMapWords(pageSize) words where bit i is word i/64, bit
// i%64; because the words are stored little-endian, that numbering and the
// byte numbering above are the same bits, so no bit is ever reordered.
//
// Invariant: an accepted map page re-encodes to exactly the same bytes. Every
// header field is either fixed (type, flags, overflow), given by the caller
// (pgid, txid) or derived from the bits (count, checksum), so nothing in a
// valid page is free-form.

// RegionMapWords returns the number of 64-bit words that hold one region's
// bitmap in memory. RegionPages(pageSize) is always a multiple of 64: a valid
// page size minus the 32-byte header is a multiple of 32 bytes, i.e. of 4
// words.
func RegionMapWords(pageSize int) int { return (pageSize - HeaderSize) / 8 }

// regionMapSlotOf returns the region whose map slot is page id, and whether id
// is one of that region's two map slots at all.
func regionMapSlotOf(pageSize int, id ID) (r uint64, ok bool) {
	rp := RegionPages(pageSize)
	r = id / rp
	return r, id == MapSlot(pageSize, r, 0) || id == MapSlot(pageSize, r, 1)
}

// regionReservedMask returns the bits of word 0 of region r's bitmap that
// stand for pages that can never be free: the region's two map slots and, in
// region 0, the two metas before them. They are all in word 0 (at most 4
// bits).
func regionReservedMask(pageSize int, r uint64) uint64 {
	n := RegionFirstData(pageSize, r) - r*RegionPages(pageSize)
	return 1<<n - 1
}

// EncodeRegionMap encodes the map of the region owning map slot slot into
// buf: the header (type TypeRegionMap, count = set bits, txid, pgid = slot,
// checksum) and the bitmap free, which must hold RegionMapWords(pageSize)
// words with bit i set when page r·R+i is free.
//
// Misuse is a programming error, not bad data, and panics: an invalid page
// size, len(buf) != pageSize, a wrong word count, a slot that is not a map
// slot, or set bits on the region's map slots or metas (which would produce a
// page DecodeRegionMap rejects).
func EncodeRegionMap(buf []byte, pageSize int, slot ID, txid uint64, free []uint64) {
	if !ValidPageSize(pageSize) || len(buf) != pageSize || len(free) != RegionMapWords(pageSize) {
		panic(fmt.Sprintf("page: EncodeRegionMap: page size %d, buffer %d bytes, %d words", pageSize, len(buf), len(free)))
	}
	r, ok := regionMapSlotOf(pageSize, slot)
	if !ok {
		panic(fmt.Sprintf("page: EncodeRegionMap: page %d is not a region map slot", slot))
	}
	if free[0]&regionReservedMask(pageSize, r) != 0 {
		panic(fmt.Sprintf("page: EncodeRegionMap: region %d marks its map slots or metas free", r))
	}
	count := 0
	for i, w := range free {
		binary.LittleEndian.PutUint64(buf[HeaderSize+8*i:], w)
		count += bits.OnesCount64(w)
	}
	// count <= RegionPages(MaxPageSize) < 2^20, so it fits the u32 field.
	PutHeader(buf, Header{Type: TypeRegionMap, Count: uint32(count), Txid: txid, ID: slot})
	binary.LittleEndian.PutUint32(buf[offChecksum:], ChecksumSkipping(buf, offChecksum))
}

// DecodeRegionMap validates the map page buf read from map slot slot and
// returns the txid of the sync point that wrote it and its free bitmap
// (RegionMapWords(pageSize) words, freshly allocated).
//
// It checks the length, the header (type, pgid == slot, flags and overflow
// zero), the checksum, that count equals the number of set bits, and that
// the bits of the region's map slots (and of the metas, in region 0) are
// clear. Bad bytes yield a *errors.CorruptError for slot; an invalid page
// size or a slot that is not a map slot (caller errors) yield a plain error.
// It never panics. Checks that need state the page does not carry (the
// high-water mark, the meta's txid) are the caller's.
func DecodeRegionMap(buf []byte, pageSize int, slot ID) (txid uint64, free []uint64, err error) {
	if !ValidPageSize(pageSize) {
		return 0, nil, fmt.Errorf("page: decoding region map with invalid page size %d", pageSize)
	}
	r, ok := regionMapSlotOf(pageSize, slot)
	if !ok {
		return 0, nil, fmt.Errorf("page: page %d is not a region map slot", slot)
	}
	if len(buf) != pageSize {
		return 0, nil, Corruptf(slot, "region map is %d bytes, want %d", len(buf), pageSize)
	}
	h, err := ReadHeader(slot, buf)
	if err != nil {
		return 0, nil, err
	}
	if err := h.Expect(slot, TypeRegionMap, 0); err != nil {
		return 0, nil, err
	}
	if h.Flags != 0 {
		return 0, nil, Corruptf(slot, "region map has flags %#x, want 0", h.Flags)
	}
	if h.Overflow != 0 {
		return 0, nil, Corruptf(slot, "region map has overflow %d, want 0", h.Overflow)
	}
	if sum := ChecksumSkipping(buf, offChecksum); sum != h.Checksum {
		return 0, nil, Corruptf(slot, "region map checksum %#08x, computed %#08x (torn or damaged page)", h.Checksum, sum)
	}
	// The allocation is sized by the page size, which the caller trusts, not
	// by anything read from the page.
	free = make([]uint64, RegionMapWords(pageSize))
	count := 0
	for i := range free {
		w := binary.LittleEndian.Uint64(buf[HeaderSize+8*i:])
		free[i] = w
		count += bits.OnesCount64(w)
	}
	if uint64(count) != uint64(h.Count) {
		return 0, nil, Corruptf(slot, "region map count is %d, bitmap has %d free pages", h.Count, count)
	}
	if m := free[0] & regionReservedMask(pageSize, r); m != 0 {
		return 0, nil, Corruptf(slot, "region map marks page %d free, which is a map slot or meta", r*RegionPages(pageSize)+uint64(bits.TrailingZeros64(m)))
	}
	return h.Txid, free, nil
}

// Package image writes a state of a database as a file of its own: the
// bytes of a backup (Tx.WriteTo, Tx.CopyFile), of a copy made by Clone, and
// of a copy of a file another process holds for writing (CloneFile's live
// path, docs/design.md §3.5).
//
// The file is one rivet itself could have written (docs/design.md §6,
// invariant 9): every page the state reaches is copied byte for byte, every
// other page is written as zeros, and the free-space maps and both metas
// are built anew from the reachable pages, so every meta field agrees with
// every map page it names. Nothing of the source file's free-space
// bookkeeping (map slots, selector, delta) is copied: later sync points may
// already have rewritten those for newer states.
//
// The package knows pages, trees and files (internal/page, internal/btree,
// internal/spacemap, internal/vfs); what it needs of an open database (a
// snapshot's mapping and meta, how to read and recover a file's metas) the
// caller hands it.
package image

import (
	"bufio"
	"fmt"
	"io"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// ChunkSize is the largest write an image issues, and the buffer size of
// callers that copy files in chunks.
const ChunkSize = 1 << 20

// Image is the file image of one state.
type Image struct {
	pageSize int
	hwm      uint64
	data     []byte   // the state's pages from offset 0 (nil for a live copy)
	live     []uint64 // bit p set: page p is reachable from the root
	space    *spacemap.Standalone
	meta     []byte // the encoded meta, for both meta slots
	// raw is set for a bbolt image (Raw): its data pages are copied as
	// they are (live and space are nil), and meta1 is meta slot 1's page.
	raw   bool
	meta1 []byte
}

// Build walks state snap, whose pages data holds (a mapping of the file
// from offset 0, at least snap.HWM pages or the walk reports the missing
// ones as corruption), and returns its image. Every run's checksum is
// verified against its parent's record on the way, so an image of a
// damaged state fails with ErrCorrupt instead of copying the damage.
func Build(ps int, snap *page.Meta, data []byte) (*Image, error) {
	live, err := LivePages(data, ps, snap.HWM, snap.Root)
	if err != nil {
		return nil, err
	}
	img, err := standalone(ps, snap, live, false)
	if err != nil {
		return nil, err
	}
	img.data = data
	return img, nil
}

// Raw is the image of a file whose pages are copied as they are, with
// meta0 and meta1 as its meta pages: a bbolt file, whose free pages and
// freelist rivet does not rebuild.
func Raw(ps int, hwm uint64, data, meta0, meta1 []byte) *Image {
	return &Image{pageSize: ps, hwm: hwm, data: data, raw: true, meta: meta0, meta1: meta1}
}

// PageSize is the image's page size.
func (img *Image) PageSize() int { return img.pageSize }

// Size is the image's length in bytes: the state's high-water mark in
// pages.
func (img *Image) Size() int64 { return int64(img.hwm) * int64(img.pageSize) }

// Reachable reports whether page p is reachable from the state's root
// (false for every page of a raw image).
func (img *Image) Reachable(p page.ID) bool {
	return !img.raw && p < img.hwm && img.live[p/64]&(1<<(p%64)) != 0
}

// LivePages walks the tree rooted at root in data (the file's bytes from
// offset 0), verifying every run against its parent's checksum, and returns
// the bitmap of the pages it reaches. A run past hwm or the data, or a page
// reached twice, is corruption.
func LivePages(data []byte, ps int, hwm uint64, root page.Ref) ([]uint64, error) {
	live := make([]uint64, (hwm+63)/64)
	walker := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			end := (id + n) * uint64(ps)
			if id+n > hwm || end > uint64(len(data)) {
				return nil, page.Corruptf(id, "run of %d pages beyond the file", n)
			}
			return data[id*uint64(ps) : end], nil
		},
		PageSize:        ps,
		HWM:             hwm,
		All:             true,
		VerifyChecksums: true,
		Visit: func(id page.ID, n uint64, _ page.Type) error {
			for p := id; p < id+n; p++ {
				if live[p/64]&(1<<(p%64)) != 0 {
					return page.Corruptf(p, "page reachable twice")
				}
				live[p/64] |= 1 << (p % 64)
			}
			return nil
		},
	}
	if err := walker.Walk(root); err != nil {
		return nil, err
	}
	return live, nil
}

// standalone builds the free-space maps and the meta of state snap written
// as a file of its own, live being its reachable pages. With journal, the
// meta keeps snap's journal salt: a live copy takes the source's journal
// files with it, whose records after snap recovery applies (a snapshot's
// copy is complete and has no journal).
func standalone(ps int, snap *page.Meta, live []uint64, journal bool) (*Image, error) {
	space, err := spacemap.NewStandalone(ps, snap.HWM, snap.Txid, live)
	if err != nil {
		return nil, err
	}
	// Built field by field, not copied from the snapshot's meta: every field
	// of the source meta that describes the source's map slots (selector,
	// changed, delta, free count, hint) would be wrong here, and so would
	// any such field a later format adds.
	meta := page.Meta{
		PageSize:        ps,
		Txid:            snap.Txid,
		Steady:          snap.Txid, // nothing for recovery to verify
		HWM:             snap.HWM,
		Root:            snap.Root,
		RegionPages:     page.RegionPages(ps),
		FreePages:       space.FreePages,
		FirstFreeRegion: space.FirstFreeRegion,
		Selector:        space.Selector,
		Changed:         space.Changed,
	}
	if journal {
		meta.JournalSalt = snap.JournalSalt
	}
	buf := make([]byte, ps)
	page.EncodeMeta(buf, &meta)
	if _, err := page.DecodeMeta(0, buf); err != nil {
		return nil, fmt.Errorf("rivet: the copy's meta does not validate: %w", err)
	}
	return &Image{pageSize: ps, hwm: snap.HWM, live: live, space: space, meta: buf}, nil
}

// MetaPage returns the page meta slot i (0 or 1) holds.
func (img *Image) MetaPage(i int64) []byte {
	if i == 1 && img.raw {
		return img.meta1
	}
	return img.meta
}

// pageAt returns what the image holds at page p in [2, hwm): for the
// current map slot of each region, its map encoded anew into mapBuf (words
// is scratch); for a reachable page, the page from data, or nil if the
// image has no data (a live copy, which wrote those itself); nil for every
// other page, which is zeros.
func (img *Image) pageAt(p page.ID, mapBuf []byte, words []uint64) (buf []byte, reachable bool) {
	ps := img.pageSize
	if slot, isMap := img.space.IsMapSlot(p); isMap {
		if slot == 0 {
			img.space.EncodeMap(p/page.RegionPages(ps), mapBuf, words)
			return mapBuf, false
		}
		return nil, false
	}
	if img.live[p/64]&(1<<(p%64)) == 0 {
		return nil, false
	}
	if img.data == nil {
		return nil, true
	}
	return img.data[p*uint64(ps) : (p+1)*uint64(ps)], true
}

// WriteData writes pages [2, hwm) of the image to w, which stands at the
// offset of page 2, in writes of up to ChunkSize bytes, and returns the
// bytes written.
func (img *Image) WriteData(w io.Writer) (int64, error) {
	if img.raw {
		return img.writeRaw(w)
	}
	ps := img.pageSize
	bw := bufio.NewWriterSize(w, ChunkSize)
	var n int64
	zero := make([]byte, ps)
	mapBuf := make([]byte, ps)
	words := make([]uint64, page.RegionMapWords(ps))
	for p := uint64(2); p < img.hwm; p++ {
		buf, _ := img.pageAt(p, mapBuf, words)
		if buf == nil {
			buf = zero
		}
		if _, err := bw.Write(buf); err != nil {
			return n - int64(bw.Buffered()), err
		}
		n += int64(ps)
	}
	if err := bw.Flush(); err != nil {
		return n - int64(bw.Buffered()), err
	}
	return n, nil
}

// writeRaw is WriteData for a raw image: pages [2, hwm) as they are.
func (img *Image) writeRaw(w io.Writer) (int64, error) {
	ps := int64(img.pageSize)
	var n int64
	for off := 2 * ps; off < int64(img.hwm)*ps; off += ChunkSize {
		end := min(off+ChunkSize, int64(img.hwm)*ps)
		m, err := w.Write(img.data[off:end])
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

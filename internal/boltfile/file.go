package boltfile

import (
	"encoding/binary"

	"github.com/rivetkv/rivet/internal/page"
)

// File is a bbolt file's bytes (a memory map) at one meta: the state bbolt
// would open. Every page it returns lies inside [2, HWM) and the data.
//
// Invariant: len(data) >= HWM × page size (New checks it), so a page id
// below the HWM, with its overflow pages, is inside data.
type File struct {
	data []byte
	ps   int
	meta Meta
}

// New returns the file whose bytes from offset 0 are data, at meta m.
func New(data []byte, m Meta) (*File, error) {
	if !page.ValidPageSize(m.PageSize) {
		return nil, page.Corruptf(uint64(m.Slot), "bbolt page size %d is not one rivet reads", m.PageSize)
	}
	if m.HWM > uint64(len(data))/uint64(m.PageSize) {
		return nil, page.Corruptf(uint64(m.Slot), "bbolt meta names %d pages; the file has %d bytes", m.HWM, len(data))
	}
	return &File{data: data, ps: m.PageSize, meta: m}, nil
}

// Meta returns the meta the file is read at.
func (f *File) Meta() Meta { return f.meta }

// PageSize returns the file's page size.
func (f *File) PageSize() int { return f.ps }

// Data returns the file's bytes from offset 0 (at least HWM pages).
func (f *File) Data() []byte { return f.data }

// Page is a validated bbolt branch or leaf page run: its header says what
// it is, the run (1 + overflow pages) lies below the HWM, and its element
// array fits the run. Elements are checked when read.
type Page struct {
	id    uint64
	flags uint16
	count int
	pages uint64
	buf   []byte // the whole run
}

// ID returns the page's id.
func (p Page) ID() uint64 { return p.id }

// IsLeaf reports whether p is a leaf page (else a branch page).
func (p Page) IsLeaf() bool { return p.flags == flagLeaf }

// Count returns the number of elements.
func (p Page) Count() int { return p.count }

// Pages returns how many pages the run spans (1 + overflow).
func (p Page) Pages() uint64 { return p.pages }

// header reads a page header at id, checking that the run lies below the
// HWM and inside the data, and that the header names id itself. It says
// nothing about the page's type.
func (f *File) header(id uint64) (flags uint16, count int, pages uint64, run []byte, err error) {
	if id < 2 || id >= f.meta.HWM {
		return 0, 0, 0, nil, page.Corruptf(id, "bbolt page id outside [2, %d)", f.meta.HWM)
	}
	off := id * uint64(f.ps)
	h := f.data[off : off+HeaderSize]
	le := binary.LittleEndian
	if self := le.Uint64(h[0:]); self != id {
		return 0, 0, 0, nil, page.Corruptf(id, "bbolt page header names page %d", self)
	}
	flags = le.Uint16(h[8:])
	count = int(le.Uint16(h[10:]))
	pages = uint64(le.Uint32(h[12:])) + 1
	if pages > f.meta.HWM-id {
		return 0, 0, 0, nil, page.Corruptf(id, "bbolt page run of %d pages passes the high-water mark %d", pages, f.meta.HWM)
	}
	return flags, count, pages, f.data[off : off+pages*uint64(f.ps)], nil
}

// Node returns the branch or leaf page at id.
func (f *File) Node(id uint64) (Page, error) {
	flags, count, pages, run, err := f.header(id)
	if err != nil {
		return Page{}, err
	}
	if flags != flagBranch && flags != flagLeaf {
		return Page{}, page.Corruptf(id, "bbolt page flags %#x, want branch or leaf", flags)
	}
	if HeaderSize+count*elemSize > len(run) {
		return Page{}, page.Corruptf(id, "%d elements do not fit the %d-byte bbolt page", count, len(run))
	}
	if flags == flagBranch && count == 0 {
		return Page{}, page.Corruptf(id, "empty bbolt branch page")
	}
	return Page{id: id, flags: flags, count: count, pages: pages, buf: run}, nil
}

// elemRange returns the bytes [start, start+n) of the run, where start is
// element i's own offset plus pos, or false if they leave the run.
func (p Page) elemRange(i int, pos, n uint64) ([]byte, bool) {
	start := uint64(HeaderSize+i*elemSize) + pos
	end := start + n
	if end > uint64(len(p.buf)) {
		return nil, false
	}
	return p.buf[start:end:end], true
}

// BranchElem returns branch element i's key and child page (0 <= i < Count()).
func (p Page) BranchElem(i int) (key []byte, child uint64, err error) {
	e := p.buf[HeaderSize+i*elemSize:]
	le := binary.LittleEndian
	key, ok := p.elemRange(i, uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:])))
	if !ok {
		return nil, 0, page.Corruptf(p.id, "bbolt branch element %d key outside the %d-byte page", i, len(p.buf))
	}
	return key, le.Uint64(e[8:]), nil
}

// LeafElem returns leaf element i (0 <= i < Count()): whether it is a
// bucket, its key and its value.
func (p Page) LeafElem(i int) (bucket bool, key, value []byte, err error) {
	e := p.buf[HeaderSize+i*elemSize:]
	le := binary.LittleEndian
	ks, vs := uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
	kv, ok := p.elemRange(i, uint64(le.Uint32(e[4:])), ks+vs)
	if !ok {
		return false, nil, nil, page.Corruptf(p.id, "bbolt leaf element %d key/value outside the %d-byte page", i, len(p.buf))
	}
	return le.Uint32(e[0:])&leafFlagBucket != 0, kv[:ks:ks], kv[ks:], nil
}

// leafEnd returns where leaf element i's value ends, from the run's start.
// Invariant: LeafElem(i) accepted the element, so this lies in the run.
func (p Page) leafEnd(i int) uint64 {
	e := p.buf[HeaderSize+i*elemSize:]
	le := binary.LittleEndian
	return uint64(HeaderSize+i*elemSize) + uint64(le.Uint32(e[4:])) + uint64(le.Uint32(e[8:])) + uint64(le.Uint32(e[12:]))
}

// Bucket is a decoded bucket value: a paged bucket's root page, or an
// inline bucket's leaf (Root 0).
type Bucket struct {
	Root     uint64
	Sequence uint64
	// Inline is an inline bucket's leaf page (Count may be 0: an empty
	// bucket); valid only when Root is 0.
	Inline Page
}

// DecodeBucket decodes the value of a bucket element found in leaf page
// id. A paged bucket's root must lie in [2, HWM); an inline bucket's page
// must be a leaf whose elements fit the value and are plain values (bbolt
// never inlines a bucket that holds buckets).
func (f *File) DecodeBucket(id uint64, v []byte) (Bucket, error) {
	return decodeBucket(id, v, f.meta.HWM)
}

func decodeBucket(id uint64, v []byte, hwm uint64) (Bucket, error) {
	if len(v) < bucketHeaderSize {
		return Bucket{}, page.Corruptf(id, "bbolt bucket value of %d bytes, want at least %d", len(v), bucketHeaderSize)
	}
	le := binary.LittleEndian
	b := Bucket{Root: le.Uint64(v[0:]), Sequence: le.Uint64(v[8:])}
	if b.Root != 0 {
		if b.Root < 2 || b.Root >= hwm {
			return Bucket{}, page.Corruptf(id, "bbolt bucket root page %d outside [2, %d)", b.Root, hwm)
		}
		return b, nil
	}
	in := v[bucketHeaderSize:]
	if len(in) < HeaderSize {
		return Bucket{}, page.Corruptf(id, "bbolt inline bucket of %d bytes has no page header", len(v))
	}
	flags, count := le.Uint16(in[8:]), int(le.Uint16(in[10:]))
	if flags != flagLeaf {
		return Bucket{}, page.Corruptf(id, "bbolt inline bucket page flags %#x, want leaf", flags)
	}
	if HeaderSize+count*elemSize > len(in) {
		return Bucket{}, page.Corruptf(id, "bbolt inline bucket of %d elements does not fit its %d bytes", count, len(in))
	}
	b.Inline = Page{id: id, flags: flagLeaf, count: count, pages: 0, buf: in[:len(in):len(in)]}
	for i := 0; i < count; i++ {
		bucket, _, _, err := b.Inline.LeafElem(i)
		if err != nil {
			return Bucket{}, page.Corruptf(id, "bbolt inline bucket element %d lies outside its value", i)
		}
		if bucket {
			return Bucket{}, page.Corruptf(id, "bbolt inline bucket element %d is a bucket; bbolt inlines only buckets of plain values", i)
		}
	}
	return b, nil
}

// Freelist returns the ids listed in the freelist page at id and the
// number of pages the freelist's run spans. It validates the page and the
// count against the run; the ids themselves are the caller's to check.
func (f *File) Freelist(id uint64) (ids []byte, pages uint64, err error) {
	flags, count, pages, run, err := f.header(id)
	if err != nil {
		return nil, 0, err
	}
	if flags != flagFreelist {
		return nil, 0, page.Corruptf(id, "bbolt page flags %#x, want freelist", flags)
	}
	start := uint64(HeaderSize)
	n := uint64(count)
	if count == largeFreelist {
		if len(run) < HeaderSize+8 {
			return nil, 0, page.Corruptf(id, "bbolt freelist page cut short")
		}
		n = binary.LittleEndian.Uint64(run[HeaderSize:])
		start += 8
	}
	if n > (uint64(len(run))-start)/8 {
		return nil, 0, page.Corruptf(id, "bbolt freelist of %d ids does not fit its %d-page run", n, pages)
	}
	return run[start : start+8*n], pages, nil
}

// FreeCount returns how many pages the freelist lists, reading only its
// header (0 for a file without a freelist).
func (f *File) FreeCount() (uint64, error) {
	if f.meta.Freelist == NoFreelist {
		return 0, nil
	}
	ids, _, err := f.Freelist(f.meta.Freelist)
	return uint64(len(ids) / 8), err
}

// Package boltfile reads bbolt's on-disk format (bbolt v1.x, format version
// 2), read-only, with the standard library alone: the meta pages, branch and
// leaf pages with their overflow pages, bucket values (paged and inline) and
// the freelist page. It serves rivet's read-only Open of a bbolt file, by
// translating bbolt pages into rivet nodes (Source), and the conversion of a
// bbolt file in place; Check verifies a file's structure.
//
// Nothing read from the file is trusted: every page id, count, offset and
// length is checked against the file before use, and a failure is an
// *errors.CorruptError naming the page and the reason. bbolt pages carry
// neither a txid nor a checksum, so a corrupt file may point pages at each
// other in cycles or share subtrees (a DAG); walks here are bounded by the
// file's pages (Check visits each page at most once) and descents by
// MaxDepth, and rivet's cursors add their edge-key rule (docs/design.md §7).
//
// The layout is docs/design.md §11, learned from bbolt's source
// (internal/common: page.go, meta.go, bucket.go).
package boltfile

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// Format constants (bbolt's internal/common).
const (
	// Magic is the number every bbolt meta page carries.
	Magic uint32 = 0xED0CDAED
	// Version is the only bbolt format version there is.
	Version uint32 = 2
	// HeaderSize is a bbolt page header: id u64, flags u16, count u16,
	// overflow u32.
	HeaderSize = 16
	// elemSize is the size of a branch element (pos u32, ksize u32,
	// pgid u64) and of a leaf element (flags u32, pos u32, ksize u32,
	// vsize u32) alike.
	elemSize = 16
	// bucketHeaderSize is a bucket value's header: root pgid u64,
	// sequence u64.
	bucketHeaderSize = 16
	// metaSize is the meta after the page header, checksum included.
	metaSize = 64
	// metaSumSize is the part of the meta the checksum covers.
	metaSumSize = 56
	// NoFreelist is the freelist pgid of a file written with
	// NoFreelistSync: its free pages are whatever the tree does not reach.
	NoFreelist = ^uint64(0)
	// largeFreelist in a freelist page's count says that the real count
	// is the first u64 after the header.
	largeFreelist = 0xFFFF
)

// Page flags.
const (
	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
)

// leafFlagBucket marks a leaf element whose value is a bucket.
const leafFlagBucket = 0x01

// MaxDepth caps a descent through one bucket's tree: a real bbolt tree of
// 1 KiB pages is far shallower; a deeper path is a cycle.
const MaxDepth = 64

// MaxNesting caps bucket nesting in walks (rivet's own limit).
const MaxNesting = 64

// Meta is a decoded, validated bbolt meta page.
type Meta struct {
	// Slot is the meta page it came from (0 or 1).
	Slot     int
	PageSize int
	Flags    uint32
	// Root is the root bucket's root page; RootSequence its sequence.
	Root         uint64
	RootSequence uint64
	// Freelist is the freelist's page, or NoFreelist.
	Freelist uint64
	// HWM is bbolt's pgid: pages [0, HWM) hold the state.
	HWM  uint64
	Txid uint64
}

// IsMetaPage reports whether buf, the start of a page, has the header flags
// and magic number of a bbolt meta page; it checks nothing else.
func IsMetaPage(buf []byte) bool {
	if len(buf) < HeaderSize+4 {
		return false
	}
	le := binary.LittleEndian
	return le.Uint16(buf[8:]) == flagMeta && le.Uint32(buf[HeaderSize:]) == Magic
}

// DecodeMeta decodes and validates the meta page in buf, read from slot
// (0 or 1). It checks the header flags, magic, version and FNV-64a
// checksum as bbolt does, and, beyond bbolt, that the page size is a power
// of two of at least 512 bytes and that root and freelist lie inside
// [2, HWM).
func DecodeMeta(buf []byte, slot int) (Meta, error) {
	id := uint64(slot)
	if len(buf) < HeaderSize+metaSize {
		return Meta{}, page.Corruptf(id, "bbolt meta page cut short (%d bytes)", len(buf))
	}
	le := binary.LittleEndian
	if f := le.Uint16(buf[8:]); f != flagMeta {
		return Meta{}, page.Corruptf(id, "bbolt page flags %#x, want meta", f)
	}
	m := buf[HeaderSize : HeaderSize+metaSize]
	if magic := le.Uint32(m[0:]); magic != Magic {
		return Meta{}, page.Corruptf(id, "bbolt meta magic %#x, want %#x", magic, Magic)
	}
	if v := le.Uint32(m[4:]); v != Version {
		return Meta{}, fmt.Errorf("%w: bbolt meta page %d has format version %d; bbolt's is %d", rerrors.ErrVersionMismatch, slot, v, Version)
	}
	h := fnv.New64a()
	h.Write(m[:metaSumSize])
	if sum, want := le.Uint64(m[metaSumSize:]), h.Sum64(); sum != want {
		return Meta{}, page.Corruptf(id, "bbolt meta checksum %#x, computed %#x", sum, want)
	}
	meta := Meta{
		Slot:         slot,
		PageSize:     int(le.Uint32(m[8:])),
		Flags:        le.Uint32(m[12:]),
		Root:         le.Uint64(m[16:]),
		RootSequence: le.Uint64(m[24:]),
		Freelist:     le.Uint64(m[32:]),
		HWM:          le.Uint64(m[40:]),
		Txid:         le.Uint64(m[48:]),
	}
	ps := meta.PageSize
	if ps < 512 || ps&(ps-1) != 0 {
		return Meta{}, page.Corruptf(id, "bbolt meta names page size %d", ps)
	}
	if meta.Root < 2 || meta.Root >= meta.HWM {
		return Meta{}, page.Corruptf(id, "bbolt root page %d outside [2, %d)", meta.Root, meta.HWM)
	}
	if meta.Freelist != NoFreelist && (meta.Freelist < 2 || meta.Freelist >= meta.HWM) {
		return Meta{}, page.Corruptf(id, "bbolt freelist page %d outside [2, %d)", meta.Freelist, meta.HWM)
	}
	return meta, nil
}

// EncodeMeta writes m as a bbolt meta page for slot into buf (at least
// HeaderSize+64 bytes), with its checksum; the rest of buf is left alone.
// A copy of a bbolt file (Tx.WriteTo) writes its metas this way.
func EncodeMeta(buf []byte, m Meta, slot int) {
	le := binary.LittleEndian
	le.PutUint64(buf[0:], uint64(slot))
	le.PutUint16(buf[8:], flagMeta)
	le.PutUint16(buf[10:], 0)
	le.PutUint32(buf[12:], 0)
	b := buf[HeaderSize : HeaderSize+metaSize]
	le.PutUint32(b[0:], Magic)
	le.PutUint32(b[4:], Version)
	le.PutUint32(b[8:], uint32(m.PageSize))
	le.PutUint32(b[12:], m.Flags)
	le.PutUint64(b[16:], m.Root)
	le.PutUint64(b[24:], m.RootSequence)
	le.PutUint64(b[32:], m.Freelist)
	le.PutUint64(b[40:], m.HWM)
	le.PutUint64(b[48:], m.Txid)
	h := fnv.New64a()
	h.Write(b[:metaSumSize])
	le.PutUint64(b[metaSumSize:], h.Sum64())
}

// Metas is what ReadMetas found: the meta bbolt would open at, and both
// slots' verdicts.
type Metas struct {
	// Meta is the valid meta with the higher txid (bbolt's choice).
	Meta Meta
	// Errs holds each slot's validation error (nil if valid).
	Errs [2]error
}

// probeSize is how much of a page ReadMetas reads to decode a meta.
const probeSize = HeaderSize + metaSize

// ReadMetas finds the page size and the meta bbolt would open at, reading
// a few hundred bytes: meta 0 at offset 0 names the page size; if it does
// not decode, meta 1 is looked for at every power of two from 1 KiB up
// (bbolt's own search), then both metas are read at that page size. Of the
// valid metas, the one with the higher txid wins, as in bbolt. A page size
// rivet cannot serve (1 KiB to 64 KiB) is refused with an error that says
// so; a file whose metas name more pages than it has is corrupt.
func ReadMetas(r io.ReaderAt, size int64) (Metas, error) {
	var res Metas
	buf := make([]byte, probeSize)
	read := func(off int64) ([]byte, error) {
		if off+probeSize > size {
			return nil, page.Corruptf(uint64(off), "file of %d bytes ends inside a meta page", size)
		}
		if _, err := r.ReadAt(buf, off); err != nil && err != io.EOF {
			return nil, err
		}
		return buf, nil
	}
	ps := 0
	b, err := read(0)
	if err != nil {
		return res, err
	}
	if m, err := DecodeMeta(b, 0); err == nil {
		ps = m.PageSize
	} else {
		for try := int64(1024); try <= 1<<24 && try+probeSize <= size; try *= 2 {
			b, err := read(try)
			if err != nil {
				return res, err
			}
			if m, err := DecodeMeta(b, 1); err == nil && int64(m.PageSize) == try {
				ps = m.PageSize
				break
			}
		}
	}
	if ps == 0 {
		for slot := range res.Errs {
			off := int64(0)
			if slot == 1 {
				off = 4096
			}
			if b, err := read(off); err != nil {
				res.Errs[slot] = err
			} else if m, err := DecodeMeta(b, slot); err != nil {
				res.Errs[slot] = err
			} else {
				res.Errs[slot] = page.Corruptf(uint64(slot), "bbolt meta names page size %d, which does not place it at offset %d", m.PageSize, off)
			}
		}
		return res, fmt.Errorf("bbolt file with no valid meta page: meta 0: %w; meta 1: %w", res.Errs[0], res.Errs[1])
	}
	if !page.ValidPageSize(ps) {
		return res, fmt.Errorf("bbolt file with %d-byte pages: rivet reads page sizes from %d to %d bytes", ps, page.MinPageSize, page.MaxPageSize)
	}
	var metas [2]*Meta
	for slot := range metas {
		b, err := read(int64(slot) * int64(ps))
		if err != nil {
			res.Errs[slot] = err
			continue
		}
		m, err := DecodeMeta(b, slot)
		switch {
		case err != nil:
			res.Errs[slot] = err
		case m.PageSize != ps:
			res.Errs[slot] = page.Corruptf(uint64(slot), "bbolt meta names page size %d, the other %d", m.PageSize, ps)
		default:
			metas[slot] = &m
		}
	}
	best := metas[0]
	if best == nil || (metas[1] != nil && metas[1].Txid > best.Txid) {
		best = metas[1]
	}
	if best == nil {
		return res, fmt.Errorf("bbolt file with no valid meta page: meta 0: %w; meta 1: %w", res.Errs[0], res.Errs[1])
	}
	if need := best.HWM * uint64(ps); best.HWM > uint64(size)/uint64(ps) {
		return res, page.Corruptf(uint64(best.Slot), "bbolt meta names %d pages (%d bytes); the file has %d bytes", best.HWM, need, size)
	}
	res.Meta = *best
	return res, nil
}

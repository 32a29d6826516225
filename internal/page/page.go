// Package page defines rivet's on-disk page formats: it encodes, decodes and
// validates every byte rivet stores. No other package interprets page bytes.
//
// The byte layouts are documented in docs/design.md §2; the constants here are
// the source of truth for offsets and sizes. All integers are little-endian and
// encoded explicitly with encoding/binary.
//
// Decoders never trust their input: every count, offset and length is checked
// against the buffer before use, and a failure is a *errors.CorruptError that
// names the page and the reason.
package page

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	rerrors "github.com/rivetkv/rivet/errors"
)

// FormatVersion is the on-disk format version. Every change to a layout in
// this package changes it, together with docs/design.md.
const FormatVersion = 4

// Magic identifies a rivet meta page ("RIVT" as bytes).
const Magic uint32 = 0x54564952

// Page size bounds.
const (
	MinPageSize     = 1024
	MaxPageSize     = 64 * 1024
	DefaultPageSize = 4096
)

// ID is a page id: the page's offset in the file divided by the page size.
type ID = uint64

// Type is the kind of a page, stored in its header.
type Type uint16

// Page types.
const (
	TypeMeta      Type = 1
	TypeBranch    Type = 2
	TypeLeaf      Type = 3
	TypeRegionMap Type = 4
	TypeBlob      Type = 5
)

func (t Type) String() string {
	switch t {
	case TypeMeta:
		return "meta"
	case TypeBranch:
		return "branch"
	case TypeLeaf:
		return "leaf"
	case TypeRegionMap:
		return "regionmap"
	case TypeBlob:
		return "blob"
	}
	return fmt.Sprintf("type(%d)", uint16(t))
}

// HeaderSize is the size of the common page header.
const HeaderSize = 32

// Header field offsets.
const (
	offType     = 0
	offFlags    = 2
	offCount    = 4
	offTxid     = 8
	offPgid     = 16
	offOverflow = 24
	offChecksum = 28
)

// Run is a run of contiguous pages to write: Data covers pages
// [ID, ID+len(Data)/page size), so len(Data) is a positive multiple of the
// page size. The tree spills its nodes as runs, the free-space map its
// region map pages, and the pager writes them.
type Run struct {
	ID   ID
	Data []byte
}

// CompareRuns orders runs by their first page, for slices.SortFunc.
func CompareRuns(a, b Run) int { return cmp.Compare(a.ID, b.ID) }

// Header is the decoded common page header (docs/design.md §2.1).
type Header struct {
	Type     Type
	Flags    uint16
	Count    uint32
	Txid     uint64
	ID       ID
	Overflow uint32
	Checksum uint32
}

// Pages returns the number of pages of the run the header starts.
func (h Header) Pages() uint64 { return uint64(h.Overflow) + 1 }

// PutHeader encodes h into the first HeaderSize bytes of buf.
func PutHeader(buf []byte, h Header) {
	_ = buf[HeaderSize-1]
	binary.LittleEndian.PutUint16(buf[offType:], uint16(h.Type))
	binary.LittleEndian.PutUint16(buf[offFlags:], h.Flags)
	binary.LittleEndian.PutUint32(buf[offCount:], h.Count)
	binary.LittleEndian.PutUint64(buf[offTxid:], h.Txid)
	binary.LittleEndian.PutUint64(buf[offPgid:], h.ID)
	binary.LittleEndian.PutUint32(buf[offOverflow:], h.Overflow)
	binary.LittleEndian.PutUint32(buf[offChecksum:], h.Checksum)
}

// ReadHeader decodes the common header at the start of buf. It fails only if
// buf is shorter than a header; callers validate the fields with Expect.
func ReadHeader(id ID, buf []byte) (Header, error) {
	if len(buf) < HeaderSize {
		return Header{}, Corruptf(id, "page shorter than its header (%d bytes)", len(buf))
	}
	return Header{
		Type:     Type(binary.LittleEndian.Uint16(buf[offType:])),
		Flags:    binary.LittleEndian.Uint16(buf[offFlags:]),
		Count:    binary.LittleEndian.Uint32(buf[offCount:]),
		Txid:     binary.LittleEndian.Uint64(buf[offTxid:]),
		ID:       binary.LittleEndian.Uint64(buf[offPgid:]),
		Overflow: binary.LittleEndian.Uint32(buf[offOverflow:]),
		Checksum: binary.LittleEndian.Uint32(buf[offChecksum:]),
	}, nil
}

// Expect checks that a header read at page id has the given type, names id as
// its own page and, when txid is non-zero, was written by txid.
func (h Header) Expect(id ID, t Type, txid uint64) error {
	if h.Type != t {
		return Corruptf(id, "page type is %v, want %v", h.Type, t)
	}
	if h.ID != id {
		return Corruptf(id, "page header names page %d (misdirected or copied page)", h.ID)
	}
	if txid != 0 && h.Txid != txid {
		return Corruptf(id, "page written by txn %d, parent expects txn %d (stale or torn page)", h.Txid, txid)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ChecksumSkipping returns the CRC-32C of b computed as if the four bytes at
// off were zero. Self-checksummed pages store their checksum there.
func ChecksumSkipping(b []byte, off int) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:off])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, b[off+4:])
}

// Corruptf returns a *errors.CorruptError for page id.
func Corruptf(id ID, format string, args ...any) error {
	return &rerrors.CorruptError{Page: id, Reason: fmt.Sprintf(format, args...)}
}

// ValidPageSize reports whether n is a supported page size.
func ValidPageSize(n int) bool {
	return n >= MinPageSize && n <= MaxPageSize && n&(n-1) == 0
}

// RegionPages returns the number of pages in a region for a page size: one
// bit per page in a map page after its header (docs/design.md §2.6).
func RegionPages(pageSize int) uint64 { return uint64(pageSize-HeaderSize) * 8 }

// MapSlot returns the page id of map slot s (0 = A, 1 = B) of region r.
func MapSlot(pageSize int, r uint64, s int) ID {
	base := uint64(0)
	if r == 0 {
		base = 2
	}
	return r*RegionPages(pageSize) + base + uint64(s)
}

// RegionFirstData returns the first page of region r that can hold data
// (the page after its map slots).
func RegionFirstData(pageSize int, r uint64) ID { return MapSlot(pageSize, r, 1) + 1 }

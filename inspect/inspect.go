// Package inspect lets tools look inside a rivet file without the
// library's internal packages: it tells a rivet file from a bbolt one
// (Detect), probes a file's page size, decodes its meta pages and any
// page's bytes into plain structs, and computes the canonical digest of a
// database's contents that `rivet verify`, import and export compare.
//
// Every decoder here is a thin wrapper over the one the library itself
// uses, so a tool sees exactly what Open, Check and Salvage see. Nothing
// read is trusted: a decoder returns an error (a *errors.CorruptError for
// damaged bytes) and never panics, whatever the input.
//
// The byte layouts are described in docs/design.md §2.
package inspect

import "github.com/rivetkv/rivet/internal/page"

// Page size bounds and fixed layout figures of rivet's format.
const (
	// Magic is the number a rivet meta page starts with ("RIVT" as
	// little-endian bytes).
	Magic = page.Magic
	// MinPageSize and MaxPageSize bound the page sizes rivet writes.
	MinPageSize = page.MinPageSize
	MaxPageSize = page.MaxPageSize
	// MinPages is the fewest pages a rivet state has: the two metas and
	// region 0's two map slots. A file's metas are pages 0 and 1.
	MinPages = page.MinPages
	// HeaderSize is the size of the header every page but a meta starts
	// with; a page's contents follow it.
	HeaderSize = page.HeaderSize
	// BlobPayloadStart is where a blob extent's payload starts in its
	// run's bytes, after the header and the reference to the next extent.
	BlobPayloadStart = page.BlobPayloadStart
)

// HasMagic reports whether b starts with rivet's meta magic: the cheapest
// sign that b is a rivet meta page, for telling a rivet file from a file
// of another format. It verifies nothing else.
func HasMagic(b []byte) bool { return page.HasMagic(b) }

// RegionPages returns the number of pages in a region, the span one region
// map page describes, for a page size.
func RegionPages(pageSize int) uint64 { return page.RegionPages(pageSize) }

// Ref points from a parent to a child run: the child's first page, the
// transaction that wrote it and the CRC-32C of the whole run.
type Ref struct {
	ID       uint64
	Txid     uint64
	Checksum uint32
}

// IsZero reports whether r points nowhere (an empty tree).
func (r Ref) IsZero() bool { return r.ID == 0 }

func refOf(r page.Ref) Ref { return Ref{ID: r.ID, Txid: r.Txid, Checksum: r.Checksum} }

// Extent points to a run of blob pages: its reference and its length.
type Extent struct {
	Ref
	Pages uint32
}

func extentOf(e page.ExtentRef) Extent { return Extent{Ref: refOf(e.Ref), Pages: e.Pages} }

package inspect

import (
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
)

// PageType is the kind of a page, as its header names it.
type PageType uint16

// The page types rivet writes.
const (
	TypeMeta      = PageType(page.TypeMeta)
	TypeBranch    = PageType(page.TypeBranch)
	TypeLeaf      = PageType(page.TypeLeaf)
	TypeRegionMap = PageType(page.TypeRegionMap)
	TypeBlob      = PageType(page.TypeBlob)
)

// String names t ("leaf"), or gives its number for a type rivet does not
// write.
func (t PageType) String() string { return page.Type(t).String() }

// Header is the common header of a page other than a meta, as stored.
type Header struct {
	Type     PageType
	Flags    uint16
	Count    uint32
	Txid     uint64
	ID       uint64
	Overflow uint32
	Checksum uint32
}

// Pages returns the number of pages of the run the header starts.
func (h Header) Pages() uint64 { return uint64(h.Overflow) + 1 }

// Leaf element flags: what a leaf element's value is.
const (
	// FlagBucket: the value is a nested bucket's record.
	FlagBucket = page.FlagBucket
	// FlagBlob: the value is stored in blob pages; the element holds a
	// reference to them.
	FlagBlob = page.FlagBlob
)

// Page is one page decoded by what it says it is. Exactly one of Meta,
// Node, Blob and RegionMap is set when the page decodes; otherwise Err
// says why (Zero: every byte is zero), or, with no error, the header names
// a type rivet does not write. Byte slices alias the buffer decoded.
type Page struct {
	ID uint64
	// Zero reports a page whose bytes are all zero: nothing was written
	// there.
	Zero bool
	// Header is the page's header (not set for metas, pages 0 and 1).
	Header    Header
	Meta      *Meta
	Node      *Node
	Blob      *Blob
	RegionMap *RegionMap
	// Err says why the page does not decode; for a node, why its header
	// or element table is invalid (an element that fails is in Node.Err).
	Err error
}

// Node is a branch or leaf. Elements holds the elements that decode, in
// order: all Count of them unless Err says why the next one does not.
type Node struct {
	Leaf     bool
	Count    int
	Elements []Element
	Err      error
}

// Element is one element of a node. A branch element has Key and Child; a
// leaf element has Flags, Key and Value, and for a bucket or blob value
// the decoded Bucket or Blob (or Err, when the record does not decode).
type Element struct {
	Key    []byte
	Child  Ref
	Flags  uint32
	Value  []byte
	Bucket *BucketRecord
	Blob   *BlobRef
	Err    error
}

// BucketRecord is a nested bucket's record: its tree's root, or its whole
// contents inline in the parent's leaf.
type BucketRecord struct {
	// Root is the bucket's tree; zero for an empty or inline bucket.
	Root     Ref
	Sequence uint64
	// Inline reports a bucket stored in the record itself: InlineKeys
	// keys in InlineBytes bytes.
	Inline      bool
	InlineBytes int
	InlineKeys  int
}

// BlobRef is a large value's reference: its length and its first extent.
type BlobRef struct {
	Length uint64
	First  Extent
}

// Blob is an extent of a large value's pages. When only the first
// PagesRead of its Pages were given, it is not validated: Length is what
// the header claims and Payload what the given pages hold of it.
type Blob struct {
	// Length is the payload's length in bytes.
	Length    uint64
	Pages     uint64
	PagesRead uint64
	// Payload is the payload (its first bytes when PagesRead < Pages).
	Payload []byte
	// Next is the following extent; zero on the last.
	Next Extent
}

// RegionMap is one of a region's two map pages: which pages of the region
// were free in the state that wrote it.
type RegionMap struct {
	Region uint64
	// Slot is 0 for slot A, 1 for slot B.
	Slot int
	// Txid is the sync point that wrote the map.
	Txid uint64
	// First and Pages span the region's pages.
	First, Pages uint64
	// Free lists the free pages, in ascending runs.
	Free []PageRun
}

// PageRun is the run of pages [First, First+N).
type PageRun struct {
	First, N uint64
}

// DecodePage decodes page id of a file with the given page size and
// high-water mark (the state's page count, which bounds every reference).
// b holds the page's bytes: for a node or blob run, as many of its pages as
// the caller read (a node is decoded from the pages given; a blob run
// given in part is described, not validated). Pages 0 and 1 decode as
// metas. The error is for arguments only (an unsupported page size, b
// shorter than one page); what the page holds, damage included, is in the
// returned Page.
func DecodePage(b []byte, id uint64, pageSize int, hwm uint64) (*Page, error) {
	if !page.ValidPageSize(pageSize) {
		return nil, fmt.Errorf("inspect: page size %d is not one rivet supports", pageSize)
	}
	if len(b) < pageSize {
		return nil, fmt.Errorf("inspect: %d bytes given for a page of %d", len(b), pageSize)
	}
	ps := uint64(pageSize)
	p := &Page{ID: id}
	if id < 2 {
		p.Meta, p.Err = DecodeMeta(id, b[:ps])
		p.Zero = p.Err != nil && page.IsZeroPage(b[:ps])
		return p, nil
	}
	if page.IsZeroPage(b[:ps]) {
		p.Zero = true
		return p, nil
	}
	h, err := page.ReadHeader(id, b)
	if err != nil {
		p.Err = err
		return p, nil
	}
	p.Header = Header{Type: PageType(h.Type), Flags: h.Flags, Count: h.Count, Txid: h.Txid, ID: h.ID, Overflow: h.Overflow, Checksum: h.Checksum}
	switch h.Type {
	case page.TypeBranch, page.TypeLeaf:
		pages := min(h.Pages(), uint64(len(b))/ps)
		n, err := page.NodeFromBuffer(b[:pages*ps], pageSize, id, 0, hwm)
		if err != nil {
			p.Err = err
			return p, nil
		}
		p.Node = nodeOf(n)
	case page.TypeBlob:
		p.Blob, p.Err = blobOf(b, id, pageSize, hwm, h)
	case page.TypeRegionMap:
		p.RegionMap, p.Err = regionMapOf(b[:ps], id, pageSize)
	}
	return p, nil
}

// nodeOf decodes n's elements, stopping at the first that does not.
func nodeOf(n page.Node) *Node {
	out := &Node{Leaf: n.IsLeaf(), Count: n.Count()}
	for i := range n.Count() {
		if !n.IsLeaf() {
			k, err := n.BranchKey(i)
			if err != nil {
				out.Err = err
				return out
			}
			out.Elements = append(out.Elements, Element{Key: k, Child: refOf(n.BranchChild(i))})
			continue
		}
		flags, k, v, err := n.LeafElem(i)
		if err != nil {
			out.Err = err
			return out
		}
		e := Element{Key: k, Flags: flags, Value: v}
		switch flags {
		case page.FlagBucket:
			rec, err := page.DecodeBucketRecord(n.ID(), v)
			if err != nil {
				e.Err = err
				break
			}
			e.Bucket = &BucketRecord{Root: refOf(rec.Root), Sequence: rec.Sequence, Inline: rec.Inline != nil, InlineBytes: len(rec.Inline)}
			if rec.Inline != nil {
				if in, err := page.InlineLeaf(n.ID(), rec.Inline); err == nil {
					e.Bucket.InlineKeys = in.Count()
				}
			}
		case page.FlagBlob:
			ref, err := page.DecodeBlobRef(n.ID(), v)
			if err != nil {
				e.Err = err
				break
			}
			e.Blob = &BlobRef{Length: ref.Length, First: extentOf(ref.First)}
		}
		out.Elements = append(out.Elements, e)
	}
	return out
}

// blobOf decodes the blob extent at id from the pages of it in b.
func blobOf(b []byte, id uint64, pageSize int, hwm uint64, h page.Header) (*Blob, error) {
	ps := uint64(pageSize)
	var inState uint64
	if id < hwm {
		inState = hwm - id
	}
	pages := min(h.Pages(), inState)
	given := b[:min(uint64(len(b)), pages*ps)]
	if uint64(len(given)) < pages*ps {
		// Only the first pages were given: the header's claims are
		// reported as such, without the whole-run checks.
		payload := given[min(len(given), page.BlobPayloadStart):]
		payload = payload[:min(uint64(len(payload)), uint64(h.Count))]
		return &Blob{Length: uint64(h.Count), Pages: pages, PagesRead: uint64(len(given)) / ps, Payload: payload}, nil
	}
	ext, err := page.ReadBlobExtent(given, id, pageSize, page.ExtentRef{Ref: page.Ref{ID: id}, Pages: uint32(pages)}, hwm)
	if err != nil {
		return nil, err
	}
	return &Blob{Length: uint64(len(ext.Payload)), Pages: pages, PagesRead: pages, Payload: ext.Payload, Next: extentOf(ext.Next)}, nil
}

// regionMapOf decodes the map page b, read from map slot id.
func regionMapOf(b []byte, id uint64, pageSize int) (*RegionMap, error) {
	txid, free, err := page.DecodeRegionMap(b, pageSize, id)
	if err != nil {
		return nil, err
	}
	rp := page.RegionPages(pageSize)
	r := id / rp
	m := &RegionMap{Region: r, Txid: txid, First: r * rp, Pages: rp}
	if id == page.MapSlot(pageSize, r, 1) {
		m.Slot = 1
	}
	bit := func(i uint64) bool { return free[i/64]&(1<<(i%64)) != 0 }
	for i := uint64(0); i < rp; {
		if !bit(i) {
			i++
			continue
		}
		j := i
		for j < rp && bit(j) {
			j++
		}
		m.Free = append(m.Free, PageRun{First: r*rp + i, N: j - i})
		i = j
	}
	return m, nil
}

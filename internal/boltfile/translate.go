package boltfile

import (
	"math"

	"github.com/rivetkv/rivet/internal/page"
)

// Source serves a bbolt file's pages to rivet's read path as rivet nodes
// (docs/design.md §11.2): each branch or leaf page is re-encoded in rivet's
// node layout in a fresh buffer, its bucket values as rivet bucket records
// (a paged bucket's root page with the txid every translated node carries;
// an inline bucket as rivet's inline record), so every read of rivet's API
// works unchanged. Translated nodes are immutable — the file cannot change
// while rivet holds its shared lock — so a bounded cache shared by all
// transactions keeps the hot ones. A node handed out stays valid after the
// cache drops it: the garbage collector keeps its buffer while a caller
// holds a slice of it.
//
// It is safe for concurrent use.
type Source struct {
	f     *File
	txid  uint64
	cache *nodeCache
}

// DefaultCacheBytes is the translated-node cache of a read-only Open of a
// bbolt file: all of a 1 GiB file's branch pages (about 1 % of its pages)
// and the hottest leaves.
const DefaultCacheBytes = 32 << 20

// NewSource returns the translating source of f, with a cache of about
// cacheBytes bytes of translated nodes (0: none).
func NewSource(f *File, cacheBytes int) *Source {
	return &Source{f: f, txid: f.meta.Txid, cache: newNodeCache(cacheBytes)}
}

// Txid is the txid every translated node, child reference and bucket
// record carries: the meta's. Child references equal to their parent's
// txid pass rivet's "a child is not newer than its parent" check.
func (s *Source) Txid() uint64 { return s.txid }

// Root returns the reference of the root bucket's tree.
func (s *Source) Root() page.Ref { return page.Ref{ID: s.f.meta.Root, Txid: s.txid} }

// ReadNode returns page ref.ID translated into a rivet node: from the
// cache, or translated now. The reference's txid and checksum are not
// checked (bbolt pages carry neither).
func (s *Source) ReadNode(ref page.Ref) (page.Node, error) {
	if n, ok := s.cache.get(ref.ID); ok {
		return n, nil
	}
	n, err := s.Translate(ref.ID)
	if err != nil {
		return page.Node{}, err
	}
	s.cache.put(ref.ID, n)
	return n, nil
}

// Translate re-encodes the branch or leaf page id as a rivet node, without
// the cache.
func (s *Source) Translate(id uint64) (page.Node, error) {
	p, err := s.f.Node(id)
	if err != nil {
		return page.Node{}, err
	}
	if p.IsLeaf() {
		return s.translateLeaf(p)
	}
	return s.translateBranch(p)
}

func (s *Source) translateBranch(p Page) (page.Node, error) {
	n := p.Count()
	size := uint64(page.HeaderSize + n*page.BranchElemSize)
	for i := 0; i < n; i++ {
		k, child, err := p.BranchElem(i)
		if err != nil {
			return page.Node{}, err
		}
		if child < 2 || child >= s.f.meta.HWM {
			return page.Node{}, page.Corruptf(p.id, "bbolt branch element %d points to page %d outside [2, %d)", i, child, s.f.meta.HWM)
		}
		size += uint64(len(k))
	}
	if size > math.MaxUint32 {
		return page.Node{}, page.Corruptf(p.id, "bbolt page too large to translate (%d bytes)", size)
	}
	buf := make([]byte, size)
	page.EncodeBranchFunc(buf, len(buf), p.id, s.txid, n, func(i int) ([]byte, page.Ref) {
		// Invariant: the loop above validated every element.
		k, child, _ := p.BranchElem(i)
		return k, page.Ref{ID: child, Txid: s.txid}
	})
	return page.TranslatedNode(buf, p.id, p.pages)
}

func (s *Source) translateLeaf(p Page) (page.Node, error) {
	n := p.Count()
	size := uint64(page.HeaderSize + n*page.LeafElemSize)
	// records holds the translated values of bucket elements; nil for a
	// leaf of plain values, the common case.
	var records [][]byte
	// end is where the last key or value ends in the page: a leaf of
	// plain values moves as one block up to there.
	end := uint64(HeaderSize + n*elemSize)
	for i := 0; i < n; i++ {
		bucket, k, v, err := p.LeafElem(i)
		if err != nil {
			return page.Node{}, err
		}
		end = max(end, p.leafEnd(i))
		if bucket {
			if records == nil {
				records = make([][]byte, n)
			}
			rec, err := s.bucketRecord(p.id, v)
			if err != nil {
				return page.Node{}, err
			}
			records[i] = rec
			v = rec
		}
		size += uint64(len(k) + len(v))
	}
	if size > math.MaxUint32 || end+page.HeaderSize > math.MaxUint32 {
		return page.Node{}, page.Corruptf(p.id, "bbolt page too large to translate (%d bytes)", max(size, end))
	}
	if records == nil {
		// bbolt's leaf element is rivet's but for where a key's position
		// counts from: the element array and the bytes after it move
		// whole, and only the positions change.
		buf := page.LeafFromRelative(p.buf[HeaderSize:end], p.id, s.txid, n)
		return page.TranslatedNode(buf, p.id, p.pages)
	}
	buf := make([]byte, size)
	page.EncodeLeafFunc(buf, len(buf), p.id, s.txid, n, func(i int) (uint32, []byte, []byte) {
		// Invariant: the loop above validated every element.
		_, k, v, _ := p.LeafElem(i)
		if records != nil && records[i] != nil {
			return page.FlagBucket, k, records[i]
		}
		return 0, k, v
	})
	return page.TranslatedNode(buf, p.id, p.pages)
}

// bucketRecord translates the bbolt bucket value v, found in leaf page id,
// into a rivet bucket record: a paged bucket's root with the source's txid,
// an empty bucket as an empty record, an inline bucket as rivet's inline
// record.
func (s *Source) bucketRecord(id uint64, v []byte) ([]byte, error) {
	b, err := s.f.DecodeBucket(id, v)
	if err != nil {
		return nil, err
	}
	rec := page.BucketRecord{Sequence: b.Sequence}
	switch {
	case b.Root != 0:
		rec.Root = page.Ref{ID: b.Root, Txid: s.txid}
	case b.Inline.Count() > 0:
		in := b.Inline
		rec.Inline = page.EncodeInlineRecord(in.Count(), func(i int) (uint32, []byte, []byte) {
			// Invariant: DecodeBucket validated every element, all plain.
			_, k, v, _ := in.LeafElem(i)
			return 0, k, v
		})
	}
	return rec.Encode(), nil
}

package salvage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/page"
)

// A bbolt file is salvaged through internal/boltfile's loose decoders,
// which read either byte order and check every offset against the page it
// lies in. bbolt's own code trusts its pages and panics (or reads out of
// bounds) on damaged ones.
//
// A bbolt data page carries no checksum, so damage shows only where it
// breaks the structure: a page that names another id, an unknown type,
// elements or keys outside the page, keys out of order or outside the
// separators of the branch above, a child outside the file, a page reached
// twice (a cycle). A changed byte inside a value is not detectable.

// bboltHeadSize is how much of a bbolt file is read to find its metas: both
// slots at every page size bbolt allows (512 bytes to 1 MiB).
const bboltHeadSize = 2 << 20

// boltSalvager walks a possibly damaged bbolt file.
//
// Invariant: as in salvager, every page id it reads is below limit and
// every page it accepts is marked seen first, so the walk reads each page
// at most once and the buffers on its stack are distinct runs of the file.
type boltSalvager struct {
	walk
	r     io.ReaderAt
	bo    binary.ByteOrder
	ps    int
	limit uint64 // usable pages: min(HWM, pages in the file)
}

// readBbolt is Read for a bbolt file.
func readBbolt(r io.ReaderAt, size int64, v Visitor) (*Report, error) {
	s := &boltSalvager{r: r, walk: walk{v: v, rep: &Report{}}}
	m, err := s.chooseMeta(size)
	if err != nil {
		return nil, err
	}
	s.rep.Meta, s.rep.Txid, s.rep.PageSize = m.Slot, m.Txid, m.PageSize
	s.bo, s.ps = m.Order, m.PageSize
	pages := uint64(size) / uint64(m.PageSize)
	s.limit = min(m.HWM, pages)
	if s.limit < m.HWM {
		s.note("the file ends at page %d, before the high-water mark %d: it was cut short", pages, m.HWM)
	}
	s.seen = make([]uint64, (s.limit+63)/64)
	// The root bucket's tree holds the top-level buckets.
	if err := s.tree(m.Root, nil, nil, 0, true); err != nil {
		return nil, err
	}
	return s.rep, nil
}

// chooseMeta picks the newest valid meta whose root page is a tree page
// naming itself; failing that, a damaged meta's fields if its root is.
// Every page size bbolt allows is tried, so a meta 0 whose page size field
// is damaged does not hide meta 1.
func (s *boltSalvager) chooseMeta(size int64) (*boltfile.LooseMeta, error) {
	head := make([]byte, max(0, min(size, bboltHeadSize)))
	if _, err := s.r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var valid, loose []*boltfile.LooseMeta
	problems := map[int]string{}
	for ps := 512; ps <= 1<<20; ps *= 2 {
		for slot := range 2 {
			off := slot * ps
			if off+boltfile.LooseMetaSize > len(head) {
				continue
			}
			m, err := boltfile.DecodeLooseMeta(head[off:], slot, ps)
			switch {
			case m == nil:
			case err == nil:
				valid = append(valid, m)
			default:
				loose = append(loose, m)
				if !errors.Is(err, boltfile.ErrOtherPageSize) {
					problems[slot] = fmt.Sprintf("meta %d: %v", slot, err)
				}
			}
		}
	}
	best := func(list []*boltfile.LooseMeta, needRoot bool) *boltfile.LooseMeta {
		var best *boltfile.LooseMeta
		for _, m := range list {
			if (best == nil || m.Txid > best.Txid) && (!needRoot || s.rootOK(m, size) == nil) {
				best = m
			}
		}
		return best
	}
	for slot := range 2 {
		if p, ok := problems[slot]; ok {
			s.note("%s", p)
		} else if !slices.ContainsFunc(valid, func(m *boltfile.LooseMeta) bool { return m.Slot == slot }) {
			s.note("meta %d is not a bbolt meta page", slot)
		}
	}
	if m := best(valid, true); m != nil {
		if n := best(valid, false); n != m {
			s.note("meta %d (txid %d) names a root page that fails (%s); salvaged meta %d (txid %d)", n.Slot, n.Txid, reason(s.rootOK(n, size)), m.Slot, m.Txid)
		}
		return m, nil
	}
	if m := best(loose, true); m != nil {
		s.note("no meta page is valid; salvaging the state meta %d names (txid %d, %d-byte pages), whose root page is a tree page", m.Slot, m.Txid, m.PageSize)
		return m, nil
	}
	return nil, fmt.Errorf("%w: no bbolt meta page names a usable root page: nothing can be salvaged", rerrors.ErrCorrupt)
}

// rootOK checks that m's root page is a branch or leaf page naming itself.
func (s *boltSalvager) rootOK(m *boltfile.LooseMeta, size int64) error {
	limit := min(m.HWM, uint64(size)/uint64(m.PageSize))
	if m.Root < 2 || m.Root >= limit {
		return page.Corruptf(m.Root, "root page outside the file's pages [2, %d)", limit)
	}
	head := make([]byte, boltfile.HeaderSize)
	if _, err := s.r.ReadAt(head, int64(m.Root)*int64(m.PageSize)); err != nil {
		return page.Corruptf(m.Root, "read: %v", err)
	}
	_, err := boltfile.LooseRunPages(head, m.Root, m.Order)
	return err
}

// readRun reads the page run at id, checking its header.
func (s *boltSalvager) readRun(id uint64) ([]byte, error) {
	if id < 2 || id >= s.limit {
		return nil, page.Corruptf(id, "page id outside the file's pages [2, %d)", s.limit)
	}
	first := make([]byte, s.ps)
	if _, err := s.r.ReadAt(first, int64(id)*int64(s.ps)); err != nil {
		return nil, page.Corruptf(id, "read: %v", err)
	}
	pages, err := boltfile.LooseRunPages(first, id, s.bo)
	if err != nil {
		return nil, err
	}
	if pages > s.limit-id {
		return nil, page.Corruptf(id, "run of %d pages passes the end of the file", pages)
	}
	if pages == 1 {
		return first, nil
	}
	run := make([]byte, pages*uint64(s.ps))
	if _, err := s.r.ReadAt(run, int64(id)*int64(s.ps)); err != nil {
		return nil, page.Corruptf(id, "read: %v", err)
	}
	return run, nil
}

// tree salvages the subtree rooted at page id, which holds keys [lo, hi)
// of the current bucket. root marks a bucket's root (which may be an empty
// leaf). Only the visitor's errors are returned; damage becomes losses.
func (s *boltSalvager) tree(id uint64, lo, hi []byte, depth int, root bool) error {
	if depth >= boltfile.MaxDepth {
		s.lose(Loss{From: lo, To: hi, Page: id, Err: page.Corruptf(id, "tree deeper than %d levels (a cycle?)", boltfile.MaxDepth)})
		return nil
	}
	run, err := s.readRun(id)
	if err == nil {
		err = s.mark(id, uint64(len(run)/s.ps))
	}
	var n *boltfile.LooseNode
	if err == nil {
		n, err = boltfile.DecodeLooseNode(id, run, s.bo, lo, hi, root)
	}
	if err != nil {
		s.lose(Loss{From: lo, To: hi, Page: id, Err: err})
		return nil
	}
	if !n.Leaf {
		for i, kid := range n.Children {
			from, to := lo, hi
			if i > 0 {
				from = n.Keys[i]
			}
			if i+1 < len(n.Children) {
				to = n.Keys[i+1]
			}
			if err := s.tree(kid, from, to, depth+1, false); err != nil {
				return err
			}
		}
		return nil
	}
	return s.leaf(n)
}

// leaf salvages the elements of a decoded leaf (or inline page).
func (s *boltSalvager) leaf(n *boltfile.LooseNode) error {
	for i, k := range n.Keys {
		v := n.Values[i]
		if n.Buckets[i] {
			if err := s.bucket(n.ID, k, v); err != nil {
				return err
			}
			continue
		}
		if len(s.path) == 0 {
			s.lose(Loss{Key: k, Page: n.ID, Err: page.Corruptf(n.ID, "a plain value in the root bucket, where only buckets belong")})
			continue
		}
		s.rep.Keys++
		s.rep.Bytes += int64(len(k) + len(v))
		if err := s.v.Put(s.path, k, v); err != nil {
			return err
		}
	}
	return nil
}

// bucket salvages the nested bucket k whose value v was found in page id.
func (s *boltSalvager) bucket(id uint64, k, v []byte) error {
	root, seq, err := boltfile.DecodeLooseBucketHeader(id, v, s.bo)
	if err != nil {
		s.lose(Loss{Key: k, Page: id, Err: err})
		return nil
	}
	if len(s.path) >= boltfile.MaxNesting {
		s.lose(Loss{Key: k, Page: id, Err: page.Corruptf(id, "buckets nested deeper than %d (a cycle?)", boltfile.MaxNesting)})
		return nil
	}
	var inline *boltfile.LooseNode
	if root == 0 {
		if inline, err = boltfile.DecodeLooseInline(id, v, s.bo); err != nil {
			s.lose(Loss{Key: k, Page: id, Err: err})
			return nil
		}
	}
	s.path = append(s.path, k)
	defer func() { s.path = s.path[:len(s.path)-1] }()
	s.rep.Buckets++
	s.rep.Bytes += int64(len(k))
	if err := s.v.Bucket(s.path, seq); err != nil {
		return err
	}
	if inline != nil {
		return s.leaf(inline)
	}
	return s.tree(root, nil, nil, 0, true)
}

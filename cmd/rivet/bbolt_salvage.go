package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
)

// A tolerant reader of bbolt's file format, for salvage. bbolt's own code
// trusts its pages and panics (or reads out of bounds) on damaged ones, so
// this walks the pages by hand, checking every offset against the page it
// lies in, and skips each subtree whose page fails.
//
// The format, as read in bbolt's source (internal/common: page.go, meta.go,
// bucket.go; the integers are in the writing machine's byte order, which
// the meta's magic tells):
//
//	page header (16 bytes): id u64, flags u16 (1 branch, 2 leaf, 4 meta,
//	  0x10 freelist), count u16, overflow u32 (the run is 1+overflow pages)
//	meta (at offset 16 of pages 0 and 1): magic u32 0xED0CDAED, version u32
//	  (2), page size u32, flags u32, root bucket (root pgid u64, sequence
//	  u64), freelist pgid u64, high-water mark pgid u64, txid u64, then the
//	  FNV-64a of the 56 bytes before it
//	branch element (16 bytes): pos u32, ksize u32, child pgid u64; the key
//	  lies pos bytes after the element's own first byte
//	leaf element (16 bytes): flags u32 (1 = bucket), pos u32, ksize u32,
//	  vsize u32; key then value, pos bytes after the element
//	bucket value: root pgid u64, sequence u64; root 0 means inline: a page
//	  (header and leaf elements) follows in the value itself
//
// A bbolt data page carries no checksum, so damage shows only where it
// breaks the structure: a page that names another id, an unknown type,
// elements or keys outside the page, keys out of order or outside the
// separators of the branch above, a child outside the file, a page reached
// twice (a cycle). A changed byte inside a value is not detectable.

const (
	boltHeaderSize   = 16
	boltElemSize     = 16
	boltBranchFlag   = 0x01
	boltLeafFlag     = 0x02
	boltBucketFlag   = 0x01
	boltVersion      = 2
	boltMetaLen      = 64 // fields and checksum, after the page header
	boltBucketHeader = 16
	boltMaxDepth     = 64 // tree levels per bucket (a real tree has < 10)
)

// boltMeta is a decoded bbolt meta page.
type boltMeta struct {
	bo       binary.ByteOrder
	slot     int
	pageSize int
	root     uint64
	seq      uint64
	hwm      uint64
	txid     uint64
}

// boltSalvager walks a possibly damaged bbolt file. As in the library's
// rivet salvager, every page is marked seen before it is walked, so the
// walk reads each page at most once and the buffers on its stack are
// distinct runs of the file.
type boltSalvager struct {
	r     io.ReaderAt
	bo    binary.ByteOrder
	ps    int
	limit uint64 // usable pages: min(HWM, pages in the file)
	seen  []uint64
	v     rivet.SalvageVisitor
	rep   *rivet.SalvageReport
	path  [][]byte
}

// salvageBbolt is rivet.Salvage for a bbolt file.
func salvageBbolt(path string, v rivet.SalvageVisitor) (*rivet.SalvageReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return salvageBboltFrom(f, fi.Size(), v)
}

func salvageBboltFrom(r io.ReaderAt, size int64, v rivet.SalvageVisitor) (*rivet.SalvageReport, error) {
	s := &boltSalvager{r: r, v: v, rep: &rivet.SalvageReport{}}
	m, err := s.chooseMeta(size)
	if err != nil {
		return nil, err
	}
	s.rep.Meta, s.rep.Txid, s.rep.PageSize = m.slot, m.txid, m.pageSize
	s.ps = m.pageSize
	pages := uint64(size) / uint64(m.pageSize)
	s.limit = min(m.hwm, pages)
	if s.limit < m.hwm {
		s.note("the file ends at page %d, before the high-water mark %d: it was cut short", pages, m.hwm)
	}
	s.seen = make([]uint64, (s.limit+63)/64)
	// The root bucket's tree holds the top-level buckets.
	if err := s.tree(m.root, nil, nil, 0, true); err != nil {
		return nil, err
	}
	return s.rep, nil
}

func (s *boltSalvager) note(format string, args ...any) {
	s.rep.Notes = append(s.rep.Notes, fmt.Sprintf(format, args...))
}

func corruptf(id uint64, format string, args ...any) error {
	return &rerrors.CorruptError{Page: id, Reason: fmt.Sprintf(format, args...)}
}

func (s *boltSalvager) lose(l rivet.SalvageLoss) {
	l.Bucket = make([][]byte, len(s.path))
	for i, p := range s.path {
		l.Bucket[i] = bytes.Clone(p)
	}
	l.From, l.To, l.Key = bytes.Clone(l.From), bytes.Clone(l.To), bytes.Clone(l.Key)
	var ce *rerrors.CorruptError
	if errors.As(l.Err, &ce) && l.Page == 0 {
		l.Page = ce.Page
	}
	s.rep.Lost = append(s.rep.Lost, l)
}

// chooseMeta picks the newest valid meta whose root page is a tree page
// naming itself; failing that, a damaged meta's fields if its root is.
// Every page size bbolt allows is tried, so a meta 0 whose page size field
// is damaged does not hide meta 1.
func (s *boltSalvager) chooseMeta(size int64) (*boltMeta, error) {
	head := make([]byte, min(size, 2<<20))
	if _, err := s.r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var valid, loose []*boltMeta
	problems := map[int]string{}
	for ps := 512; ps <= 1<<20; ps *= 2 {
		for slot := range 2 {
			off := slot * ps
			if off+boltHeaderSize+boltMetaLen > len(head) {
				continue
			}
			m, err := decodeBoltMeta(head[off:], slot, ps)
			switch {
			case m == nil:
			case err == nil:
				valid = append(valid, m)
			default:
				loose = append(loose, m)
				if !errors.Is(err, errBoltPageSize) {
					problems[slot] = fmt.Sprintf("meta %d: %v", slot, err)
				}
			}
		}
	}
	best := func(list []*boltMeta, needRoot bool) *boltMeta {
		var best *boltMeta
		for _, m := range list {
			if (best == nil || m.txid > best.txid) && (!needRoot || s.rootOK(m, size) == nil) {
				best = m
			}
		}
		return best
	}
	for slot := range 2 {
		if p, ok := problems[slot]; ok {
			s.note("%s", p)
		} else if !slices.ContainsFunc(valid, func(m *boltMeta) bool { return m.slot == slot }) {
			s.note("meta %d is not a bbolt meta page", slot)
		}
	}
	if m := best(valid, true); m != nil {
		if n := best(valid, false); n != m {
			s.note("meta %d (txid %d) names a root page that fails (%s); salvaged meta %d (txid %d)", n.slot, n.txid, rivet.SalvageLoss{Err: s.rootOK(n, size)}.Reason(), m.slot, m.txid)
		}
		s.bo = m.bo
		return m, nil
	}
	if m := best(loose, true); m != nil {
		s.note("no meta page is valid; salvaging the state meta %d names (txid %d, %d-byte pages), whose root page is a tree page", m.slot, m.txid, m.pageSize)
		s.bo = m.bo
		return m, nil
	}
	return nil, fmt.Errorf("%w: no bbolt meta page names a usable root page: nothing can be salvaged", rerrors.ErrCorrupt)
}

// errBoltPageSize marks a meta read at a page size other than its own.
var errBoltPageSize = errors.New("page size differs")

// boltOrder returns the byte order whose reading of b's first four bytes is
// bbolt's magic, or nil.
func boltOrder(b []byte) binary.ByteOrder {
	switch uint32(bboltMagic) {
	case binary.LittleEndian.Uint32(b):
		return binary.LittleEndian
	case binary.BigEndian.Uint32(b):
		return binary.BigEndian
	}
	return nil
}

// decodeBoltMeta decodes the meta page at the start of b (slot 0 or 1,
// assuming page size ps). It returns the meta and nil when it is valid;
// the meta (its fields unverified) and why not when its magic is right but
// something else fails; nil and an error when it is not a bbolt meta.
func decodeBoltMeta(b []byte, slot, ps int) (*boltMeta, error) {
	mb := b[boltHeaderSize : boltHeaderSize+boltMetaLen]
	bo := boltOrder(mb)
	if bo == nil {
		return nil, errors.New("no bbolt magic")
	}
	m := &boltMeta{
		bo:       bo,
		slot:     slot,
		pageSize: ps,
		root:     bo.Uint64(mb[16:]),
		seq:      bo.Uint64(mb[24:]),
		hwm:      bo.Uint64(mb[40:]),
		txid:     bo.Uint64(mb[48:]),
	}
	h := fnv.New64a()
	h.Write(mb[:56])
	switch {
	case bo.Uint16(b[8:]) != bboltMetaFlag:
		return m, fmt.Errorf("page flags %#x, want meta", bo.Uint16(b[8:]))
	case bo.Uint32(mb[4:]) != boltVersion:
		return m, fmt.Errorf("version %d, want %d", bo.Uint32(mb[4:]), boltVersion)
	case int(bo.Uint32(mb[8:])) != ps:
		return m, errBoltPageSize
	case bo.Uint64(mb[56:]) != h.Sum64():
		return m, errors.New("checksum mismatch")
	case m.root < 2 || m.root >= m.hwm:
		return m, fmt.Errorf("root page %d outside [2, %d)", m.root, m.hwm)
	}
	return m, nil
}

// rootOK checks that m's root page is a branch or leaf page naming itself.
func (s *boltSalvager) rootOK(m *boltMeta, size int64) error {
	limit := min(m.hwm, uint64(size)/uint64(m.pageSize))
	if m.root < 2 || m.root >= limit {
		return corruptf(m.root, "root page outside the file's pages [2, %d)", limit)
	}
	head := make([]byte, boltHeaderSize)
	if _, err := s.r.ReadAt(head, int64(m.root)*int64(m.pageSize)); err != nil {
		return corruptf(m.root, "read: %v", err)
	}
	if self := m.bo.Uint64(head); self != m.root {
		return corruptf(m.root, "page header names page %d", self)
	}
	if f := m.bo.Uint16(head[8:]); f != boltBranchFlag && f != boltLeafFlag {
		return corruptf(m.root, "page flags %#x, want branch or leaf", f)
	}
	return nil
}

// readRun reads and validates the header of the page run at id.
func (s *boltSalvager) readRun(id uint64) ([]byte, error) {
	if id < 2 || id >= s.limit {
		return nil, corruptf(id, "page id outside the file's pages [2, %d)", s.limit)
	}
	first := make([]byte, s.ps)
	if _, err := s.r.ReadAt(first, int64(id)*int64(s.ps)); err != nil {
		return nil, corruptf(id, "read: %v", err)
	}
	if self := s.bo.Uint64(first); self != id {
		return nil, corruptf(id, "page header names page %d", self)
	}
	flags := s.bo.Uint16(first[8:])
	if flags != boltBranchFlag && flags != boltLeafFlag {
		return nil, corruptf(id, "page flags %#x, want branch or leaf", flags)
	}
	pages := uint64(s.bo.Uint32(first[12:])) + 1
	if pages > s.limit-id {
		return nil, corruptf(id, "run of %d pages passes the end of the file", pages)
	}
	if pages == 1 {
		return first, nil
	}
	run := make([]byte, pages*uint64(s.ps))
	if _, err := s.r.ReadAt(run, int64(id)*int64(s.ps)); err != nil {
		return nil, corruptf(id, "read: %v", err)
	}
	return run, nil
}

func (s *boltSalvager) mark(id uint64, n uint64) error {
	for p := id; p < id+n; p++ {
		if s.seen[p/64]&(1<<(p%64)) != 0 {
			return corruptf(id, "page %d reached a second time (a cycle, or a subtree shared by two parents)", p)
		}
	}
	for p := id; p < id+n; p++ {
		s.seen[p/64] |= 1 << (p % 64)
	}
	return nil
}

// boltNode is a validated bbolt branch or leaf page (or inline page).
type boltNode struct {
	id     uint64
	buf    []byte // the run; element offsets are checked against it
	leaf   bool
	keys   [][]byte
	values [][]byte // leaf only
	flags  []uint32 // leaf only
	kids   []uint64 // branch only
}

// parseNode validates every element of the page in buf (id for messages)
// and that its keys ascend inside [lo, hi).
func (s *boltSalvager) parseNode(id uint64, buf []byte, lo, hi []byte, emptyOK bool) (*boltNode, error) {
	flags := s.bo.Uint16(buf[8:])
	count := int(s.bo.Uint16(buf[10:]))
	n := &boltNode{id: id, buf: buf, leaf: flags == boltLeafFlag}
	if flags != boltBranchFlag && flags != boltLeafFlag {
		return nil, corruptf(id, "page flags %#x, want branch or leaf", flags)
	}
	if count == 0 && !(n.leaf && emptyOK) {
		return nil, corruptf(id, "empty %s page", map[bool]string{true: "leaf", false: "branch"}[n.leaf])
	}
	if boltHeaderSize+count*boltElemSize > len(buf) {
		return nil, corruptf(id, "%d elements do not fit the %d-byte page", count, len(buf))
	}
	for i := range count {
		e := boltHeaderSize + i*boltElemSize
		var pos, ksize, vsize uint64
		if n.leaf {
			f := s.bo.Uint32(buf[e:])
			if f&^boltBucketFlag != 0 {
				return nil, corruptf(id, "element %d has unknown flags %#x", i, f)
			}
			n.flags = append(n.flags, f)
			pos, ksize, vsize = uint64(s.bo.Uint32(buf[e+4:])), uint64(s.bo.Uint32(buf[e+8:])), uint64(s.bo.Uint32(buf[e+12:]))
		} else {
			pos, ksize = uint64(s.bo.Uint32(buf[e:])), uint64(s.bo.Uint32(buf[e+4:]))
			n.kids = append(n.kids, s.bo.Uint64(buf[e+8:]))
		}
		start := uint64(e) + pos
		if pos < boltElemSize || start+ksize+vsize > uint64(len(buf)) {
			return nil, corruptf(id, "element %d's key or value lies outside the page", i)
		}
		k := buf[start : start+ksize : start+ksize]
		if len(k) == 0 {
			return nil, corruptf(id, "element %d has an empty key", i)
		}
		if i > 0 && bytes.Compare(n.keys[i-1], k) >= 0 {
			return nil, corruptf(id, "key %d not after key %d", i, i-1)
		}
		if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
			return nil, corruptf(id, "key %d outside the range its parent branch gives it", i)
		}
		n.keys = append(n.keys, k)
		if n.leaf {
			v := buf[start+ksize : start+ksize+vsize : start+ksize+vsize]
			n.values = append(n.values, v)
		}
	}
	return n, nil
}

// tree salvages the subtree rooted at page id, which holds keys [lo, hi)
// of the current bucket. root marks a bucket's root (which may be an empty
// leaf). Only the visitor's errors are returned; damage becomes losses.
func (s *boltSalvager) tree(id uint64, lo, hi []byte, depth int, root bool) error {
	if depth >= boltMaxDepth {
		s.lose(rivet.SalvageLoss{From: lo, To: hi, Page: id, Err: corruptf(id, "tree deeper than %d levels (a cycle?)", boltMaxDepth)})
		return nil
	}
	run, err := s.readRun(id)
	if err == nil {
		err = s.mark(id, uint64(len(run)/s.ps))
	}
	var n *boltNode
	if err == nil {
		n, err = s.parseNode(id, run, lo, hi, root)
	}
	if err != nil {
		s.lose(rivet.SalvageLoss{From: lo, To: hi, Page: id, Err: err})
		return nil
	}
	if !n.leaf {
		for i, kid := range n.kids {
			from, to := lo, hi
			if i > 0 {
				from = n.keys[i]
			}
			if i+1 < len(n.kids) {
				to = n.keys[i+1]
			}
			if err := s.tree(kid, from, to, depth+1, false); err != nil {
				return err
			}
		}
		return nil
	}
	return s.leaf(n)
}

// leaf salvages the elements of a validated leaf (or inline page).
func (s *boltSalvager) leaf(n *boltNode) error {
	for i, k := range n.keys {
		v := n.values[i]
		if n.flags[i]&boltBucketFlag == 0 {
			if len(s.path) == 0 {
				s.lose(rivet.SalvageLoss{Key: k, Page: n.id, Err: corruptf(n.id, "a plain value in the root bucket, where only buckets belong")})
				continue
			}
			s.rep.Keys++
			s.rep.Bytes += int64(len(k) + len(v))
			if err := s.v.Put(s.path, k, v); err != nil {
				return err
			}
			continue
		}
		if err := s.bucket(n.id, k, v); err != nil {
			return err
		}
	}
	return nil
}

// bucket salvages the nested bucket k whose value v was found in page id.
func (s *boltSalvager) bucket(id uint64, k, v []byte) error {
	if len(v) < boltBucketHeader {
		s.lose(rivet.SalvageLoss{Key: k, Page: id, Err: corruptf(id, "bucket value of %d bytes, want at least %d", len(v), boltBucketHeader)})
		return nil
	}
	if len(s.path) >= maxWalkNesting {
		s.lose(rivet.SalvageLoss{Key: k, Page: id, Err: corruptf(id, "buckets nested deeper than %d (a cycle?)", maxWalkNesting)})
		return nil
	}
	root, seq := s.bo.Uint64(v), s.bo.Uint64(v[8:])
	var inline *boltNode
	if root == 0 {
		page := v[boltBucketHeader:]
		var err error
		if len(page) < boltHeaderSize {
			err = corruptf(id, "inline bucket of %d bytes", len(page))
		} else if s.bo.Uint16(page[8:]) != boltLeafFlag {
			err = corruptf(id, "inline bucket page flags %#x, want leaf", s.bo.Uint16(page[8:]))
		} else {
			inline, err = s.parseNode(id, page, nil, nil, true)
		}
		if err == nil {
			for _, f := range inline.flags {
				if f != 0 {
					err = corruptf(id, "inline bucket holds a nested bucket")
				}
			}
		}
		if err != nil {
			s.lose(rivet.SalvageLoss{Key: k, Page: id, Err: err})
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

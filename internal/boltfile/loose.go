package boltfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/rivetkv/rivet/internal/page"
)

// The loose decoders read a bbolt file that may be damaged, for salvage.
// They differ from File and Page, which serve Open of an intact file, in
// three ways: they read either byte order (bbolt writes its integers in
// the writing machine's order, which the meta's magic tells); a meta is
// decoded field by field even when it fails validation, so a salvage can
// still try the root it names; and a node is decoded and validated whole
// (every element, key order, the key range its parent gives it) before
// any of it is used, so a salvage keeps or loses a page as a unit.
//
// Like every decoder here they never panic and never read outside the
// bytes they are given.

// BucketHeaderSize is the size of a bucket value's header (root pgid u64,
// sequence u64); an inline bucket's page follows it.
const BucketHeaderSize = bucketHeaderSize

// LooseMetaSize is how many bytes of a page DecodeLooseMeta reads.
const LooseMetaSize = HeaderSize + metaSize

// ErrOtherPageSize is DecodeLooseMeta's verdict on a meta read at a page
// size other than the one it names: the page may be a whole meta, read at
// the wrong offset.
var ErrOtherPageSize = errors.New("page size differs")

// MagicOrder returns the byte order in which b's first four bytes read as
// bbolt's Magic, or nil.
func MagicOrder(b []byte) binary.ByteOrder {
	if len(b) < 4 {
		return nil
	}
	switch Magic {
	case binary.LittleEndian.Uint32(b):
		return binary.LittleEndian
	case binary.BigEndian.Uint32(b):
		return binary.BigEndian
	}
	return nil
}

// MetaOrder returns the byte order in which b, the start of a page, has
// the header flags and magic of a bbolt meta page, or nil. It checks
// nothing else: it tells a bbolt file from a file of another format.
func MetaOrder(b []byte) binary.ByteOrder {
	if len(b) < HeaderSize+4 {
		return nil
	}
	bo := MagicOrder(b[HeaderSize:])
	if bo == nil || bo.Uint16(b[8:]) != flagMeta {
		return nil
	}
	return bo
}

// HasMetaMagic reports whether any place a bbolt meta page may start in
// head (the file's first bytes) carries bbolt's magic in either byte
// order: meta 0 at offset 0, meta 1 at every page size from 512 bytes to
// 1 MiB. It is the widest test of "this was a bbolt file" that a salvage
// can use: a meta whose flags or checksum are damaged still counts.
func HasMetaMagic(head []byte) bool {
	for ps := 512; ps <= 1<<20; ps *= 2 {
		for slot := range 2 {
			off := slot*ps + HeaderSize
			if off+4 <= len(head) && MagicOrder(head[off:]) != nil {
				return true
			}
		}
	}
	return false
}

// LooseMeta is a bbolt meta page's fields, read in the byte order its
// magic gives, verified or not.
type LooseMeta struct {
	Order binary.ByteOrder
	// Slot is the meta page it came from (0 or 1); PageSize is the page
	// size it was read at, which is the one it names only if it is valid.
	Slot     int
	PageSize int
	// Root is the root bucket's root page; RootSequence its sequence.
	Root         uint64
	RootSequence uint64
	HWM          uint64
	Txid         uint64
}

// DecodeLooseMeta decodes the meta page at the start of b, found in slot
// (0 or 1) when the file is taken to have pageSize-byte pages. It returns
// the meta and nil when it is valid (header flags, version, page size,
// FNV-64a checksum, root inside [2, HWM)); the meta, its fields
// unverified, and why it is not valid when its magic is right but
// something else fails (ErrOtherPageSize when it names another page
// size); nil and an error when b holds no bbolt meta at all.
func DecodeLooseMeta(b []byte, slot, pageSize int) (*LooseMeta, error) {
	if len(b) < LooseMetaSize {
		return nil, fmt.Errorf("%d bytes cannot hold a bbolt meta page", len(b))
	}
	mb := b[HeaderSize:LooseMetaSize]
	bo := MagicOrder(mb)
	if bo == nil {
		return nil, errors.New("no bbolt magic")
	}
	m := &LooseMeta{
		Order:        bo,
		Slot:         slot,
		PageSize:     pageSize,
		Root:         bo.Uint64(mb[16:]),
		RootSequence: bo.Uint64(mb[24:]),
		HWM:          bo.Uint64(mb[40:]),
		Txid:         bo.Uint64(mb[48:]),
	}
	h := fnv.New64a()
	h.Write(mb[:metaSumSize])
	switch {
	case bo.Uint16(b[8:]) != flagMeta:
		return m, fmt.Errorf("page flags %#x, want meta", bo.Uint16(b[8:]))
	case bo.Uint32(mb[4:]) != Version:
		return m, fmt.Errorf("version %d, want %d", bo.Uint32(mb[4:]), Version)
	case int64(bo.Uint32(mb[8:])) != int64(pageSize):
		return m, ErrOtherPageSize
	case bo.Uint64(mb[metaSumSize:]) != h.Sum64():
		return m, errors.New("checksum mismatch")
	case m.Root < 2 || m.Root >= m.HWM:
		return m, fmt.Errorf("root page %d outside [2, %d)", m.Root, m.HWM)
	}
	return m, nil
}

// LooseRunPages checks the page header at the start of first, read at
// page id in byte order bo: it must name id and be a branch or leaf page.
// It returns how many pages the run spans (1 + overflow), which the
// caller checks against the file.
func LooseRunPages(first []byte, id uint64, bo binary.ByteOrder) (uint64, error) {
	if len(first) < HeaderSize {
		return 0, page.Corruptf(id, "page of %d bytes has no header", len(first))
	}
	if self := bo.Uint64(first); self != id {
		return 0, page.Corruptf(id, "page header names page %d", self)
	}
	if f := bo.Uint16(first[8:]); f != flagBranch && f != flagLeaf {
		return 0, page.Corruptf(id, "page flags %#x, want branch or leaf", f)
	}
	return uint64(bo.Uint32(first[12:])) + 1, nil
}

// LooseNode is a bbolt branch or leaf page (or an inline bucket's page)
// decoded whole: every element lies inside the page and every key is
// non-empty, in ascending order and inside the range the parent gives.
// Its slices point into the page's bytes.
type LooseNode struct {
	ID   uint64
	Leaf bool
	Keys [][]byte
	// Values and Buckets (whether element i's value is a bucket) are set
	// for a leaf, Children for a branch.
	Values   [][]byte
	Buckets  []bool
	Children []uint64
}

// DecodeLooseNode decodes the page in buf (a whole run; id names it in
// errors), in byte order bo, checking that its keys ascend inside
// [lo, hi) (nil: unbounded). emptyOK allows a leaf without elements (a
// bucket's root); a branch is never empty.
func DecodeLooseNode(id uint64, buf []byte, bo binary.ByteOrder, lo, hi []byte, emptyOK bool) (*LooseNode, error) {
	if len(buf) < HeaderSize {
		return nil, page.Corruptf(id, "page of %d bytes has no header", len(buf))
	}
	flags := bo.Uint16(buf[8:])
	count := int(bo.Uint16(buf[10:]))
	n := &LooseNode{ID: id, Leaf: flags == flagLeaf}
	if flags != flagBranch && flags != flagLeaf {
		return nil, page.Corruptf(id, "page flags %#x, want branch or leaf", flags)
	}
	if count == 0 && !(n.Leaf && emptyOK) {
		kind := "branch"
		if n.Leaf {
			kind = "leaf"
		}
		return nil, page.Corruptf(id, "empty %s page", kind)
	}
	if HeaderSize+count*elemSize > len(buf) {
		return nil, page.Corruptf(id, "%d elements do not fit the %d-byte page", count, len(buf))
	}
	n.Keys = make([][]byte, 0, count)
	for i := range count {
		e := HeaderSize + i*elemSize
		var pos, ksize, vsize uint64
		if n.Leaf {
			f := bo.Uint32(buf[e:])
			if f&^leafFlagBucket != 0 {
				return nil, page.Corruptf(id, "element %d has unknown flags %#x", i, f)
			}
			n.Buckets = append(n.Buckets, f&leafFlagBucket != 0)
			pos, ksize, vsize = uint64(bo.Uint32(buf[e+4:])), uint64(bo.Uint32(buf[e+8:])), uint64(bo.Uint32(buf[e+12:]))
		} else {
			pos, ksize = uint64(bo.Uint32(buf[e:])), uint64(bo.Uint32(buf[e+4:]))
			n.Children = append(n.Children, bo.Uint64(buf[e+8:]))
		}
		start := uint64(e) + pos
		if pos < elemSize || start+ksize+vsize > uint64(len(buf)) {
			return nil, page.Corruptf(id, "element %d's key or value lies outside the page", i)
		}
		k := buf[start : start+ksize : start+ksize]
		if len(k) == 0 {
			return nil, page.Corruptf(id, "element %d has an empty key", i)
		}
		if i > 0 && bytes.Compare(n.Keys[i-1], k) >= 0 {
			return nil, page.Corruptf(id, "key %d not after key %d", i, i-1)
		}
		if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
			return nil, page.Corruptf(id, "key %d outside the range its parent branch gives it", i)
		}
		n.Keys = append(n.Keys, k)
		if n.Leaf {
			end := start + ksize + vsize
			n.Values = append(n.Values, buf[start+ksize:end:end])
		}
	}
	return n, nil
}

// DecodeLooseBucketHeader reads the root page and sequence of the bucket
// value v, found in page id, in byte order bo. Root 0 means the bucket is
// inline: DecodeLooseInline reads its page.
func DecodeLooseBucketHeader(id uint64, v []byte, bo binary.ByteOrder) (root, sequence uint64, err error) {
	if len(v) < bucketHeaderSize {
		return 0, 0, page.Corruptf(id, "bucket value of %d bytes, want at least %d", len(v), bucketHeaderSize)
	}
	return bo.Uint64(v), bo.Uint64(v[8:]), nil
}

// DecodeLooseInline decodes the page of the inline bucket whose value v
// (header included) was found in page id: a leaf, possibly empty, of
// plain values (bbolt never inlines a bucket that holds buckets).
func DecodeLooseInline(id uint64, v []byte, bo binary.ByteOrder) (*LooseNode, error) {
	if len(v) < bucketHeaderSize {
		return nil, page.Corruptf(id, "bucket value of %d bytes, want at least %d", len(v), bucketHeaderSize)
	}
	in := v[bucketHeaderSize:]
	if len(in) < HeaderSize {
		return nil, page.Corruptf(id, "inline bucket of %d bytes", len(in))
	}
	if f := bo.Uint16(in[8:]); f != flagLeaf {
		return nil, page.Corruptf(id, "inline bucket page flags %#x, want leaf", f)
	}
	n, err := DecodeLooseNode(id, in, bo, nil, nil, true)
	if err != nil {
		return nil, err
	}
	for _, b := range n.Buckets {
		if b {
			return nil, page.Corruptf(id, "inline bucket holds a nested bucket")
		}
	}
	return n, nil
}

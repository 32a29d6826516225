package page

import (
	"bytes"
	"encoding/binary"
)

// Element sizes (docs/design.md §2.3, §2.4).
const (
	BranchElemSize = 28
	LeafElemSize   = 16
)

// Leaf element flags.
const (
	// FlagBucket marks a leaf value that is a 32-byte bucket record.
	FlagBucket uint32 = 1
	// FlagBlob marks a leaf value that is a 32-byte blob reference.
	FlagBlob uint32 = 2
)

// Node is a validated view of a branch or leaf run. It aliases the bytes it
// was built from (usually the memory map), so it is only valid as long as
// they are. It is kept small (32 bytes): cursors hold one per level, and a
// cursor is allocated per range scan. The page id and txid are read back
// from the header when needed (errors and the child-txid check), not copied.
//
// Invariant: the header was validated; len(buf) is the run's size (at least
// one page, so at least HeaderSize); the count elements of the element
// array lie inside buf. Each element's key and value ranges are checked when
// the element is read, so a search touches only the elements it probes.
type Node struct {
	buf   []byte
	count int32
	leaf  bool
}

// ReadNode validates and returns the node run starting at page id inside
// data, the file's bytes from offset 0 (a memory map). wantTxid is the
// parent's record of the child's txid (0 skips the check). hwm bounds every
// page id. This is the read path of every Get: checks are ordered so the
// common case is a few compares, and errors are built out of line.
func ReadNode(data []byte, pageSize int, id ID, wantTxid uint64, hwm uint64) (Node, error) {
	return ReadNodeVia(nil, data, pageSize, Ref{ID: id, Txid: wantTxid}, hwm)
}

// NodeSource supplies nodes that do not come from a rivet file: a bbolt
// file opened read-only serves its pages translated into rivet nodes
// (internal/boltfile).
type NodeSource interface {
	// ReadNode returns the validated node ref points to, or the corruption
	// that stops it.
	ReadNode(ref Ref) (Node, error)
}

// ReadNodeVia is ReadNode, except that a non-nil src supplies the node
// instead of data. It is the tree's one way to read a node: the check
// costs a rivet file's read path one compare, and keeps its caller
// (btree.Env.readNode) small enough to inline into the cursor.
func ReadNodeVia(src NodeSource, data []byte, pageSize int, ref Ref, hwm uint64) (Node, error) {
	if src != nil {
		return src.ReadNode(ref)
	}
	id, wantTxid := ref.ID, ref.Txid
	if id < minHWM || id >= hwm {
		return Node{}, nodeErr(id, errIDRange, hwm, 0)
	}
	off := id * uint64(pageSize)
	if off+uint64(pageSize) > uint64(len(data)) {
		return Node{}, nodeErr(id, errBeyondFile, 0, 0)
	}
	return nodeAt(data[off:], pageSize, id, wantTxid, hwm)
}

// NodeFromBuffer validates a node run held alone in buf (as read with ReadAt
// during recovery or Check).
func NodeFromBuffer(buf []byte, pageSize int, id ID, wantTxid uint64, hwm uint64) (Node, error) {
	if len(buf) < HeaderSize || len(buf) < pageSize || id < minHWM || id >= hwm {
		return Node{}, nodeErr(id, errBeyondFile, 0, 0)
	}
	return nodeAt(buf, pageSize, id, wantTxid, hwm)
}

// nodeAt validates the node whose run starts at b[0]. Callers guarantee
// len(b) >= pageSize >= HeaderSize.
func nodeAt(b []byte, pageSize int, id ID, wantTxid uint64, hwm uint64) (Node, error) {
	h := b[:HeaderSize:HeaderSize]
	le := binary.LittleEndian
	typ := Type(le.Uint16(h[offType:]))
	count := uint64(le.Uint32(h[offCount:]))
	txid := le.Uint64(h[offTxid:])
	if typ != TypeBranch && typ != TypeLeaf {
		return Node{}, nodeErr(id, errType, uint64(typ), 0)
	}
	if self := le.Uint64(h[offPgid:]); self != id {
		return Node{}, nodeErr(id, errSelf, self, 0)
	}
	if wantTxid != 0 && txid != wantTxid {
		return Node{}, nodeErr(id, errTxid, txid, wantTxid)
	}
	pages := uint64(le.Uint32(h[offOverflow:])) + 1
	size := pages * uint64(pageSize)
	if pages > hwm-id || size > uint64(len(b)) {
		return Node{}, nodeErr(id, errRun, pages, hwm)
	}
	es := uint64(LeafElemSize)
	if typ == TypeBranch {
		es = BranchElemSize
	}
	if count == 0 || HeaderSize+count*es > size {
		return Node{}, nodeErr(id, errCount, count, size)
	}
	return Node{buf: b[:size:size], count: int32(count), leaf: typ == TypeLeaf}, nil
}

// TranslatedNode validates a node that internal/boltfile encoded into buf
// (EncodeBranchFunc or EncodeLeafFunc, page size len(buf)) from a page of
// bbolt's format. Such a node has no place in a rivet file, so nothing ties
// it to a page size or a high-water mark; ReadNode's other checks apply:
// the type, the header naming page id, the element array inside buf. A
// leaf may be empty (bbolt's empty root leaf); a branch may not. pages,
// the length of the source page's run, is recorded in the header's
// overflow field, so statistics count the source's pages.
func TranslatedNode(buf []byte, id ID, pages uint64) (Node, error) {
	if len(buf) < HeaderSize {
		return Node{}, Corruptf(id, "translated node of %d bytes", len(buf))
	}
	le := binary.LittleEndian
	typ := Type(le.Uint16(buf[offType:]))
	count := uint64(le.Uint32(buf[offCount:]))
	if typ != TypeBranch && typ != TypeLeaf {
		return Node{}, nodeErr(id, errType, uint64(typ), 0)
	}
	if self := le.Uint64(buf[offPgid:]); self != id {
		return Node{}, nodeErr(id, errSelf, self, 0)
	}
	es := uint64(LeafElemSize)
	if typ == TypeBranch {
		es = BranchElemSize
	}
	if (count == 0 && typ == TypeBranch) || HeaderSize+count*es > uint64(len(buf)) {
		return Node{}, nodeErr(id, errCount, count, uint64(len(buf)))
	}
	if pages == 0 || pages-1 > 0xFFFFFFFF {
		pages = 1
	}
	le.PutUint32(buf[offOverflow:], uint32(pages-1))
	return Node{buf: buf[:len(buf):len(buf)], count: int32(count), leaf: typ == TypeLeaf}, nil
}

const (
	errIDRange = iota
	errBeyondFile
	errType
	errSelf
	errTxid
	errRun
	errCount
)

// nodeErr builds ReadNode's errors off the hot path.
//
//go:noinline
func nodeErr(id ID, kind int, a, b uint64) error {
	switch kind {
	case errIDRange:
		return Corruptf(id, "node page id outside [%d, %d)", minHWM, a)
	case errBeyondFile:
		return Corruptf(id, "node page beyond the end of the file")
	case errType:
		return Corruptf(id, "page type is %v, want branch or leaf", Type(a))
	case errSelf:
		return Corruptf(id, "page header names page %d (misdirected or copied page)", a)
	case errTxid:
		return Corruptf(id, "page written by txn %d, parent expects txn %d (stale or torn page)", a, b)
	case errRun:
		return Corruptf(id, "node run of %d pages passes the high-water mark %d or the end of the file", a, b)
	default:
		return Corruptf(id, "%d elements do not fit the %d-byte node", a, b)
	}
}

// ID returns the node's first page id (0 for the zero Node). ReadNode
// checked that the header names the page it was read from.
func (n Node) ID() ID {
	if len(n.buf) < HeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint64(n.buf[offPgid:])
}

// IsLeaf reports whether n is a leaf.
func (n Node) IsLeaf() bool { return n.leaf }

// Count returns the number of elements.
func (n Node) Count() int { return int(n.count) }

// Header decodes the node's header.
func (n Node) Header() Header {
	h, _ := ReadHeader(n.ID(), n.buf)
	return h
}

// Txid returns the txid that wrote the node (0 for the zero Node).
func (n Node) Txid() uint64 {
	if len(n.buf) < HeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint64(n.buf[offTxid:])
}

// Bytes returns the node's whole run.
func (n Node) Bytes() []byte { return n.buf }

// BranchKey returns the key of branch element i (0 <= i < Count()).
func (n Node) BranchKey(i int) ([]byte, error) {
	e := n.buf[HeaderSize+i*BranchElemSize:]
	k, ok := n.keyAt(binary.LittleEndian.Uint32(e[20:]), binary.LittleEndian.Uint32(e[24:]))
	if !ok {
		return nil, n.badElem(i)
	}
	return k, nil
}

// BranchChild returns the child reference of branch element i.
func (n Node) BranchChild(i int) Ref {
	e := n.buf[HeaderSize+i*BranchElemSize:]
	e = e[:BranchElemSize:BranchElemSize]
	return Ref{
		ID:       binary.LittleEndian.Uint64(e[0:]),
		Txid:     binary.LittleEndian.Uint64(e[8:]),
		Checksum: binary.LittleEndian.Uint32(e[16:]),
	}
}

// BranchSearch returns the index of the last element whose key is <= key
// (0 if every key is greater): the child a search for key descends into.
// An element whose key equals key ends the search early: keys in a valid
// branch are unique, and on a corrupt one any answer is a child that the
// descent validates like every other.
func (n Node) BranchSearch(key []byte) (int, error) {
	buf := n.buf
	lo, hi := 0, int(n.count)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		e := buf[HeaderSize+mid*BranchElemSize:]
		e = e[:BranchElemSize:BranchElemSize]
		off := binary.LittleEndian.Uint32(e[20:])
		end := uint64(off) + uint64(binary.LittleEndian.Uint32(e[24:]))
		if off < HeaderSize || end > uint64(len(buf)) {
			return 0, n.badElem(mid)
		}
		switch c := bytes.Compare(buf[off:end:end], key); {
		case c < 0:
			lo = mid + 1
		case c > 0:
			hi = mid
		default:
			return mid, nil
		}
	}
	if lo > 0 {
		lo--
	}
	return lo, nil
}

// LeafSearch returns the index of the first element whose key is >= key
// (Count() if none), and whether that element's key equals key.
func (n Node) LeafSearch(key []byte) (int, bool, error) {
	buf := n.buf
	lo, hi := 0, int(n.count)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		e := buf[HeaderSize+mid*LeafElemSize:]
		e = e[:LeafElemSize:LeafElemSize]
		off := binary.LittleEndian.Uint32(e[4:])
		end := uint64(off) + uint64(binary.LittleEndian.Uint32(e[8:]))
		if off < HeaderSize || end > uint64(len(buf)) {
			return 0, false, n.badElem(mid)
		}
		switch c := bytes.Compare(buf[off:end:end], key); {
		case c < 0:
			lo = mid + 1
		case c > 0:
			hi = mid
		default:
			return mid, true, nil
		}
	}
	return lo, false, nil
}

// keyAt returns buf[off:off+ln] if that lies inside the node after the header.
func (n Node) keyAt(off, ln uint32) ([]byte, bool) {
	end := uint64(off) + uint64(ln)
	if off < HeaderSize || end > uint64(len(n.buf)) {
		return nil, false
	}
	return n.buf[off:end:end], true
}

//go:noinline
func (n Node) badElem(i int) error {
	return Corruptf(n.ID(), "element %d key range outside the %d-byte node", i, len(n.buf))
}

// LeafKey returns the key of leaf element i (0 <= i < Count()).
func (n Node) LeafKey(i int) ([]byte, error) {
	e := n.buf[HeaderSize+i*LeafElemSize:]
	k, ok := n.keyAt(binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint32(e[8:]))
	if !ok {
		return nil, n.badElem(i)
	}
	return k, nil
}

// LeafElem returns the flags, key and value of leaf element i
// (0 <= i < Count()). The key and value lie inside the node after the
// header, or the error says why not.
func (n Node) LeafElem(i int) (flags uint32, key, value []byte, err error) {
	buf := n.buf
	e := buf[HeaderSize+i*LeafElemSize:]
	e = e[:LeafElemSize:LeafElemSize]
	le := binary.LittleEndian
	flags = le.Uint32(e[0:])
	ko := le.Uint32(e[4:])
	kend := uint64(ko) + uint64(le.Uint32(e[8:]))
	vend := kend + uint64(le.Uint32(e[12:]))
	if flags > FlagBlob || ko < HeaderSize || vend > uint64(len(buf)) {
		return 0, nil, nil, n.badLeafElem(i, flags)
	}
	return flags, buf[ko:kend:kend], buf[kend:vend:vend], nil
}

//go:noinline
func (n Node) badLeafElem(i int, flags uint32) error {
	if flags > FlagBlob {
		return Corruptf(n.ID(), "leaf element %d has unknown flags %d", i, flags)
	}
	return Corruptf(n.ID(), "leaf element %d key/value range outside the node", i)
}

// BranchElem is a branch element to encode.
type BranchElem struct {
	Key   []byte
	Child Ref
}

// LeafElem is a leaf element to encode.
type LeafElem struct {
	Flags uint32
	Key   []byte
	Value []byte
}

// BranchSize returns the encoded size in bytes of a branch with elems.
func BranchSize(elems []BranchElem) int {
	n := HeaderSize + len(elems)*BranchElemSize
	for _, e := range elems {
		n += len(e.Key)
	}
	return n
}

// LeafSize returns the encoded size in bytes of a leaf with elems.
func LeafSize(elems []LeafElem) int {
	n := HeaderSize + len(elems)*LeafElemSize
	for _, e := range elems {
		n += len(e.Key) + len(e.Value)
	}
	return n
}

// RunPages returns how many pages a node of size bytes occupies.
func RunPages(size, pageSize int) uint64 { return uint64((size + pageSize - 1) / pageSize) }

// EncodeBranch writes a branch node into buf, whose length must be the run's
// page count times the page size. Unused bytes are zeroed so the checksum
// is deterministic.
func EncodeBranch(buf []byte, pageSize int, id ID, txid uint64, elems []BranchElem) {
	EncodeBranchFunc(buf, pageSize, id, txid, len(elems), func(i int) ([]byte, Ref) {
		return elems[i].Key, elems[i].Child
	})
}

// EncodeBranchFunc is EncodeBranch with the elements supplied by a function,
// so callers need not build a slice of elements first.
func EncodeBranchFunc(buf []byte, pageSize int, id ID, txid uint64, n int, elem func(i int) (key []byte, child Ref)) {
	PutHeader(buf, Header{Type: TypeBranch, Count: uint32(n), Txid: txid, ID: id, Overflow: uint32(len(buf)/pageSize - 1)})
	off := HeaderSize + n*BranchElemSize
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		key, child := elem(i)
		p := buf[HeaderSize+i*BranchElemSize:]
		le.PutUint64(p[0:], child.ID)
		le.PutUint64(p[8:], child.Txid)
		le.PutUint32(p[16:], child.Checksum)
		le.PutUint32(p[20:], uint32(off))
		le.PutUint32(p[24:], uint32(len(key)))
		off += copy(buf[off:], key)
	}
	clear(buf[off:])
}

// LeafFromRelative returns a new leaf node of n plain values built from
// block: an array of n elements laid out as rivet's (flags u32, key
// position u32, key length u32, value length u32) except that each key
// position counts from the element's own first byte, followed by the key
// and value bytes — a bbolt leaf page after its header. The block is
// copied after the node header whole; each element's flags are cleared
// and its key position made to count from the node's start. The caller
// has checked that every key and value lies inside the block. One copy,
// into memory not zeroed first, instead of one per element: the read path
// translates every bbolt leaf it meets this way.
func LeafFromRelative(block []byte, id ID, txid uint64, n int) []byte {
	var h [HeaderSize]byte
	buf := append(h[:], block...)
	PutHeader(buf, Header{Type: TypeLeaf, Count: uint32(n), Txid: txid, ID: id})
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		e := buf[HeaderSize+i*LeafElemSize:]
		e = e[:LeafElemSize:LeafElemSize]
		le.PutUint32(e[0:], 0)
		le.PutUint32(e[4:], uint32(HeaderSize+i*LeafElemSize)+le.Uint32(e[4:]))
	}
	return buf
}

// EncodeLeaf writes a leaf node into buf (see EncodeBranch).
func EncodeLeaf(buf []byte, pageSize int, id ID, txid uint64, elems []LeafElem) {
	EncodeLeafFunc(buf, pageSize, id, txid, len(elems), func(i int) (uint32, []byte, []byte) {
		return elems[i].Flags, elems[i].Key, elems[i].Value
	})
}

// EncodeLeafFunc is EncodeLeaf with the elements supplied by a function.
func EncodeLeafFunc(buf []byte, pageSize int, id ID, txid uint64, n int, elem func(i int) (flags uint32, key, value []byte)) {
	PutHeader(buf, Header{Type: TypeLeaf, Count: uint32(n), Txid: txid, ID: id, Overflow: uint32(len(buf)/pageSize - 1)})
	off := HeaderSize + n*LeafElemSize
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		flags, key, value := elem(i)
		p := buf[HeaderSize+i*LeafElemSize:]
		le.PutUint32(p[0:], flags)
		le.PutUint32(p[4:], uint32(off))
		le.PutUint32(p[8:], uint32(len(key)))
		le.PutUint32(p[12:], uint32(len(value)))
		off += copy(buf[off:], key)
		off += copy(buf[off:], value)
	}
	clear(buf[off:])
}

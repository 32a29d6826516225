package page

import "encoding/binary"

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
// they are.
//
// Invariant: Header validated; the element array lies inside buf. Each
// element's key and value ranges are checked when the element is read.
type Node struct {
	buf   []byte
	id    ID
	hdr   Header
	count int
}

// ReadNode validates and returns the node run starting at page id inside
// data, the file's bytes from offset 0 (a memory map or a buffer that holds
// the run at id*pageSize). want is the parent's reference: its txid must
// match the header (0 skips the check). hwm bounds every page id.
func ReadNode(data []byte, pageSize int, id ID, wantTxid uint64, hwm uint64) (Node, error) {
	if id < minHWM || id >= hwm {
		return Node{}, Corruptf(id, "node page id outside [%d, %d)", minHWM, hwm)
	}
	off := id * uint64(pageSize)
	if off+uint64(pageSize) > uint64(len(data)) {
		return Node{}, Corruptf(id, "node page beyond the end of the file")
	}
	h, err := ReadHeader(id, data[off:])
	if err != nil {
		return Node{}, err
	}
	if h.Type != TypeBranch && h.Type != TypeLeaf {
		return Node{}, Corruptf(id, "page type is %v, want branch or leaf", h.Type)
	}
	if err := h.Expect(id, h.Type, wantTxid); err != nil {
		return Node{}, err
	}
	return nodeFromRun(data, pageSize, id, h, hwm)
}

// NodeFromBuffer validates a node run held alone in buf (as read with ReadAt
// during recovery or Check).
func NodeFromBuffer(buf []byte, pageSize int, id ID, wantTxid uint64, hwm uint64) (Node, error) {
	h, err := ReadHeader(id, buf)
	if err != nil {
		return Node{}, err
	}
	if h.Type != TypeBranch && h.Type != TypeLeaf {
		return Node{}, Corruptf(id, "page type is %v, want branch or leaf", h.Type)
	}
	if err := h.Expect(id, h.Type, wantTxid); err != nil {
		return Node{}, err
	}
	if id+h.Pages() > hwm || h.Pages()*uint64(pageSize) > uint64(len(buf)) {
		return Node{}, Corruptf(id, "node run of %d pages overruns the file", h.Pages())
	}
	return checkElems(buf[:h.Pages()*uint64(pageSize)], id, h)
}

func nodeFromRun(data []byte, pageSize int, id ID, h Header, hwm uint64) (Node, error) {
	pages := h.Pages()
	if id+pages > hwm || id+pages < id {
		return Node{}, Corruptf(id, "node run of %d pages passes the high-water mark %d", pages, hwm)
	}
	off := id * uint64(pageSize)
	end := off + pages*uint64(pageSize)
	if end > uint64(len(data)) {
		return Node{}, Corruptf(id, "node run of %d pages beyond the end of the file", pages)
	}
	return checkElems(data[off:end], id, h)
}

func checkElems(buf []byte, id ID, h Header) (Node, error) {
	es := uint64(LeafElemSize)
	if h.Type == TypeBranch {
		es = BranchElemSize
	}
	if h.Count == 0 {
		return Node{}, Corruptf(id, "%v node with no elements", h.Type)
	}
	if HeaderSize+uint64(h.Count)*es > uint64(len(buf)) {
		return Node{}, Corruptf(id, "%d elements overrun the %d-byte node", h.Count, len(buf))
	}
	return Node{buf: buf, id: id, hdr: h, count: int(h.Count)}, nil
}

// ID returns the node's first page id.
func (n Node) ID() ID { return n.id }

// IsLeaf reports whether n is a leaf.
func (n Node) IsLeaf() bool { return n.hdr.Type == TypeLeaf }

// Count returns the number of elements.
func (n Node) Count() int { return n.count }

// Header returns the node's header.
func (n Node) Header() Header { return n.hdr }

// Bytes returns the node's whole run.
func (n Node) Bytes() []byte { return n.buf }

func (n Node) span(i int, off, ln uint32) ([]byte, error) {
	end := uint64(off) + uint64(ln)
	if uint64(off) < HeaderSize || end > uint64(len(n.buf)) {
		return nil, Corruptf(n.id, "element %d range [%d, %d) outside the %d-byte node", i, off, end, len(n.buf))
	}
	return n.buf[off:end:end], nil
}

// BranchKey returns the key of branch element i.
func (n Node) BranchKey(i int) ([]byte, error) {
	e := n.buf[HeaderSize+i*BranchElemSize:]
	return n.span(i, binary.LittleEndian.Uint32(e[20:]), binary.LittleEndian.Uint32(e[24:]))
}

// BranchChild returns the child reference of branch element i.
func (n Node) BranchChild(i int) Ref {
	e := n.buf[HeaderSize+i*BranchElemSize:]
	return Ref{
		ID:       binary.LittleEndian.Uint64(e[0:]),
		Txid:     binary.LittleEndian.Uint64(e[8:]),
		Checksum: binary.LittleEndian.Uint32(e[16:]),
	}
}

// LeafKey returns the key of leaf element i.
func (n Node) LeafKey(i int) ([]byte, error) {
	e := n.buf[HeaderSize+i*LeafElemSize:]
	return n.span(i, binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint32(e[8:]))
}

// LeafElem returns the flags, key and value of leaf element i.
func (n Node) LeafElem(i int) (flags uint32, key, value []byte, err error) {
	e := n.buf[HeaderSize+i*LeafElemSize:]
	flags = binary.LittleEndian.Uint32(e[0:])
	ko := binary.LittleEndian.Uint32(e[4:])
	kl := binary.LittleEndian.Uint32(e[8:])
	vl := binary.LittleEndian.Uint32(e[12:])
	if flags > FlagBlob {
		return 0, nil, nil, Corruptf(n.id, "leaf element %d has unknown flags %d", i, flags)
	}
	kv, err := n.span(i, ko, kl+vl)
	if err != nil || uint64(kl)+uint64(vl) > uint64(len(n.buf)) {
		return 0, nil, nil, Corruptf(n.id, "leaf element %d key/value range outside the node", i)
	}
	return flags, kv[:kl:kl], kv[kl:], nil
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
	clear(buf)
	PutHeader(buf, Header{Type: TypeBranch, Count: uint32(len(elems)), Txid: txid, ID: id, Overflow: uint32(len(buf)/pageSize - 1)})
	off := HeaderSize + len(elems)*BranchElemSize
	le := binary.LittleEndian
	for i, e := range elems {
		p := buf[HeaderSize+i*BranchElemSize:]
		le.PutUint64(p[0:], e.Child.ID)
		le.PutUint64(p[8:], e.Child.Txid)
		le.PutUint32(p[16:], e.Child.Checksum)
		le.PutUint32(p[20:], uint32(off))
		le.PutUint32(p[24:], uint32(len(e.Key)))
		off += copy(buf[off:], e.Key)
	}
}

// EncodeLeaf writes a leaf node into buf (see EncodeBranch).
func EncodeLeaf(buf []byte, pageSize int, id ID, txid uint64, elems []LeafElem) {
	clear(buf)
	PutHeader(buf, Header{Type: TypeLeaf, Count: uint32(len(elems)), Txid: txid, ID: id, Overflow: uint32(len(buf)/pageSize - 1)})
	off := HeaderSize + len(elems)*LeafElemSize
	le := binary.LittleEndian
	for i, e := range elems {
		p := buf[HeaderSize+i*LeafElemSize:]
		le.PutUint32(p[0:], e.Flags)
		le.PutUint32(p[4:], uint32(off))
		le.PutUint32(p[8:], uint32(len(e.Key)))
		le.PutUint32(p[12:], uint32(len(e.Value)))
		off += copy(buf[off:], e.Key)
		off += copy(buf[off:], e.Value)
	}
}

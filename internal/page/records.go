package page

import "encoding/binary"

// RecordSize is the size of a bucket record and of a blob reference.
const RecordSize = 32

// BucketRecord is the value of a FlagBucket leaf element (docs/design.md §2.4).
type BucketRecord struct {
	Root     Ref // Root.ID == 0: the bucket is empty, or inline
	Sequence uint64
	// Inline, when not nil, is the whole record value of an inline bucket
	// (see InlineLeaf): the bucket's content is stored in the record, in
	// the parent's leaf, and takes no page of its own. Root is then zero;
	// Encode writes Sequence over the sequence field of Inline.
	Inline []byte
}

// BucketFlagInline marks an inline bucket record (the flags field, bytes
// 20-24 of a record).
const BucketFlagInline uint32 = 1

// Encode returns the record's bytes: 32, or the inline record.
func (b BucketRecord) Encode() []byte {
	le := binary.LittleEndian
	if b.Inline != nil {
		buf := append([]byte(nil), b.Inline...)
		le.PutUint64(buf[24:], b.Sequence)
		return buf
	}
	buf := make([]byte, RecordSize)
	le.PutUint64(buf[0:], b.Root.ID)
	le.PutUint64(buf[8:], b.Root.Txid)
	le.PutUint32(buf[16:], b.Root.Checksum)
	le.PutUint64(buf[24:], b.Sequence)
	return buf
}

// DecodeBucketRecord decodes a bucket record read from leaf page id. An
// inline record is validated (InlineLeaf); Inline aliases v.
func DecodeBucketRecord(id ID, v []byte) (BucketRecord, error) {
	if len(v) < RecordSize {
		return BucketRecord{}, Corruptf(id, "bucket record is %d bytes, want at least %d", len(v), RecordSize)
	}
	le := binary.LittleEndian
	rec := BucketRecord{Sequence: le.Uint64(v[24:])}
	switch flags := le.Uint32(v[20:]); flags {
	case 0:
		if len(v) != RecordSize {
			return BucketRecord{}, Corruptf(id, "bucket record is %d bytes, want %d", len(v), RecordSize)
		}
		rec.Root = Ref{ID: le.Uint64(v[0:]), Txid: le.Uint64(v[8:]), Checksum: le.Uint32(v[16:])}
	case BucketFlagInline:
		if _, err := InlineLeaf(id, v); err != nil {
			return BucketRecord{}, err
		}
		rec.Inline = v[:len(v):len(v)]
	default:
		return BucketRecord{}, Corruptf(id, "bucket record has unknown flags %d", flags)
	}
	return rec, nil
}

// InlineLeaf validates the inline bucket record v, found in a leaf of page
// id, and returns its content as a leaf Node. The record is laid out as a
// leaf node whose 32-byte header is the bucket record itself: element count
// u32 (bytes 0-4), zeros (4-20), flags = BucketFlagInline (20-24), sequence
// (24-32); then the element array and the key and value bytes, offsets
// counted from the record's first byte, as in a leaf page. At least one
// element, all plain values: an inline bucket holds no nested bucket and
// no blob, so it owns no page. An inline bucket thus costs 32 bytes plus
// its elements, as bbolt's (a 16-byte bucket header and a 16-byte page
// header).
func InlineLeaf(id ID, v []byte) (Node, error) {
	le := binary.LittleEndian
	if len(v) < RecordSize || le.Uint32(v[20:]) != BucketFlagInline {
		return Node{}, Corruptf(id, "not an inline bucket record (%d bytes)", len(v))
	}
	for _, b := range v[4:20] {
		if b != 0 {
			return Node{}, Corruptf(id, "inline bucket record has non-zero bytes in its reserved field")
		}
	}
	count := uint64(le.Uint32(v[0:]))
	if count == 0 || HeaderSize+count*LeafElemSize > uint64(len(v)) {
		return Node{}, Corruptf(id, "inline bucket of %d elements does not fit its %d bytes", count, len(v))
	}
	n := Node{buf: v, count: int32(count), leaf: true}
	for i := 0; i < int(count); i++ {
		flags, _, _, err := n.LeafElem(i)
		if err != nil {
			return Node{}, Corruptf(id, "inline bucket element %d lies outside its %d bytes", i, len(v))
		}
		if flags != 0 {
			return Node{}, Corruptf(id, "inline bucket element %d has flags %d; an inline bucket holds plain values only", i, flags)
		}
	}
	return n, nil
}

// ValidInlineLeaf returns the content of an inline bucket record that
// InlineLeaf (or DecodeBucketRecord, which calls it) has already accepted,
// without checking its elements again: opening an inline bucket is on the
// path of every short read transaction (raft's FirstIndex reads one), and
// the check is linear in its elements.
//
// Invariant: v passed InlineLeaf and has not changed since.
func ValidInlineLeaf(v []byte) Node {
	return Node{buf: v, count: int32(binary.LittleEndian.Uint32(v[0:])), leaf: true}
}

// EncodeInlineRecord returns the inline bucket record (see InlineLeaf) of n
// elements, with sequence 0 (BucketRecord.Encode sets it).
func EncodeInlineRecord(n int, elem func(i int) (flags uint32, key, value []byte)) []byte {
	size := HeaderSize + n*LeafElemSize
	for i := 0; i < n; i++ {
		_, k, v := elem(i)
		size += len(k) + len(v)
	}
	buf := make([]byte, size)
	EncodeLeafFunc(buf, size, 0, 0, n, elem)
	// The element array and data are a leaf's; the header is the record's.
	clear(buf[:HeaderSize])
	le := binary.LittleEndian
	le.PutUint32(buf[0:], uint32(n))
	le.PutUint32(buf[20:], BucketFlagInline)
	return buf
}

// ExtentRef points to a blob extent: the run's reference and its length in pages.
type ExtentRef struct {
	Ref
	Pages uint32
}

// BlobRef is the value of a FlagBlob leaf element: the value's length and
// its first extent.
type BlobRef struct {
	Length uint64
	First  ExtentRef
}

// Encode returns the reference's 32 bytes.
func (b BlobRef) Encode() []byte {
	buf := make([]byte, RecordSize)
	le := binary.LittleEndian
	le.PutUint64(buf[0:], b.Length)
	le.PutUint64(buf[8:], b.First.ID)
	le.PutUint64(buf[16:], b.First.Txid)
	le.PutUint32(buf[24:], b.First.Checksum)
	le.PutUint32(buf[28:], b.First.Pages)
	return buf
}

// DecodeBlobRef decodes a blob reference read from leaf page id.
func DecodeBlobRef(id ID, v []byte) (BlobRef, error) {
	if len(v) != RecordSize {
		return BlobRef{}, Corruptf(id, "blob reference is %d bytes, want %d", len(v), RecordSize)
	}
	le := binary.LittleEndian
	b := BlobRef{Length: le.Uint64(v[0:])}
	b.First.ID = le.Uint64(v[8:])
	b.First.Txid = le.Uint64(v[16:])
	b.First.Checksum = le.Uint32(v[24:])
	b.First.Pages = le.Uint32(v[28:])
	if b.First.ID == 0 || b.First.Pages == 0 {
		return BlobRef{}, Corruptf(id, "blob reference points to page %d with %d pages", b.First.ID, b.First.Pages)
	}
	return b, nil
}

// Blob extent layout (docs/design.md §2.5).
const (
	blobOffNext      = HeaderSize
	BlobPayloadStart = HeaderSize + 24
)

// BlobCapacity returns how many payload bytes an extent of pages pages holds.
func BlobCapacity(pages uint64, pageSize int) uint64 {
	return pages*uint64(pageSize) - BlobPayloadStart
}

// EncodeBlobExtent writes an extent into buf (len = pages × page size):
// header, the reference to the next extent (zero for the last) and payload.
func EncodeBlobExtent(buf []byte, pageSize int, id ID, txid uint64, next ExtentRef, payload []byte) {
	PutHeader(buf, Header{Type: TypeBlob, Count: uint32(len(payload)), Txid: txid, ID: id, Overflow: uint32(len(buf)/pageSize - 1)})
	le := binary.LittleEndian
	le.PutUint64(buf[blobOffNext:], next.ID)
	le.PutUint64(buf[blobOffNext+8:], next.Txid)
	le.PutUint32(buf[blobOffNext+16:], next.Checksum)
	le.PutUint32(buf[blobOffNext+20:], next.Pages)
	n := copy(buf[BlobPayloadStart:], payload)
	clear(buf[BlobPayloadStart+n:])
}

// BlobExtent is a validated blob extent.
type BlobExtent struct {
	Payload []byte
	Next    ExtentRef // Next.ID == 0 on the last extent
	Run     []byte    // the whole run, for checksumming
}

// ReadBlobExtent validates the extent ref points to inside data (the file's
// bytes from offset 0, or a buffer holding just the run when base == ref.ID).
func ReadBlobExtent(data []byte, base ID, pageSize int, ref ExtentRef, hwm uint64) (BlobExtent, error) {
	id := ref.ID
	if id < minHWM || id >= hwm || uint64(ref.Pages) > hwm-id || id < base {
		return BlobExtent{}, Corruptf(id, "blob extent of %d pages outside [%d, %d)", ref.Pages, minHWM, hwm)
	}
	off := (id - base) * uint64(pageSize)
	end := off + uint64(ref.Pages)*uint64(pageSize)
	if end > uint64(len(data)) {
		return BlobExtent{}, Corruptf(id, "blob extent beyond the end of the file")
	}
	run := data[off:end]
	h, err := ReadHeader(id, run)
	if err != nil {
		return BlobExtent{}, err
	}
	if err := h.Expect(id, TypeBlob, ref.Txid); err != nil {
		return BlobExtent{}, err
	}
	if h.Pages() != uint64(ref.Pages) {
		return BlobExtent{}, Corruptf(id, "blob extent header says %d pages, reference says %d", h.Pages(), ref.Pages)
	}
	if uint64(h.Count) > BlobCapacity(uint64(ref.Pages), pageSize) {
		return BlobExtent{}, Corruptf(id, "blob payload of %d bytes overruns its extent", h.Count)
	}
	le := binary.LittleEndian
	next := ExtentRef{
		Ref:   Ref{ID: le.Uint64(run[blobOffNext:]), Txid: le.Uint64(run[blobOffNext+8:]), Checksum: le.Uint32(run[blobOffNext+16:])},
		Pages: le.Uint32(run[blobOffNext+20:]),
	}
	if next.ID != 0 && (next.Pages == 0 || next.Txid > h.Txid) {
		return BlobExtent{}, Corruptf(id, "blob extent's successor %d (txn %d, %d pages) is invalid", next.ID, next.Txid, next.Pages)
	}
	return BlobExtent{Payload: run[BlobPayloadStart : BlobPayloadStart+uint64(h.Count)], Next: next, Run: run}, nil
}

package page

import "encoding/binary"

// RecordSize is the size of a bucket record and of a blob reference.
const RecordSize = 32

// BucketRecord is the value of a FlagBucket leaf element (docs/design.md §2.4).
type BucketRecord struct {
	Root     Ref // Root.ID == 0: the bucket is empty
	Sequence uint64
}

// Encode returns the record's 32 bytes.
func (b BucketRecord) Encode() []byte {
	buf := make([]byte, RecordSize)
	le := binary.LittleEndian
	le.PutUint64(buf[0:], b.Root.ID)
	le.PutUint64(buf[8:], b.Root.Txid)
	le.PutUint32(buf[16:], b.Root.Checksum)
	le.PutUint64(buf[24:], b.Sequence)
	return buf
}

// DecodeBucketRecord decodes a bucket record read from leaf page id.
func DecodeBucketRecord(id ID, v []byte) (BucketRecord, error) {
	if len(v) != RecordSize {
		return BucketRecord{}, Corruptf(id, "bucket record is %d bytes, want %d", len(v), RecordSize)
	}
	le := binary.LittleEndian
	if le.Uint32(v[20:]) != 0 {
		return BucketRecord{}, Corruptf(id, "bucket record has unknown flags %d", le.Uint32(v[20:]))
	}
	return BucketRecord{
		Root:     Ref{ID: le.Uint64(v[0:]), Txid: le.Uint64(v[8:]), Checksum: le.Uint32(v[16:])},
		Sequence: le.Uint64(v[24:]),
	}, nil
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

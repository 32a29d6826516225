package journal

import (
	"encoding/binary"
	"hash/crc32"
)

// HeaderSize is the size of the journal's header; the first record starts
// at this offset.
const HeaderSize = 4096

// RecordHeaderSize is the size of a record's header; its payload follows.
const RecordHeaderSize = 40

// Version is the journal format this package writes and reads.
const Version = 1

const (
	headerMagic  = 0x4c4a5652 // "RVJL" as little-endian bytes
	recordMagic  = 0x43524a52 // "RJRC" as little-endian bytes
	headerCRCOff = 60
	headerUsed   = 64 // bytes of the header that carry fields; the rest is zero
	recordCRCOff = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one committed transaction's logical changes.
type Record struct {
	// Seq orders the records of a journal: the header's firstSeq for the
	// first, then strictly increasing (see the package comment).
	// Writer.Append assigns it.
	Seq uint64
	// Txid is the id of the transaction the record describes.
	Txid uint64
	// Payload is the transaction's operations, encoded by AppendOp. In the
	// records Read passes to its callback it aliases an internal buffer,
	// valid only during the call.
	Payload []byte
}

// header is the decoded journal header.
type header struct {
	salt     uint64
	firstSeq uint64
}

// putHeader encodes h into b[:HeaderSize], zeroing everything else.
func putHeader(b []byte, h header) {
	b = b[:HeaderSize]
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], headerMagic)
	binary.LittleEndian.PutUint32(b[4:], Version)
	binary.LittleEndian.PutUint64(b[8:], h.salt)
	binary.LittleEndian.PutUint64(b[16:], h.firstSeq)
	binary.LittleEndian.PutUint32(b[headerCRCOff:], crc32.Checksum(b[:headerCRCOff], castagnoli))
}

// parseHeader decodes the first headerUsed bytes of a header. On failure it
// returns the reason, in the words Summary.Stop uses.
func parseHeader(b []byte) (header, string) {
	if len(b) < headerUsed {
		return header{}, "short header"
	}
	if binary.LittleEndian.Uint32(b[0:]) != headerMagic {
		return header{}, "bad header magic"
	}
	if binary.LittleEndian.Uint32(b[headerCRCOff:]) != crc32.Checksum(b[:headerCRCOff], castagnoli) {
		return header{}, "header checksum"
	}
	// The version is checked after the checksum so that "version" means a
	// well-formed header of another format, not a damaged one.
	if binary.LittleEndian.Uint32(b[4:]) != Version {
		return header{}, "version"
	}
	return header{
		salt:     binary.LittleEndian.Uint64(b[8:]),
		firstSeq: binary.LittleEndian.Uint64(b[16:]),
	}, ""
}

// putRecord encodes rec, with the given salt and seq, at the start of b,
// which must hold RecordHeaderSize+len(rec.Payload) bytes. The length must
// fit in 32 bits (Append checks).
func putRecord(b []byte, salt, seq uint64, rec *Record) {
	n := len(rec.Payload)
	binary.LittleEndian.PutUint32(b[0:], recordMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	binary.LittleEndian.PutUint64(b[8:], salt)
	binary.LittleEndian.PutUint64(b[16:], seq)
	binary.LittleEndian.PutUint64(b[24:], rec.Txid)
	binary.LittleEndian.PutUint32(b[36:], 0)
	copy(b[RecordHeaderSize:], rec.Payload)
	binary.LittleEndian.PutUint32(b[recordCRCOff:], recordChecksum(b[:recordCRCOff], b[RecordHeaderSize:RecordHeaderSize+n]))
}

// recordChecksum is the CRC-32C of a record's first 32 header bytes
// followed by its payload.
func recordChecksum(head, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, head[:recordCRCOff])
	return crc32.Update(c, castagnoli, payload)
}

// recordHeader is a decoded record header, not yet checked against the
// journal's header or its payload.
type recordHeader struct {
	length uint32
	salt   uint64
	seq    uint64
	txid   uint64
	crc    uint32
}

// parseRecordHeader decodes b[:RecordHeaderSize]. On a bad magic or
// reserved field it returns the reason, in the words Summary.Stop uses.
func parseRecordHeader(b []byte) (recordHeader, string) {
	if binary.LittleEndian.Uint32(b[0:]) != recordMagic {
		return recordHeader{}, "bad magic"
	}
	if binary.LittleEndian.Uint32(b[36:]) != 0 {
		return recordHeader{}, "reserved"
	}
	return recordHeader{
		length: binary.LittleEndian.Uint32(b[4:]),
		salt:   binary.LittleEndian.Uint64(b[8:]),
		seq:    binary.LittleEndian.Uint64(b[16:]),
		txid:   binary.LittleEndian.Uint64(b[24:]),
		crc:    binary.LittleEndian.Uint32(b[recordCRCOff:]),
	}, ""
}

package journal

import (
	"errors"
	"fmt"
	"io"

	"github.com/rivetkv/rivet/internal/vfs"
)

// readWindow is how many bytes Read fetches at a time, so that a journal of
// small records costs few reads.
const readWindow = 64 << 10

// Summary describes what Read found.
type Summary struct {
	// HeaderValid reports whether the header's magic, version and checksum
	// are right.
	HeaderValid bool
	// Salt and FirstSeq are the header's fields (zero if it is not valid).
	Salt, FirstSeq uint64
	// Records is how many valid records were passed to fn and accepted.
	Records int
	// End is the offset after the last valid record: HeaderSize if there is
	// none, 0 if the header is not valid.
	End int64
	// Stop says, for logs and tests, why reading stopped: "end of file",
	// "bad magic", "reserved", "length", "salt", "seq", "checksum", or for
	// the header "short header", "bad header magic", "header checksum",
	// "version"; "callback" if fn returned an error.
	Stop string
}

// Read reads the header of the journal in f and then its records in order,
// calling fn for each valid one, and stops at the first record that is not
// valid: torn, stale from an older epoch or a failed write, garbage, or
// reaching past the end of the file. That is the normal end of a journal,
// not an error.
//
// A record is valid if its magic and reserved field are right, its salt is
// the header's, its payload is at most maxRecord bytes and lies inside the
// file, its checksum matches, and its seq is the header's firstSeq (for the
// first record) or greater than the seq of the record before it. Seqs may
// skip: the seqs of a failed Append are not reused.
//
// The errors are an I/O error from f, and fn's error, returned as is; the
// Summary then describes the records before the one fn refused. A missing
// or invalid header is not an error: Summary.HeaderValid is false and the
// caller decides. Read never allocates more than the file holds, nor more
// than max(64 KiB, maxRecord+RecordHeaderSize).
//
// The Payload of the Record passed to fn aliases an internal buffer, valid
// only during the call.
func Read(f vfs.File, maxRecord int, fn func(Record) error) (Summary, error) {
	var sum Summary
	size, err := f.Size()
	if err != nil {
		return sum, fmt.Errorf("journal: size of %s: %w", f.Name(), err)
	}
	if size < HeaderSize {
		sum.Stop = "short header"
		return sum, nil
	}
	r := windowReader{f: f, size: size}
	b, err := r.bytes(0, headerUsed)
	if err != nil {
		return sum, err
	}
	h, why := parseHeader(b)
	if why != "" {
		sum.Stop = why
		return sum, nil
	}
	sum.HeaderValid = true
	sum.Salt, sum.FirstSeq = h.salt, h.firstSeq
	sum.End = HeaderSize
	maxRecord = max(maxRecord, 0)

	off := int64(HeaderSize)
	var prevSeq uint64
	for {
		if size-off < RecordHeaderSize {
			sum.Stop = "end of file"
			return sum, nil
		}
		b, err := r.bytes(off, RecordHeaderSize)
		if err != nil {
			return sum, err
		}
		rh, why := parseRecordHeader(b)
		switch {
		case why != "":
		case rh.salt != h.salt:
			why = "salt"
		case sum.Records == 0 && rh.seq != h.firstSeq,
			sum.Records > 0 && rh.seq <= prevSeq:
			why = "seq"
		case int64(rh.length) > int64(maxRecord):
			why = "length"
		case int64(rh.length) > size-off-RecordHeaderSize:
			why = "end of file"
		}
		if why != "" {
			sum.Stop = why
			return sum, nil
		}
		n := RecordHeaderSize + int(rh.length)
		b, err = r.bytes(off, n)
		if err != nil {
			return sum, err
		}
		if recordChecksum(b, b[RecordHeaderSize:]) != rh.crc {
			sum.Stop = "checksum"
			return sum, nil
		}
		if err := fn(Record{Seq: rh.seq, Txid: rh.txid, Payload: b[RecordHeaderSize:n:n]}); err != nil {
			sum.Stop = "callback"
			return sum, err
		}
		sum.Records++
		prevSeq = rh.seq
		off += int64(n)
		sum.End = off
	}
}

// windowReader reads a file through a buffer that holds a window of it.
type windowReader struct {
	f     vfs.File
	size  int64
	buf   []byte
	start int64 // file offset of buf[0]
	n     int   // valid bytes in buf
}

// bytes returns the n bytes at off, which the caller has checked lie inside
// the file. They stay valid until the next call.
func (r *windowReader) bytes(off int64, n int) ([]byte, error) {
	if off >= r.start && off+int64(n) <= r.start+int64(r.n) {
		i := int(off - r.start)
		return r.buf[i : i+n], nil
	}
	// Invariant: want <= r.size-off, so the buffer never exceeds the file.
	want := int(min(int64(max(n, readWindow)), r.size-off))
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	got, err := r.f.ReadAt(r.buf, off)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		r.n = 0
		return nil, fmt.Errorf("journal: read %s at %d: %w", r.f.Name(), off, err)
	}
	r.start, r.n = off, got
	return r.buf[:n], nil
}

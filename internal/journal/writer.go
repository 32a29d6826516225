package journal

import (
	"errors"
	"fmt"
	"math"

	"github.com/rivetkv/rivet/internal/vfs"
)

// DefaultGrowChunk is the growth step NewWriter uses when given 0.
const DefaultGrowChunk = 1 << 20

// maxKeptBuffer is the largest encoding buffer a Writer keeps between
// appends; a larger one, made for an unusually big transaction, is dropped
// so that it does not stay allocated for the life of the DB.
const maxKeptBuffer = 1 << 20

// zeros is the source of the writes that extend the file.
var zeros [64 << 10]byte

// Writer appends records to a journal file. It is not safe for concurrent
// use: the caller serialises its calls.
//
// Invariant: seqs are never reused. Append advances NextSeq by the number of
// records it was given whether or not their write succeeded, but advances
// End only on success, so the next Append overwrites the failed bytes from
// the same offset with records of higher seqs. The reader requires seqs to
// increase strictly along the file, so a stale record of the failed write
// that is left after them (a retried transaction may have the same txid and
// payload, and so the same length) has a lower seq than the record before
// it and ends the journal there.
//
// Invariant: HeaderSize <= end <= size, and the writer never writes below
// end except the header of the current epoch while that epoch holds no
// record (end == HeaderSize): bytes of a record that has been appended are
// never changed until the next epoch.
type Writer struct {
	f         vfs.File
	salt      uint64
	firstSeq  uint64 // the seq the header gives the record at HeaderSize
	nextSeq   uint64
	end       int64 // offset after the last appended record
	size      int64 // what the writer knows of the file's size: it never shrinks it, and zeros fill [end, size)
	growChunk int64
	// headerPending is set when the header on disk may not be the current
	// epoch's (its write failed, or firstSeq changed after failed appends
	// at HeaderSize). The next Append or Sync writes it.
	// Invariant: headerPending implies end == HeaderSize.
	headerPending bool
	buf           []byte
}

// NewWriter starts a fresh epoch in f: it writes a header with salt and
// firstSeq and positions appends at HeaderSize. The header is not flushed:
// the next Sync covers it, together with the first records.
//
// growChunk is how far ahead of the appends the file is extended, by
// writing zeros, so that most flushes change no file metadata (size,
// blocks); 0 or less means DefaultGrowChunk. The file is never shrunk: the
// space an older epoch used is reused.
//
// salt must differ from that of every epoch whose records may still be in
// the file (a random 64-bit value does): records are told apart from stale
// ones of older epochs by it.
func NewWriter(f vfs.File, salt, firstSeq uint64, growChunk int64) (*Writer, error) {
	if growChunk <= 0 {
		growChunk = DefaultGrowChunk
	}
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("journal: size of %s: %w", f.Name(), err)
	}
	w := &Writer{
		f:         f,
		salt:      salt,
		firstSeq:  firstSeq,
		nextSeq:   firstSeq,
		end:       HeaderSize,
		size:      max(size, HeaderSize),
		growChunk: growChunk,
	}
	if err := w.writeHeader(); err != nil {
		return nil, err
	}
	if err := w.extend(roundUp(HeaderSize, growChunk)); err != nil {
		return nil, err
	}
	return w, nil
}

// Append encodes recs into one buffer and writes it with one WriteAt at
// End (at 0, the epoch's header first, while an empty epoch's header must
// be written again: after a failed write of it, or failed appends that
// used up the seq it named). The records' Seq fields are ignored: they get
// NextSeq(), NextSeq()+1 and so on. On success End and NextSeq advance; on error NextSeq advances
// all the same and End does not (see the Writer's invariant), and the
// failed bytes are overwritten by the next Append. Nothing is flushed.
//
// When a failed write reached the file in part, Append erases the first
// record header it wrote and flushes that before it returns the error, so
// that no crash brings back records whose Append failed; if the erasure
// fails, the error wraps ErrUncertain.
func (w *Writer) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	seq := w.nextSeq
	w.nextSeq += uint64(len(recs))
	total := int64(0)
	for i := range recs {
		if len(recs[i].Payload) > math.MaxUint32 {
			return fmt.Errorf("journal: record of %d bytes is too long", len(recs[i].Payload))
		}
		total += RecordHeaderSize + int64(len(recs[i].Payload))
	}
	if w.end == HeaderSize && w.firstSeq != seq {
		// Earlier appends to this empty epoch failed and used up seqs: the
		// header must name the seq the first record now gets.
		w.firstSeq = seq
		w.headerPending = true
	}
	at := w.end
	var prefix int64
	if w.headerPending {
		at, prefix = 0, HeaderSize
	}
	buf := w.buffer(int(prefix + total))
	if w.headerPending {
		putHeader(buf, header{salt: w.salt, firstSeq: w.firstSeq})
	}
	off := int(prefix)
	for i := range recs {
		putRecord(buf[off:], w.salt, seq+uint64(i), &recs[i])
		off += RecordHeaderSize + len(recs[i].Payload)
	}
	// The file is extended first: once the records are written, nothing
	// may fail (a record written whole is valid, and the caller takes an
	// error to mean the commits did not happen).
	err := w.extend(roundUp(w.end+total, w.growChunk))
	written := 0
	if err == nil {
		if written, err = w.f.WriteAt(buf, at); err != nil {
			err = fmt.Errorf("journal: append at %d: %w", w.end, err)
		}
	}
	w.releaseBuffer()
	if err != nil {
		if written > 0 {
			// Part of the write, or all of it, reached the file: a
			// record in it may read as valid (a short write whose
			// missing bytes the file already held, or one that failed
			// after writing everything). Its first header is erased,
			// and the erasure flushed, before the failure is reported.
			if rerr := w.retract(at + prefix); rerr != nil {
				return fmt.Errorf("%w (%v): %w", ErrUncertain, rerr, err)
			}
		}
		return err
	}
	w.end += total
	w.headerPending = false
	return nil
}

// ErrUncertain is wrapped by the error of an Append whose records reached
// the file in part and could not be erased: a crash may bring them back.
var ErrUncertain = errors.New("journal: a failed append may have left valid records")

// retract erases the record header at off and flushes the file.
func (w *Writer) retract(off int64) error {
	if _, err := w.f.WriteAt(zeros[:RecordHeaderSize], off); err != nil {
		return err
	}
	return w.f.Sync(vfs.SyncData)
}

// Sync flushes the journal file with f.Sync(kind), first writing the
// header if an earlier write of it failed.
func (w *Writer) Sync(kind vfs.SyncKind) error {
	if w.headerPending {
		if err := w.writeHeader(); err != nil {
			return err
		}
	}
	if err := w.f.Sync(kind); err != nil {
		return fmt.Errorf("journal: sync %s: %w", w.f.Name(), err)
	}
	return nil
}

// End returns the offset after the last appended record (HeaderSize when
// the epoch holds none).
func (w *Writer) End() int64 { return w.end }

// NextSeq returns the seq the next appended record will get.
func (w *Writer) NextSeq() uint64 { return w.nextSeq }

// Rewind starts a new epoch at the start of the same file: the header is
// rewritten with newSalt and firstSeq = NextSeq(), and appends start at
// HeaderSize again. The header is not flushed: the next Sync covers it,
// with the records after it. The file keeps its size, so appends reuse the
// blocks it has.
//
// The caller rewinds only when every record appended so far is covered by a
// durable checkpoint: after a crash, the old epoch's records may be gone
// whether or not the next Sync happened. newSalt must differ from the salts
// of the epochs whose records may be in the file. If the header's write
// fails the new epoch has begun all the same, and the next Append or Sync
// writes the header again.
func (w *Writer) Rewind(newSalt uint64) error {
	w.salt = newSalt
	w.firstSeq = w.nextSeq
	w.end = HeaderSize
	return w.writeHeader()
}

// writeHeader writes the current epoch's header at offset 0. On failure the
// header stays pending.
func (w *Writer) writeHeader() error {
	w.headerPending = true
	buf := w.buffer(HeaderSize)
	putHeader(buf, header{salt: w.salt, firstSeq: w.firstSeq})
	_, err := w.f.WriteAt(buf, 0)
	w.releaseBuffer()
	if err != nil {
		return fmt.Errorf("journal: write header of %s: %w", w.f.Name(), err)
	}
	w.headerPending = false
	return nil
}

// extend grows the file to target by writing zeros from the writer's idea
// of its size, if target is beyond it. The zeros land past end only, so
// they never touch a record.
func (w *Writer) extend(target int64) error {
	for w.size < target {
		n := min(target-w.size, int64(len(zeros)))
		if _, err := w.f.WriteAt(zeros[:n], w.size); err != nil {
			return fmt.Errorf("journal: extend %s to %d: %w", w.f.Name(), target, err)
		}
		w.size += n
	}
	return nil
}

// buffer returns a scratch buffer of n bytes.
func (w *Writer) buffer(n int) []byte {
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	return w.buf[:n]
}

// releaseBuffer drops the scratch buffer if it is too big to keep.
func (w *Writer) releaseBuffer() {
	if cap(w.buf) > maxKeptBuffer {
		w.buf = nil
	}
}

// roundUp rounds n up to a multiple of step (step > 0).
func roundUp(n, step int64) int64 {
	if r := n % step; r != 0 {
		return n + step - r
	}
	return n
}

package journal

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/vfs"
)

// fuzzMaxRecord is the payload bound FuzzRead reads with.
const fuzzMaxRecord = 1 << 16

// sampleJournal returns the bytes of a journal written by a Writer: a few
// records, then, if rewind, a second epoch over the first. The zeros the
// writer grew the file by are cut off.
func sampleJournal(tb testing.TB, seed uint64, rewind bool) []byte {
	tb.Helper()
	fs := vfs.NewMem()
	f, err := fs.OpenFile("j", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	// A small chunk keeps the seeds small.
	w, err := NewWriter(f, rng.Uint64(), rng.Uint64N(1000), 512)
	if err != nil {
		tb.Fatal(err)
	}
	maxEnd := w.End()
	epochs := 1
	if rewind {
		epochs = 2
	}
	for e := range epochs {
		if e > 0 {
			if err := w.Rewind(rng.Uint64()); err != nil {
				tb.Fatal(err)
			}
		}
		for i := range 4 - 2*e {
			ops := make([]Op, 1+rng.IntN(3))
			for j := range ops {
				ops[j] = randOp(rng)
			}
			if err := w.Append([]Record{{Txid: uint64(i), Payload: encodeOps(ops)}}); err != nil {
				tb.Fatal(err)
			}
			maxEnd = max(maxEnd, w.End())
		}
	}
	img, err := fs.ReadFile("j")
	if err != nil {
		tb.Fatal(err)
	}
	return img[:maxEnd]
}

// FuzzRead reads arbitrary file bytes as a journal: Read never panics,
// returns no error (the file reads fine), and passes only records that fit
// the bound and the file.
func FuzzRead(f *testing.F) {
	for seed := range uint64(4) {
		f.Add(compactJournal(sampleJournal(f, seed, seed%2 == 1)))
	}
	f.Add([]byte{})
	f.Add(make([]byte, headerUsed))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := expandJournal(data)
		total := int64(HeaderSize)
		var prev uint64
		sum, err := Read(file, fuzzMaxRecord, func(r Record) error {
			if len(r.Payload) > fuzzMaxRecord {
				t.Fatalf("record of %d bytes passed a bound of %d", len(r.Payload), fuzzMaxRecord)
			}
			if total > HeaderSize && r.Seq <= prev {
				t.Fatalf("seq %d after %d", r.Seq, prev)
			}
			prev = r.Seq
			total += RecordHeaderSize + int64(len(r.Payload))
			// A payload is whatever was stored: decoding it must not panic
			// and fails only as corruption.
			if err := DecodeOps(r.Payload, func(*Op) error { return nil }); err != nil && !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("DecodeOps: %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Read of an in-memory file: %v", err)
		}
		if !sum.HeaderValid {
			if sum.Records != 0 || sum.End != 0 {
				t.Fatalf("invalid header but %+v", sum)
			}
			return
		}
		if sum.End != total || sum.End > int64(len(file)) {
			t.Fatalf("Summary.End %d, records end at %d, file of %d bytes", sum.End, total, len(file))
		}
	})
}

// FuzzDecodeOps decodes arbitrary payloads: DecodeOps never panics, fails
// only with ErrCorrupt, and what it accepts re-encodes to the same bytes.
// The input also drives a generator of valid ops, which must round-trip.
func FuzzDecodeOps(f *testing.F) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 2))
		ops := make([]Op, 1+rng.IntN(4))
		for i := range ops {
			ops[i] = randOp(rng)
		}
		f.Add(encodeOps(ops))
	}
	for k := OpPut; k <= OpSetSequence; k++ {
		f.Add(AppendOp(nil, &Op{Kind: k, Path: [][]byte{{}, nil, []byte("b")}, Key: []byte{}, Dest: [][]byte{[]byte("d")}, Seq: 300}))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		ops, err := decodeAll(payload)
		if err != nil {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("DecodeOps = %v, not an ErrCorrupt", err)
			}
		} else if again := encodeOps(ops); !bytes.Equal(again, payload) {
			t.Fatalf("accepted payload %x re-encodes to %x", payload, again)
		}
		checkRoundTrip(t, opsFromBytes(payload))
	})
}

// opsFromBytes builds valid ops from arbitrary bytes: each byte string's
// length and contents come from the input, nil and empty included.
func opsFromBytes(b []byte) []Op {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	str := func() []byte {
		n := int(next())
		switch {
		case n == 0:
			return nil
		case n == 1:
			return []byte{}
		}
		n = min(n-2, len(b))
		s := b[:n]
		b = b[n:]
		return s
	}
	path := func() [][]byte {
		p := make([][]byte, next()%4)
		for i := range p {
			p[i] = str()
		}
		return p
	}
	var ops []Op
	for len(b) > 0 && len(ops) < 64 {
		op := Op{Kind: OpKind(1 + next()%6)}
		op.Path, op.Key, op.Value, op.Dest = path(), str(), str(), path()
		for range 8 {
			op.Seq = op.Seq<<8 | uint64(next())
		}
		ops = append(ops, op)
	}
	return ops
}

// The fuzzed inputs leave out the header's bytes [headerUsed, HeaderSize),
// which Read does not look at, so that they stay small: the fuzzer's
// minimization of an input costs time quadratic in its size.

// expandJournal makes a journal file of a compact input: its first
// headerUsed bytes are the header's, the rest the records'.
func expandJournal(data []byte) bytesFile {
	if len(data) < headerUsed {
		return bytesFile(data)
	}
	file := make([]byte, HeaderSize+len(data)-headerUsed)
	copy(file, data[:headerUsed])
	copy(file[HeaderSize:], data[headerUsed:])
	return file
}

// compactJournal is the inverse of expandJournal.
func compactJournal(file []byte) []byte {
	out := append([]byte(nil), file[:min(len(file), headerUsed)]...)
	if len(file) > HeaderSize {
		out = append(out, file[HeaderSize:]...)
	}
	return out
}

// bytesFile is a read-only vfs.File over a byte slice: fuzzing reads
// through it rather than a MemFS, whose locking is no part of what is
// fuzzed. Only the methods Read calls are implemented.
type bytesFile []byte

var _ vfs.File = bytesFile(nil)

func (b bytesFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (b bytesFile) Size() (int64, error) { return int64(len(b)), nil }
func (b bytesFile) Name() string         { return "fuzz" }

var errReadOnly = errors.New("bytesFile is read-only")

func (bytesFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (bytesFile) Sync(vfs.SyncKind) error            { return errReadOnly }
func (bytesFile) Truncate(int64) error               { return errReadOnly }
func (bytesFile) TryLock(bool) error                 { return errReadOnly }
func (bytesFile) Unlock() error                      { return errReadOnly }
func (bytesFile) Map(int64) (vfs.Mapping, error)     { return nil, errReadOnly }
func (bytesFile) Close() error                       { return nil }

// TestFuzzSeedsHoldRecords checks that FuzzRead's seeds survive their
// compact form as journals with records, so that fuzzing starts from
// valid files.
func TestFuzzSeedsHoldRecords(t *testing.T) {
	for seed := range uint64(4) {
		file := expandJournal(compactJournal(sampleJournal(t, seed, seed%2 == 1)))
		sum, err := Read(file, fuzzMaxRecord, func(Record) error { return nil })
		want := 4
		if seed%2 == 1 {
			want = 2
		}
		if err != nil || !sum.HeaderValid || sum.Records != want {
			t.Fatalf("seed %d: %+v, %v; want %d records", seed, sum, err, want)
		}
	}
}

// FuzzDecodeBatch: any payload decodes without panicking, and a batch that
// decodes re-encodes to the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendEntry(AppendEntry(nil, 3, []byte{1, 2}), 7, nil))
	f.Add([]byte{0x80})
	f.Add(AppendEntry(nil, 1<<40, AppendOp(nil, &Op{Kind: OpNotLogged})))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var again []byte
		err := DecodeBatch(payload, func(txid uint64, ops []byte) error {
			again = AppendEntry(again, txid, ops)
			return nil
		})
		if err != nil {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("DecodeBatch error %v does not match ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(again, payload) {
			t.Fatalf("batch %x re-encodes as %x", payload, again)
		}
	})
}

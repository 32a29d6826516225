package journal

import (
	"encoding/binary"
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
)

// OpKind says what an Op does.
type OpKind uint8

// The operations a record's payload holds. Each is encoded as its kind byte
// followed by the fields listed, in that order.
const (
	// OpPut stores Value under Key in the bucket at Path.
	OpPut OpKind = 1 // Path, Key, Value
	// OpDelete removes Key from the bucket at Path.
	OpDelete OpKind = 2 // Path, Key
	// OpCreateBucket creates the bucket Key in the bucket at Path (the
	// parent).
	OpCreateBucket OpKind = 3 // Path, Key
	// OpDeleteBucket deletes the bucket Key from the bucket at Path (the
	// parent).
	OpDeleteBucket OpKind = 4 // Path, Key
	// OpMoveBucket moves the bucket Key from the bucket at Path (the source
	// parent) into the bucket at Dest (the destination parent).
	OpMoveBucket OpKind = 5 // Path, Key, Dest
	// OpSetSequence sets the sequence of the bucket at Path to Seq.
	OpSetSequence OpKind = 6 // Path, Seq
	// OpNotLogged marks a transaction that changed data without logging
	// its ops (too large a record): a replay cannot reproduce it, so it
	// must stop before it unless the file's own state already holds it.
	// It has no fields and is a record's only op.
	OpNotLogged OpKind = 7
)

// String returns the kind's name.
func (k OpKind) String() string {
	switch k {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpCreateBucket:
		return "create-bucket"
	case OpDeleteBucket:
		return "delete-bucket"
	case OpMoveBucket:
		return "move-bucket"
	case OpSetSequence:
		return "set-sequence"
	case OpNotLogged:
		return "not-logged"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one logical change of a transaction. A kind uses only the fields
// its constant lists; the others are ignored by AppendOp and zero in the ops
// DecodeOps returns.
type Op struct {
	// Kind says what the op does.
	Kind OpKind
	// Path is the names of the buckets leading to the bucket the op acts
	// on (or, for bucket operations, the parent), from the top level;
	// empty means the top level itself.
	Path [][]byte
	// Key is the key, or the name of the bucket a bucket operation acts on.
	Key []byte
	// Value is the value of a put; nil and empty are different values.
	Value []byte
	// Dest is the path of the destination parent of a move.
	Dest [][]byte
	// Seq is the sequence a set-sequence op sets.
	Seq uint64
}

// AppendOp appends the encoding of op to dst and returns the extended
// slice. It panics on a Kind it does not know: that is a bug in the caller,
// not bad input.
func AppendOp(dst []byte, op *Op) []byte {
	dst = append(dst, byte(op.Kind))
	switch op.Kind {
	case OpPut:
		dst = appendPath(dst, op.Path)
		dst = appendBytes(dst, op.Key)
		dst = appendBytes(dst, op.Value)
	case OpDelete, OpCreateBucket, OpDeleteBucket:
		dst = appendPath(dst, op.Path)
		dst = appendBytes(dst, op.Key)
	case OpMoveBucket:
		dst = appendPath(dst, op.Path)
		dst = appendBytes(dst, op.Key)
		dst = appendPath(dst, op.Dest)
	case OpSetSequence:
		dst = appendPath(dst, op.Path)
		dst = binary.AppendUvarint(dst, op.Seq)
	case OpNotLogged:
	default:
		panic(fmt.Sprintf("journal: AppendOp of unknown kind %d", op.Kind))
	}
	return dst
}

// appendBytes appends a byte string: uvarint(len+1) then the bytes, or
// uvarint 0 for nil.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

// appendPath appends a path: uvarint(count) then count byte strings.
func appendPath(dst []byte, path [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(path)))
	for _, name := range path {
		dst = appendBytes(dst, name)
	}
	return dst
}

// DecodeOps calls fn for each op in payload, in order, and returns fn's
// first error as is. The Op and its slices alias payload and are reused
// between calls: fn copies what it keeps. An empty path decodes as nil.
//
// Malformed input returns an error matching rerrors.ErrCorrupt; DecodeOps
// never panics on it and allocates O(len(payload)) at most (the paths'
// slice headers).
func DecodeOps(payload []byte, fn func(*Op) error) error {
	d := opDecoder{b: payload}
	var op Op
	var path, dest [][]byte
	for d.pos < len(d.b) {
		start := d.pos
		kind := OpKind(d.b[d.pos])
		d.pos++
		op = Op{Kind: kind}
		switch kind {
		case OpPut:
			op.Path, path = d.path(path)
			op.Key = d.bytes()
			op.Value = d.bytes()
		case OpDelete, OpCreateBucket, OpDeleteBucket:
			op.Path, path = d.path(path)
			op.Key = d.bytes()
		case OpMoveBucket:
			op.Path, path = d.path(path)
			op.Key = d.bytes()
			op.Dest, dest = d.path(dest)
		case OpSetSequence:
			op.Path, path = d.path(path)
			op.Seq = d.uvarint()
		case OpNotLogged:
		default:
			return corruptOp(start, "unknown op kind %d", uint8(kind))
		}
		if d.err != "" {
			return corruptOp(start, "%s op: %s", kind, d.err)
		}
		if err := fn(&op); err != nil {
			return err
		}
	}
	return nil
}

// corruptOp is the error for a malformed op starting at offset off of a
// payload.
func corruptOp(off int, format string, args ...any) error {
	return fmt.Errorf("journal: op at payload offset %d: %s: %w", off, fmt.Sprintf(format, args...), rerrors.ErrCorrupt)
}

// opDecoder reads the fields of ops. After the first error it reads nothing
// more and err says what was wrong.
type opDecoder struct {
	b   []byte
	pos int
	err string
}

// uvarint reads a minimally encoded uvarint.
func (d *opDecoder) uvarint() uint64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.pos:])
	switch {
	case n == 0:
		d.err = "truncated varint"
		return 0
	case n < 0:
		d.err = "varint overflows 64 bits"
		return 0
	case n > 1 && d.b[d.pos+n-1] == 0:
		// A last byte of zero adds nothing: the encoding is not minimal,
		// and accepting it would let two payloads mean the same ops.
		d.err = "varint not minimal"
		return 0
	}
	d.pos += n
	return v
}

// bytes reads a byte string; the result aliases the payload and has no
// spare capacity, so that appending to it cannot clobber the payload.
func (d *opDecoder) bytes() []byte {
	l := d.uvarint()
	if d.err != "" || l == 0 {
		return nil
	}
	n := l - 1
	if n > uint64(len(d.b)-d.pos) {
		d.err = "byte string past the end"
		return nil
	}
	s := d.b[d.pos : d.pos+int(n) : d.pos+int(n)]
	d.pos += int(n)
	return s
}

// path reads a path into buf (reused between ops) and returns it, nil if it
// is empty, and buf to reuse next time.
func (d *opDecoder) path(buf [][]byte) (path, reuse [][]byte) {
	count := d.uvarint()
	if d.err != "" || count == 0 {
		return nil, buf
	}
	// Every name takes at least one byte, so a count beyond the bytes left
	// is corrupt. buf grows by the names actually read, never by count, so
	// its size is bounded by the payload's.
	if count > uint64(len(d.b)-d.pos) {
		d.err = "path longer than the payload"
		return nil, buf
	}
	buf = buf[:0]
	for i := uint64(0); i < count; i++ {
		name := d.bytes()
		if d.err != "" {
			return nil, buf
		}
		buf = append(buf, name)
	}
	return buf, buf
}

// Package digest defines the canonical stream of a database's contents and
// its SHA-256 digest, the one `rivet import`, `rivet export`, `rivet
// verify` and the conversion of a bbolt file at Open compare: two files
// have the same digest exactly when they hold the same buckets, keys,
// values and bucket sequences, whatever their format.
//
// The stream: buckets and keys in key order, depth first; a nested
// bucket's contents between its Bucket entry (name and sequence) and its
// End entry. Top-level entries are buckets only (bbolt's API allows
// nothing else there).
package digest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
)

// Kind is the kind of an entry of the canonical stream.
type Kind byte

// Entry kinds; the values are the bytes the digest hashes.
const (
	KindBucket Kind = 'B' // a nested bucket begins: Key = its name, Seq its sequence
	KindEnd    Kind = 'E' // the bucket begun last ends
	KindKV     Kind = 'K' // a key and its value in the current bucket
)

// Entry is one element of the canonical stream. Key and Value may alias
// the source transaction's memory.
type Entry struct {
	Kind  Kind
	Key   []byte
	Value []byte
	Seq   uint64
}

// Same reports whether a and b are the same entry.
func (a Entry) Same(b Entry) bool {
	return a.Kind == b.Kind && a.Seq == b.Seq && string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value)
}

// Bucket is what Walk reads: a bucket of either engine, or a file's root.
type Bucket interface {
	// ForEach calls fn for every entry in key order; nested buckets come
	// with isBucket set.
	ForEach(fn func(k, v []byte, isBucket bool) error) error
	// Bucket returns the nested bucket name, or nil.
	Bucket(name []byte) Bucket
	// Sequence returns the bucket's sequence number.
	Sequence() uint64
}

// MaxNesting bounds bucket nesting in a walk: rivet refuses deeper
// buckets, and a bound keeps a file whose bucket records form a cycle from
// recursing without end.
const MaxNesting = 64

// ErrKeyOutsideBucket is Walk's error for a plain key at the top level.
var ErrKeyOutsideBucket = errors.New("a key outside any bucket")

// WalkError describes where a walk stopped: the bucket path and the key.
type WalkError struct {
	Path [][]byte
	Key  []byte
	Err  error
}

func (e *WalkError) Error() string { return fmt.Sprintf("%v (key %q)", e.Err, e.Key) }

// Unwrap returns the cause.
func (e *WalkError) Unwrap() error { return e.Err }

// Walk calls fn for every entry under root, in canonical order.
func Walk(root Bucket, fn func(Entry) error) error {
	return walk(root, nil, fn)
}

func walk(b Bucket, path [][]byte, fn func(Entry) error) error {
	return b.ForEach(func(k, v []byte, isBucket bool) error {
		if !isBucket {
			if len(path) == 0 {
				return &WalkError{Path: path, Key: k, Err: ErrKeyOutsideBucket}
			}
			if v == nil {
				v = []byte{}
			}
			return fn(Entry{Kind: KindKV, Key: k, Value: v})
		}
		if len(path) >= MaxNesting {
			return &WalkError{Path: path, Key: k, Err: fmt.Errorf("buckets nested deeper than %d levels (rivet's limit; a cycle?)", MaxNesting)}
		}
		child := b.Bucket(k)
		if child == nil {
			return &WalkError{Path: path, Key: k, Err: errors.New("a nested bucket that cannot be opened")}
		}
		if err := fn(Entry{Kind: KindBucket, Key: k, Seq: child.Sequence()}); err != nil {
			return err
		}
		if err := walk(child, append(path, k), fn); err != nil {
			return err
		}
		return fn(Entry{Kind: KindEnd})
	})
}

// Digest accumulates a stream's counts and its SHA-256. Encoding, per
// entry: the kind byte; for a bucket the name (uvarint length, bytes) and
// the sequence (8 bytes, big-endian); for a key the key and the value
// (each uvarint length, bytes); nothing more for an end. Lengths make it
// unambiguous and the begin/end pairs carry every key's bucket path.
type Digest struct {
	// Buckets, Keys and Bytes count the buckets, the keys, and the bytes
	// of bucket names, keys and values added so far.
	Buckets, Keys, Bytes int64
	// Path is the bucket path of the last entry added.
	Path    [][]byte
	h       hash.Hash
	scratch [binary.MaxVarintLen64 + 8]byte
}

// New returns an empty Digest.
func New() *Digest { return &Digest{h: sha256.New()} }

// Add hashes e and counts it.
func (d *Digest) Add(e Entry) {
	d.h.Write([]byte{byte(e.Kind)})
	switch e.Kind {
	case KindBucket:
		d.writeBytes(e.Key)
		binary.BigEndian.PutUint64(d.scratch[:8], e.Seq)
		d.h.Write(d.scratch[:8])
		d.Buckets++
		d.Bytes += int64(len(e.Key))
		d.Path = append(d.Path, e.Key)
	case KindEnd:
		if len(d.Path) > 0 {
			d.Path = d.Path[:len(d.Path)-1]
		}
	case KindKV:
		d.writeBytes(e.Key)
		d.writeBytes(e.Value)
		d.Keys++
		d.Bytes += int64(len(e.Key) + len(e.Value))
	}
}

func (d *Digest) writeBytes(b []byte) {
	n := binary.PutUvarint(d.scratch[:], uint64(len(b)))
	d.h.Write(d.scratch[:n])
	d.h.Write(b)
}

// Sum returns the digest of the entries added so far, in hex.
func (d *Digest) Sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

// Of walks root and returns the digest of its stream.
func Of(root Bucket) (*Digest, error) {
	d := New()
	err := Walk(root, func(e Entry) error {
		if e.Kind == KindBucket {
			// Path aliases the walk's keys, which may not outlive it.
			e.Key = append([]byte(nil), e.Key...)
		}
		d.Add(e)
		return nil
	})
	return d, err
}

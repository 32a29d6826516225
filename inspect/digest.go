package inspect

import "github.com/rivetkv/rivet/internal/digest"

// A database's canonical stream lists its buckets and keys in key order,
// depth first: a nested bucket's contents come between its EntryBucket
// (name and sequence) and its EntryEnd. Two files hold the same buckets,
// keys, values and sequences exactly when their streams, and so their
// digests, are equal, whatever their format. It is the stream the library
// compares when it converts a bbolt file at Open.

// Entry is one element of a canonical stream. Key and Value may alias the
// transaction's memory.
type Entry = digest.Entry

// EntryKind is the kind of an Entry.
type EntryKind = digest.Kind

// The kinds of entries.
const (
	// EntryBucket begins a nested bucket: Key is its name, Seq its
	// sequence.
	EntryBucket = digest.KindBucket
	// EntryEnd ends the bucket begun last.
	EntryEnd = digest.KindEnd
	// EntryKV is a key and its value in the current bucket.
	EntryKV = digest.KindKV
)

// WalkBucket is what Walk reads: a bucket of a rivet or bbolt transaction,
// or a transaction's root, adapted by the caller.
type WalkBucket = digest.Bucket

// MaxNesting bounds the bucket nesting a walk follows: rivet refuses deeper
// buckets, and the bound stops a walk of a file whose bucket records form a
// cycle.
const MaxNesting = digest.MaxNesting

// WalkError says where a walk stopped: the bucket path and the key.
type WalkError = digest.WalkError

// ErrKeyOutsideBucket is a walk's error for a plain key at the top level,
// where bbolt's API allows only buckets.
var ErrKeyOutsideBucket = digest.ErrKeyOutsideBucket

// Walk calls fn for every entry under root, in canonical order, and
// returns fn's first error or a *WalkError.
func Walk(root WalkBucket, fn func(Entry) error) error { return digest.Walk(root, fn) }

// Digest accumulates a canonical stream's counts (Buckets, Keys, Bytes),
// the bucket path of the last entry (Path) and the stream's SHA-256
// (Sum).
type Digest = digest.Digest

// NewDigest returns an empty Digest; feed it with its Add method.
func NewDigest() *Digest { return digest.New() }

// DigestOf walks root and returns the digest of its stream.
func DigestOf(root WalkBucket) (*Digest, error) { return digest.Of(root) }

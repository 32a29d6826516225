package difftest

import (
	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// The harness drives both engines through the erased interfaces DB, Tx,
// Bucket and Cursor. One generic adapter implements them for any engine
// with bbolt's API, and is instantiated for bbolt and for rivet, so both
// are driven by exactly the same calls.

// DB is the part of *bbolt.DB the harness uses.
type DB interface {
	Begin(writable bool) (Tx, error)
	Update(fn func(Tx) error) error
	View(fn func(Tx) error) error
	Close() error
}

// Tx is the part of *bbolt.Tx the harness uses.
type Tx interface {
	Bucket(name []byte) Bucket
	CreateBucket(name []byte) (Bucket, error)
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	DeleteBucket(name []byte) error
	MoveBucket(child []byte, src, dst Bucket) error
	ForEach(fn func(name []byte, b Bucket) error) error
	Cursor() Cursor
	Commit() error
	Rollback() error
	Writable() bool
	OnCommit(fn func())
}

// Bucket is the part of *bbolt.Bucket the harness uses.
type Bucket interface {
	Bucket(name []byte) Bucket
	CreateBucket(name []byte) (Bucket, error)
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	DeleteBucket(name []byte) error
	MoveBucket(name []byte, dst Bucket) error
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	Sequence() uint64
	SetSequence(v uint64) error
	NextSequence() (uint64, error)
	ForEach(fn func(k, v []byte) error) error
	ForEachBucket(fn func(k []byte) error) error
	Stats() Stats
	Cursor() Cursor
	Writable() bool
}

// Cursor is the part of *bbolt.Cursor the harness uses.
type Cursor interface {
	First() (k, v []byte)
	Last() (k, v []byte)
	Next() (k, v []byte)
	Prev() (k, v []byte)
	Seek(seek []byte) (k, v []byte)
	Delete() error
	Bucket() Bucket
}

// Stats is what the harness compares of BucketStats: the counts, which
// both engines define alike (page and byte figures are each engine's own).
type Stats struct {
	KeyN, BucketN int
}

// The engines' own types, as type parameters.

type cursorAPI[B any] interface {
	comparable
	First() ([]byte, []byte)
	Last() ([]byte, []byte)
	Next() ([]byte, []byte)
	Prev() ([]byte, []byte)
	Seek([]byte) ([]byte, []byte)
	Delete() error
	Bucket() B
}

type bucketAPI[B any, C cursorAPI[B]] interface {
	comparable
	Bucket([]byte) B
	CreateBucket([]byte) (B, error)
	CreateBucketIfNotExists([]byte) (B, error)
	DeleteBucket([]byte) error
	MoveBucket([]byte, B) error
	Get([]byte) []byte
	Put([]byte, []byte) error
	Delete([]byte) error
	Sequence() uint64
	SetSequence(uint64) error
	NextSequence() (uint64, error)
	ForEach(func([]byte, []byte) error) error
	ForEachBucket(func([]byte) error) error
	Cursor() C
	Writable() bool
}

type txAPI[B bucketAPI[B, C], C cursorAPI[B]] interface {
	comparable
	Bucket([]byte) B
	CreateBucket([]byte) (B, error)
	CreateBucketIfNotExists([]byte) (B, error)
	DeleteBucket([]byte) error
	MoveBucket([]byte, B, B) error
	ForEach(func([]byte, B) error) error
	Cursor() C
	Commit() error
	Rollback() error
	Writable() bool
	OnCommit(func())
}

type dbAPI[T any] interface {
	Begin(bool) (T, error)
	Update(func(T) error) error
	View(func(T) error) error
	Close() error
}

// kit holds what differs between engines beyond the method sets.
type kit[B any] struct {
	stats func(B) Stats
}

type gDB[D dbAPI[T], T txAPI[B, C], B bucketAPI[B, C], C cursorAPI[B]] struct {
	db  D
	kit *kit[B]
}

type gTx[T txAPI[B, C], B bucketAPI[B, C], C cursorAPI[B]] struct {
	tx  T
	kit *kit[B]
}

type gBucket[B bucketAPI[B, C], C cursorAPI[B]] struct {
	b   B
	kit *kit[B]
}

type gCursor[B bucketAPI[B, C], C cursorAPI[B]] struct {
	c   C
	kit *kit[B]
}

func wrapTx[T txAPI[B, C], B bucketAPI[B, C], C cursorAPI[B]](tx T, k *kit[B]) Tx {
	var zero T
	if tx == zero {
		return nil
	}
	return gTx[T, B, C]{tx, k}
}

func wrapBucket[B bucketAPI[B, C], C cursorAPI[B]](b B, k *kit[B]) Bucket {
	var zero B
	if b == zero {
		return nil
	}
	return gBucket[B, C]{b, k}
}

func wrapCursor[B bucketAPI[B, C], C cursorAPI[B]](c C, k *kit[B]) Cursor {
	var zero C
	if c == zero {
		return nil
	}
	return gCursor[B, C]{c, k}
}

// unwrapBucket returns the engine's bucket, or its nil for a nil Bucket.
func unwrapBucket[B bucketAPI[B, C], C cursorAPI[B]](b Bucket) B {
	if b == nil {
		var zero B
		return zero
	}
	return b.(gBucket[B, C]).b
}

func (d gDB[D, T, B, C]) Begin(writable bool) (Tx, error) {
	tx, err := d.db.Begin(writable)
	return wrapTx(tx, d.kit), err
}

func (d gDB[D, T, B, C]) Update(fn func(Tx) error) error {
	return d.db.Update(func(tx T) error { return fn(wrapTx(tx, d.kit)) })
}

func (d gDB[D, T, B, C]) View(fn func(Tx) error) error {
	return d.db.View(func(tx T) error { return fn(wrapTx(tx, d.kit)) })
}

func (d gDB[D, T, B, C]) Close() error { return d.db.Close() }

func (t gTx[T, B, C]) Bucket(name []byte) Bucket { return wrapBucket(t.tx.Bucket(name), t.kit) }

func (t gTx[T, B, C]) CreateBucket(name []byte) (Bucket, error) {
	b, err := t.tx.CreateBucket(name)
	return wrapBucket(b, t.kit), err
}

func (t gTx[T, B, C]) CreateBucketIfNotExists(name []byte) (Bucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	return wrapBucket(b, t.kit), err
}

func (t gTx[T, B, C]) DeleteBucket(name []byte) error { return t.tx.DeleteBucket(name) }

func (t gTx[T, B, C]) MoveBucket(child []byte, src, dst Bucket) error {
	return t.tx.MoveBucket(child, unwrapBucket[B, C](src), unwrapBucket[B, C](dst))
}

func (t gTx[T, B, C]) ForEach(fn func([]byte, Bucket) error) error {
	return t.tx.ForEach(func(name []byte, b B) error { return fn(name, wrapBucket(b, t.kit)) })
}

func (t gTx[T, B, C]) Cursor() Cursor     { return wrapCursor(t.tx.Cursor(), t.kit) }
func (t gTx[T, B, C]) Commit() error      { return t.tx.Commit() }
func (t gTx[T, B, C]) Rollback() error    { return t.tx.Rollback() }
func (t gTx[T, B, C]) Writable() bool     { return t.tx.Writable() }
func (t gTx[T, B, C]) OnCommit(fn func()) { t.tx.OnCommit(fn) }

func (b gBucket[B, C]) Bucket(name []byte) Bucket { return wrapBucket(b.b.Bucket(name), b.kit) }

func (b gBucket[B, C]) CreateBucket(name []byte) (Bucket, error) {
	c, err := b.b.CreateBucket(name)
	return wrapBucket(c, b.kit), err
}

func (b gBucket[B, C]) CreateBucketIfNotExists(name []byte) (Bucket, error) {
	c, err := b.b.CreateBucketIfNotExists(name)
	return wrapBucket(c, b.kit), err
}

func (b gBucket[B, C]) DeleteBucket(name []byte) error { return b.b.DeleteBucket(name) }

func (b gBucket[B, C]) MoveBucket(name []byte, dst Bucket) error {
	return b.b.MoveBucket(name, unwrapBucket[B, C](dst))
}

func (b gBucket[B, C]) Get(key []byte) []byte                    { return b.b.Get(key) }
func (b gBucket[B, C]) Put(key, value []byte) error              { return b.b.Put(key, value) }
func (b gBucket[B, C]) Delete(key []byte) error                  { return b.b.Delete(key) }
func (b gBucket[B, C]) Sequence() uint64                         { return b.b.Sequence() }
func (b gBucket[B, C]) SetSequence(v uint64) error               { return b.b.SetSequence(v) }
func (b gBucket[B, C]) NextSequence() (uint64, error)            { return b.b.NextSequence() }
func (b gBucket[B, C]) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }
func (b gBucket[B, C]) ForEachBucket(fn func([]byte) error) error {
	return b.b.ForEachBucket(fn)
}
func (b gBucket[B, C]) Stats() Stats                   { return b.kit.stats(b.b) }
func (b gBucket[B, C]) Cursor() Cursor                 { return wrapCursor(b.b.Cursor(), b.kit) }
func (b gBucket[B, C]) Writable() bool                 { return b.b.Writable() }
func (c gCursor[B, C]) First() ([]byte, []byte)        { return c.c.First() }
func (c gCursor[B, C]) Last() ([]byte, []byte)         { return c.c.Last() }
func (c gCursor[B, C]) Next() ([]byte, []byte)         { return c.c.Next() }
func (c gCursor[B, C]) Prev() ([]byte, []byte)         { return c.c.Prev() }
func (c gCursor[B, C]) Seek(k []byte) ([]byte, []byte) { return c.c.Seek(k) }
func (c gCursor[B, C]) Delete() error                  { return c.c.Delete() }
func (c gCursor[B, C]) Bucket() Bucket                 { return wrapBucket(c.c.Bucket(), c.kit) }

// An engine opens a database file; pageSize applies to a new file.
type engine struct {
	name string
	open func(path string, readOnly bool, pageSize int) (DB, error)
}

var boltKit = &kit[*bolt.Bucket]{stats: func(b *bolt.Bucket) Stats {
	s := b.Stats()
	return Stats{KeyN: s.KeyN, BucketN: s.BucketN}
}}

var rivetKit = &kit[*rivet.Bucket]{stats: func(b *rivet.Bucket) Stats {
	s := b.Stats()
	return Stats{KeyN: s.KeyN, BucketN: s.BucketN}
}}

// boltEngine is bbolt v1.5.0 without flushes. Its map is reserved at
// boltMapSize: bbolt remaps a growing file only once every read
// transaction has ended, and the harness keeps read transactions open
// across commits in one goroutine, which would wait for itself (see
// harness.boltTooBig). bbolt writes its whole freelist, in one run of
// pages, at every commit: fragmented by large values on 1 KiB pages, its
// file grew past 1 GiB in a 200,000-call run (rivet's: 5 MiB).
// NoFreelistSync would keep it smaller, but after a rolled-back
// transaction bbolt then rebuilds its freelist from the pages the newest
// state reaches, and hands out pages it leaked (see ruleBboltLeak) while
// an older read transaction still reads them.
var boltEngine = engine{name: "bbolt", open: func(path string, readOnly bool, pageSize int) (DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, ReadOnly: readOnly, InitialMmapSize: boltMapSize, PageSize: pageSize})
	if err != nil {
		return nil, err
	}
	return gDB[*bolt.DB, *bolt.Tx, *bolt.Bucket, *bolt.Cursor]{db, boltKit}, nil
}}

// boltMapSize is the map bbolt reserves (address space, not memory).
const boltMapSize = 1 << 30

// rivetEngine is rivet without flushes.
var rivetEngine = engine{name: "rivet", open: func(path string, readOnly bool, pageSize int) (DB, error) {
	db, err := rivet.Open(path, 0o600, &rivet.Options{NoSync: true, ReadOnly: readOnly, PageSize: pageSize})
	if err != nil {
		return nil, err
	}
	return gDB[*rivet.DB, *rivet.Tx, *rivet.Bucket, *rivet.Cursor]{db, rivetKit}, nil
}}

package main

import (
	"io"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// bucketView is a bucket of either engine, or a file's root (whose entries
// are all buckets), seen through the part of the API rivet and bbolt
// share; read commands are written once against it.
type bucketView interface {
	// ForEach calls fn for every entry in key order; nested buckets come
	// with isBucket set and a nil value.
	ForEach(fn func(k, v []byte, isBucket bool) error) error
	// Bucket returns the nested bucket name, or nil.
	Bucket(name []byte) bucketView
	// Get returns key's value; nil if absent or a bucket.
	Get(key []byte) []byte
	// Sequence returns the bucket's sequence number (0 for the root).
	Sequence() uint64
}

// fileView is a database file of either format, open read-only.
type fileView interface {
	Format() string
	// View runs fn in one read transaction on the file's root. A panic
	// inside bbolt (a damaged file) comes back as an error wrapping
	// errDamaged; rivet reports damage as an error itself.
	View(fn func(root bucketView) error) error
	Close() error
}

// openView opens path read-only in its detected format.
func openView(path string, w io.Writer) (fileView, error) {
	format, err := detectFormat(path)
	if err != nil {
		return nil, err
	}
	if format == formatBbolt {
		db, err := openBboltReadOnly(path, w)
		if err != nil {
			return nil, err
		}
		return boltFile{db}, nil
	}
	db, err := openRivetReadOnly(path, w)
	if err != nil {
		return nil, err
	}
	return rivetFile{db}, nil
}

// bucketAt walks path from root; nil if some bucket on it is missing.
func bucketAt(root bucketView, path [][]byte) bucketView {
	b := root
	for _, name := range path {
		if b = b.Bucket(name); b == nil {
			return nil
		}
	}
	return b
}

type rivetFile struct{ db *rivet.DB }

func (f rivetFile) Format() string { return formatRivet }
func (f rivetFile) Close() error   { return f.db.Close() }
func (f rivetFile) View(fn func(bucketView) error) error {
	return f.db.View(func(tx *rivet.Tx) error { return fn(rivetRoot{tx}) })
}

type rivetRoot struct{ tx *rivet.Tx }

func (r rivetRoot) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return r.tx.ForEach(func(name []byte, _ *rivet.Bucket) error { return fn(name, nil, true) })
}
func (r rivetRoot) Bucket(name []byte) bucketView {
	if b := r.tx.Bucket(name); b != nil {
		return rivetBucket{b}
	}
	return nil
}
func (r rivetRoot) Get([]byte) []byte { return nil }
func (r rivetRoot) Sequence() uint64  { return 0 }

type rivetBucket struct{ b *rivet.Bucket }

func (r rivetBucket) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return r.b.ForEach(func(k, v []byte) error { return fn(k, v, v == nil && r.b.Bucket(k) != nil) })
}
func (r rivetBucket) Bucket(name []byte) bucketView {
	if b := r.b.Bucket(name); b != nil {
		return rivetBucket{b}
	}
	return nil
}
func (r rivetBucket) Get(key []byte) []byte { return r.b.Get(key) }
func (r rivetBucket) Sequence() uint64      { return r.b.Sequence() }

type boltFile struct{ db *bolt.DB }

func (f boltFile) Format() string { return formatBbolt }
func (f boltFile) Close() error   { return f.db.Close() }
func (f boltFile) View(fn func(bucketView) error) (err error) {
	defer recoverDamage(f.db.Path(), &err)
	return f.db.View(func(tx *bolt.Tx) error { return fn(boltRoot{tx}) })
}

type boltRoot struct{ tx *bolt.Tx }

func (r boltRoot) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return r.tx.ForEach(func(name []byte, _ *bolt.Bucket) error { return fn(name, nil, true) })
}
func (r boltRoot) Bucket(name []byte) bucketView {
	if b := r.tx.Bucket(name); b != nil {
		return boltBucket{b}
	}
	return nil
}
func (r boltRoot) Get([]byte) []byte { return nil }
func (r boltRoot) Sequence() uint64  { return 0 }

type boltBucket struct{ b *bolt.Bucket }

func (r boltBucket) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return r.b.ForEach(func(k, v []byte) error { return fn(k, v, v == nil && r.b.Bucket(k) != nil) })
}
func (r boltBucket) Bucket(name []byte) bucketView {
	if b := r.b.Bucket(name); b != nil {
		return boltBucket{b}
	}
	return nil
}
func (r boltBucket) Get(key []byte) []byte { return r.b.Get(key) }
func (r boltBucket) Sequence() uint64      { return r.b.Sequence() }

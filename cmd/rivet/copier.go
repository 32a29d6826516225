package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	bolt "go.etcd.io/bbolt"
)

// destDB is the file a copy writes: rivet for import, bbolt for export.
type destDB interface {
	begin() (destTx, error)
	// sync makes every commit durable (the commits themselves do not flush).
	sync() error
	close() error
}

// destTx is a write transaction on a destDB.
type destTx interface {
	// create makes the bucket name inside parent (nil: at the top level).
	create(parent destBucket, name []byte, fill float64) (destBucket, error)
	// open returns the existing bucket name inside parent (nil: top level).
	open(parent destBucket, name []byte, fill float64) (destBucket, error)
	commit() error
	rollback()
}

// destBucket is a bucket of a destTx.
type destBucket interface {
	put(k, v []byte) error
	setSequence(seq uint64) error
}

// copier applies a canonical stream to a destDB in transactions of at most
// limit bytes of keys and values.
type copier struct {
	db      destDB
	tx      destTx
	limit   int64
	fill    float64
	size    int64 // bytes written by the current transaction
	path    [][]byte
	stack   []destBucket // stack[i] is the bucket at path[:i+1]
	entries int64
	bar     *bar
	// lenient (salvage) turns what a damaged source can hold but a rivet
	// file cannot — a bucket name twice, a key and a bucket of the same
	// name, an over-long key — into conflicts, listed, instead of errors.
	lenient   bool
	conflicts []string
	// ctx, when cancelled (Ctrl-C), stops the copy; the caller then
	// removes the partial file.
	ctx context.Context
}

// refusedEntry reports whether err is a destination's refusal of an entry
// (not a failure of the destination itself).
func refusedEntry(err error) bool {
	for _, e := range []error{rerrors.ErrBucketExists, rerrors.ErrIncompatibleValue, rerrors.ErrKeyRequired,
		rerrors.ErrKeyTooLarge, rerrors.ErrValueTooLarge, rerrors.ErrBucketNameRequired} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (c *copier) begin() (err error) {
	c.tx, err = c.db.begin()
	return err
}

func (c *copier) top() destBucket {
	if len(c.stack) == 0 {
		return nil
	}
	return c.stack[len(c.stack)-1]
}

// apply writes e. A bucket's sequence is set when it is created, so an
// empty bucket keeps it too.
func (c *copier) apply(e entry) error {
	if e.Kind == kindEnd {
		c.path, c.stack = c.path[:len(c.path)-1], c.stack[:len(c.stack)-1]
		return nil
	}
	if c.ctx != nil && c.entries%1024 == 0 && c.ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", c.ctx.Err())
	}
	n := int64(len(e.Key) + len(e.Value))
	if c.size > 0 && c.size+n > c.limit {
		if err := c.rotate(); err != nil {
			return err
		}
	}
	c.size += n
	c.entries++
	c.bar.add(1)
	if e.Kind == kindBucket {
		b, err := c.createBucket(e.Key, e.Seq)
		if err != nil {
			return err
		}
		c.path, c.stack = append(c.path, e.Key), append(c.stack, b)
		return nil
	}
	top := c.top()
	if top == nil {
		// Inside a bucket the destination refused (listed already).
		return nil
	}
	if err := top.put(e.Key, e.Value); err != nil {
		if c.lenient && refusedEntry(err) {
			c.conflicts = append(c.conflicts, fmt.Sprintf("bucket %s key %s: not written: %v", pathString(c.path), formatBytes(e.Key, fmtAuto), err))
			return nil
		}
		return fmt.Errorf("bucket %s key %s: %w", pathString(c.path), formatBytes(e.Key, fmtAuto), err)
	}
	return nil
}

// createBucket creates the bucket name in the current one. A lenient copy
// merges a name met twice into the bucket made first, and skips (nil) a
// bucket whose name a key already holds.
func (c *copier) createBucket(name []byte, seq uint64) (destBucket, error) {
	parent := c.top()
	if len(c.path) > 0 && parent == nil {
		return nil, nil
	}
	b, err := c.tx.create(parent, name, c.fill)
	if err != nil && c.lenient && errors.Is(err, rerrors.ErrBucketExists) {
		b, err = c.tx.open(parent, name, c.fill)
	}
	if err != nil {
		where := pathString(append(c.path[:len(c.path):len(c.path)], name))
		if c.lenient && refusedEntry(err) {
			c.conflicts = append(c.conflicts, fmt.Sprintf("bucket %s: not written, nor anything in it: %v", where, err))
			return nil, nil
		}
		return nil, fmt.Errorf("creating bucket %s: %w", where, err)
	}
	if seq != 0 {
		if err := b.setSequence(seq); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// rotate commits the current transaction, begins the next and reopens the
// bucket path the stream is in.
func (c *copier) rotate() error {
	if err := c.tx.commit(); err != nil {
		c.tx = nil
		return err
	}
	if err := c.begin(); err != nil {
		c.tx = nil
		return err
	}
	c.size = 0
	var parent destBucket
	for i, name := range c.path {
		if c.stack[i] == nil {
			// A refused bucket stays refused, and so does all below it.
			for j := i; j < len(c.stack); j++ {
				c.stack[j] = nil
			}
			break
		}
		b, err := c.tx.open(parent, name, c.fill)
		if err != nil {
			return fmt.Errorf("reopening bucket %s: %w", pathString(c.path[:i+1]), err)
		}
		c.stack[i], parent = b, b
	}
	return nil
}

// finish commits the last transaction and flushes the copy.
func (c *copier) finish() error {
	if err := c.tx.commit(); err != nil {
		return err
	}
	c.tx = nil
	return c.db.sync()
}

func (c *copier) abort() {
	if c.tx != nil {
		c.tx.rollback()
		c.tx = nil
	}
}

// Rivet as a destination. Durability None: a commit does not flush; the
// copy is flushed once, by sync, at the end.

type rivetDest struct{ db *rivet.DB }

func openRivetDest(path string, pageSize int) (destDB, error) {
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: pageSize, Durability: rivet.None, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	return rivetDest{db}, nil
}

func (d rivetDest) begin() (destTx, error) {
	tx, err := d.db.Begin(true)
	if err != nil {
		return nil, err
	}
	return rivetTx{tx}, nil
}
func (d rivetDest) sync() error  { return d.db.Sync() }
func (d rivetDest) close() error { return d.db.Close() }

type rivetTx struct{ tx *rivet.Tx }

func (t rivetTx) create(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *rivet.Bucket
	var err error
	if parent == nil {
		b, err = t.tx.CreateBucket(name)
	} else {
		b, err = parent.(rivetDestBucket).b.CreateBucket(name)
	}
	if err != nil {
		return nil, err
	}
	b.FillPercent = fill
	return rivetDestBucket{b}, nil
}

func (t rivetTx) open(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *rivet.Bucket
	if parent == nil {
		b = t.tx.Bucket(name)
	} else {
		b = parent.(rivetDestBucket).b.Bucket(name)
	}
	if b == nil {
		return nil, rerrors.ErrBucketNotFound
	}
	b.FillPercent = fill
	return rivetDestBucket{b}, nil
}

func (t rivetTx) commit() error { return t.tx.Commit() }
func (t rivetTx) rollback()     { _ = t.tx.Rollback() }

type rivetDestBucket struct{ b *rivet.Bucket }

func (b rivetDestBucket) put(k, v []byte) error        { return b.b.Put(k, v) }
func (b rivetDestBucket) setSequence(seq uint64) error { return b.b.SetSequence(seq) }

// bbolt as a destination: NoSync, then one Sync at the end.

type boltDest struct{ db *bolt.DB }

func openBboltDest(path string, pageSize int) (destDB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: pageSize, NoSync: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	return boltDest{db}, nil
}

func (d boltDest) begin() (destTx, error) {
	tx, err := d.db.Begin(true)
	if err != nil {
		return nil, err
	}
	return boltTx{tx}, nil
}
func (d boltDest) sync() error  { return d.db.Sync() }
func (d boltDest) close() error { return d.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) create(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *bolt.Bucket
	var err error
	if parent == nil {
		b, err = t.tx.CreateBucket(name)
	} else {
		b, err = parent.(boltDestBucket).b.CreateBucket(name)
	}
	if err != nil {
		return nil, err
	}
	b.FillPercent = fill
	return boltDestBucket{b}, nil
}

func (t boltTx) open(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *bolt.Bucket
	if parent == nil {
		b = t.tx.Bucket(name)
	} else {
		b = parent.(boltDestBucket).b.Bucket(name)
	}
	if b == nil {
		return nil, errors.New("bucket not found")
	}
	b.FillPercent = fill
	return boltDestBucket{b}, nil
}

func (t boltTx) commit() error { return t.tx.Commit() }
func (t boltTx) rollback()     { _ = t.tx.Rollback() }

type boltDestBucket struct{ b *bolt.Bucket }

func (b boltDestBucket) put(k, v []byte) error        { return b.b.Put(k, v) }
func (b boltDestBucket) setSequence(seq uint64) error { return b.b.SetSequence(seq) }

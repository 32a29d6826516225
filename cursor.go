package rivet

import (
	"bytes"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/journal"
	"github.com/rivetkv/rivet/internal/page"
)

// Cursor iterates over a bucket's keys in bytewise order. Keys and values it
// returns are valid only for the life of the transaction. Changing the
// bucket while iterating is allowed: after Delete (or a Put or Delete
// through the bucket) the next move continues from where the cursor was.
// Nested buckets appear with a nil value.
type Cursor struct {
	bucket *Bucket
	c      btree.Cursor // embedded: one allocation per cursor
}

// Cursor returns a cursor over the bucket. It is valid while the
// transaction is open; once it has ended, every move returns nil.
//
// Cursor is small enough to inline, so a cursor that its caller does not
// keep (etcd's backend opens one per key it reads) can live on the
// caller's stack instead of the heap.
func (b *Bucket) Cursor() *Cursor {
	c := new(Cursor)
	c.init(b)
	return c
}

// init makes c a fresh cursor over b (one that never moves if b's
// transaction has ended). It is apart from Cursor to keep that one within
// the inlining budget; it keeps no pointer to c.
func (c *Cursor) init(b *Bucket) {
	c.bucket = b
	if !b.ended() {
		b.tree.InitCursor(&c.c)
	}
}

// Bucket returns the bucket the cursor iterates.
func (c *Cursor) Bucket() *Bucket { return c.bucket }

// ret turns the tree's element into the key and value the API returns: a
// plain value (ok, flags 0) as is, tested inline by each move so that the
// common step costs no call; here nil, nil for no element, a nil value for
// a nested bucket and a blob's bytes.
func (c *Cursor) ret(k, v []byte, flags uint32, ok bool) ([]byte, []byte) {
	if !ok {
		return nil, nil
	}
	if flags == page.FlagBucket {
		return k, nil
	}
	if btree.IsBlob(flags) {
		val, err := c.bucket.tree.Value(v, flags)
		if err != nil {
			return nil, nil
		}
		return k, val
	}
	return k, v
}

// live reports whether the cursor may move: it belongs to a bucket of an
// open transaction (not a zero Cursor, nor one of an ended transaction).
func (c *Cursor) live() bool { return c.bucket != nil && !c.bucket.ended() }

// First moves to the first key and returns it with its value; nil, nil if
// the bucket is empty.
func (c *Cursor) First() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	k, v, f, ok := c.c.First()
	if ok && f == 0 {
		return k, v
	}
	return c.ret(k, v, f, ok)
}

// Last moves to the last key.
func (c *Cursor) Last() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	k, v, f, ok := c.c.Last()
	if ok && f == 0 {
		return k, v
	}
	return c.ret(k, v, f, ok)
}

// Next moves to the next key; nil, nil past the end.
func (c *Cursor) Next() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	k, v, f, ok := c.c.Next()
	if ok && f == 0 {
		return k, v
	}
	return c.ret(k, v, f, ok)
}

// Prev moves to the previous key; nil, nil before the start.
func (c *Cursor) Prev() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	k, v, f, ok := c.c.Prev()
	if ok && f == 0 {
		return k, v
	}
	return c.ret(k, v, f, ok)
}

// Seek moves to key, or to the next key if key does not exist.
func (c *Cursor) Seek(seek []byte) (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	k, v, f, ok := c.c.Seek(seek)
	if ok && f == 0 {
		return k, v
	}
	return c.ret(k, v, f, ok)
}

// Delete removes the key under the cursor. It fails with
// ErrIncompatibleValue on a nested bucket (use DeleteBucket).
func (c *Cursor) Delete() error {
	if c.bucket == nil {
		return ErrTxClosed
	}
	if err := c.bucket.checkWrite(); err != nil {
		return err
	}
	var key []byte
	if c.bucket.tx.journaling {
		if k, _, _, ok := c.c.Current(); ok {
			key = bytes.Clone(k)
		}
	}
	refused, err := c.c.DeleteUnless(page.FlagBucket)
	if refused {
		return ErrIncompatibleValue
	}
	if err == nil && key != nil {
		c.bucket.logKey(journal.OpDelete, key, nil)
	}
	return err
}

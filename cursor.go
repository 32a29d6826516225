package rivet

import (
	"github.com/rivetkv/rivet/internal/btree"
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
// transaction is open.
func (b *Bucket) Cursor() *Cursor {
	c := &Cursor{bucket: b}
	b.tree.InitCursor(&c.c)
	return c
}

// Bucket returns the bucket the cursor iterates.
func (c *Cursor) Bucket() *Bucket { return c.bucket }

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

func (c *Cursor) live() bool { return c.bucket.tx.db != nil }

// First moves to the first key and returns it with its value; nil, nil if
// the bucket is empty.
func (c *Cursor) First() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	return c.ret(c.c.First())
}

// Last moves to the last key.
func (c *Cursor) Last() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	return c.ret(c.c.Last())
}

// Next moves to the next key; nil, nil past the end.
func (c *Cursor) Next() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	return c.ret(c.c.Next())
}

// Prev moves to the previous key; nil, nil before the start.
func (c *Cursor) Prev() (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	return c.ret(c.c.Prev())
}

// Seek moves to key, or to the next key if key does not exist.
func (c *Cursor) Seek(seek []byte) (key []byte, value []byte) {
	if !c.live() {
		return nil, nil
	}
	return c.ret(c.c.Seek(seek))
}

// Delete removes the key under the cursor. It fails with
// ErrIncompatibleValue on a nested bucket (use DeleteBucket).
func (c *Cursor) Delete() error {
	if err := c.bucket.checkWrite(); err != nil {
		return err
	}
	k, _, flags, ok := c.c.Current()
	if !ok {
		return nil
	}
	if flags == page.FlagBucket {
		return ErrIncompatibleValue
	}
	_ = k
	return c.c.Delete()
}

package rivet

import (
	"bytes"
	"fmt"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/journal"
	"github.com/rivetkv/rivet/internal/page"
)

// Bucket is a collection of key/value pairs and nested buckets, with keys
// in bytewise order.
type Bucket struct {
	// FillPercent is how full split pages are packed; raise it (up to 1.0)
	// for workloads that insert mostly in key order. Set it on each
	// transaction's Bucket: it is read when the transaction commits, as in
	// bbolt. A node that received only appends after its last key in the
	// transaction is packed full whatever FillPercent says (docs/design.md
	// §2.4), so sequences and logs need no setting.
	FillPercent float64

	tx        *Tx
	tree      *btree.Tree // points to treeStore
	treeStore btree.Tree
	parent    *Bucket
	name      []byte
	isRoot    bool
	depth     int // nesting level: 0 for the top level
	sequence  uint64
	seqDirty  bool
	buckets   childCache // child buckets opened in this transaction
	// deleted is set when the bucket, or one it is nested in, was deleted
	// in this transaction. Its tree is no longer part of the file, and
	// its pages are freed: writing through it (bbolt panics there) would
	// put nothing anywhere, and a bucket moved out of it would refer to
	// freed pages, so writes return ErrBucketNotFound.
	deleted bool
}

// Tx returns the bucket's transaction.
func (b *Bucket) Tx() *Tx { return b.tx }

// Writable reports whether the bucket belongs to a write transaction.
func (b *Bucket) Writable() bool { return b.tx != nil && b.tx.writable }

// Root returns the id of the bucket tree's root page (0 for an empty bucket).
func (b *Bucket) Root() Pgid {
	if b.tree == nil {
		return 0
	}
	return Pgid(b.tree.Root().ID)
}

// ended reports whether the bucket's transaction has ended (or the bucket
// is a zero Bucket): its methods then return ErrTxClosed, or nil.
func (b *Bucket) ended() bool { return b == nil || b.tx.ended() }

func (b *Bucket) checkOpen() error {
	if b.ended() {
		return ErrTxClosed
	}
	return nil
}

func (b *Bucket) checkWrite() error {
	if b.ended() {
		return ErrTxClosed
	}
	if !b.tx.writable {
		return ErrTxNotWritable
	}
	if b.deleted {
		return ErrBucketNotFound
	}
	return nil
}

// Bucket returns the nested bucket name, or nil if there is none.
func (b *Bucket) Bucket(name []byte) *Bucket {
	if b.ended() {
		return nil
	}
	if c := b.buckets.get(name); c != nil {
		return c
	}
	v, flags, found := b.tree.Get(name)
	if !found || flags != page.FlagBucket {
		return nil
	}
	rec, err := page.DecodeBucketRecord(b.tree.Root().ID, v)
	if err != nil {
		b.tx.env.Err = firstErr(b.tx.env.Err, err)
		return nil
	}
	return b.openChild(name, rec)
}

// guardErr turns the tree's refusal to overwrite or delete a bucket record
// through a value operation into bbolt's error.
func guardErr(err error) error {
	if err == btree.ErrGuarded {
		return ErrIncompatibleValue
	}
	return err
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (b *Bucket) openChild(name []byte, rec page.BucketRecord) *Bucket {
	if b.depth >= btree.MaxNesting {
		// Only a corrupt file (bucket records that form a cycle) nests
		// this deep: CreateBucket refuses to.
		b.tx.env.Err = firstErr(b.tx.env.Err, page.Corruptf(rec.Root.ID, "buckets nested deeper than %d (cycle?)", btree.MaxNesting))
		return nil
	}
	c := &Bucket{
		depth:       b.depth + 1,
		FillPercent: DefaultFillPercent,
		tx:          b.tx,
		parent:      b,
		name:        bytes.Clone(name),
		sequence:    rec.Sequence,
		deleted:     b.deleted,
	}
	if rec.Inline != nil {
		// Invariant: an inline record here was decoded by
		// DecodeBucketRecord, which validated it (CreateBucket's
		// record is never inline).
		c.treeStore.InitInline(b.tx.env, page.ValidInlineLeaf(rec.Inline))
	} else {
		c.treeStore.Init(b.tx.env, rec.Root)
	}
	c.tree = &c.treeStore
	b.buckets.put(c)
	return c
}

// CreateBucket creates a nested bucket. It fails with ErrBucketExists if the
// bucket exists, ErrIncompatibleValue if a value has that key and
// ErrBucketNameRequired for an empty name. As in bbolt, a name may be
// longer than MaxKeySize, which bounds the keys of values only.
func (b *Bucket) CreateBucket(name []byte) (*Bucket, error) {
	if err := b.checkWrite(); err != nil {
		return nil, err
	}
	if len(name) == 0 {
		return nil, ErrBucketNameRequired
	}
	if b.depth >= btree.MaxNesting {
		return nil, fmt.Errorf("rivet: buckets nest at most %d deep", btree.MaxNesting)
	}
	if _, flags, found := b.tree.Get(name); found {
		if flags == page.FlagBucket {
			return nil, ErrBucketExists
		}
		return nil, ErrIncompatibleValue
	}
	if err := b.tx.env.Err; err != nil {
		return nil, err
	}
	rec := page.BucketRecord{}
	if err := b.tree.Put(name, rec.Encode(), page.FlagBucket, 0); err != nil {
		return nil, err
	}
	b.logKey(journal.OpCreateBucket, name, nil)
	return b.openChild(name, rec), nil
}

// CreateBucketIfNotExists returns the nested bucket name, creating it if needed.
func (b *Bucket) CreateBucketIfNotExists(name []byte) (*Bucket, error) {
	if err := b.checkWrite(); err != nil {
		return nil, err
	}
	if len(name) == 0 {
		return nil, ErrBucketNameRequired
	}
	if c := b.Bucket(name); c != nil {
		return c, nil
	}
	if err := b.tx.env.Err; err != nil {
		return nil, err
	}
	return b.CreateBucket(name)
}

// childRecord returns the raw bucket record of the nested bucket name:
// ErrBucketNotFound if there is no such key, ErrIncompatibleValue if it
// holds a value, or the corruption met looking for it.
//
// An empty name in an empty bucket is ErrIncompatibleValue, as in bbolt
// v1.5: its search finds no element, its byte comparison takes the missing
// key for a match with the empty name, and the missing element has no
// bucket flag. Storage conformance suites (wallet drivers') check that
// answer of DeleteBucket(nil).
func (b *Bucket) childRecord(name []byte) ([]byte, error) {
	v, flags, found := b.tree.Get(name)
	if err := b.tx.env.Err; err != nil {
		return nil, err
	}
	if !found && len(name) == 0 {
		_, _, _, any := b.tree.Cursor().First()
		if err := b.tx.env.Err; err != nil {
			return nil, err
		}
		if !any {
			return nil, ErrIncompatibleValue
		}
	}
	if !found {
		return nil, ErrBucketNotFound
	}
	if flags != page.FlagBucket {
		return nil, ErrIncompatibleValue
	}
	return v, nil
}

// DeleteBucket deletes the nested bucket name and everything in it.
func (b *Bucket) DeleteBucket(name []byte) error {
	if err := b.checkWrite(); err != nil {
		return err
	}
	if _, err := b.childRecord(name); err != nil {
		return err
	}
	child := b.Bucket(name)
	if child == nil {
		return firstErr(b.tx.env.Err, ErrBucketNotFound)
	}
	if err := child.freeContents(); err != nil {
		return err
	}
	child.detach()
	b.buckets.remove(name)
	if _, err := b.tree.Delete(name, 0); err != nil {
		return err
	}
	b.logKey(journal.OpDeleteBucket, name, nil)
	return nil
}

// freeContents frees every committed page that b and the buckets nested in
// it now own, for DeleteBucket: b's own committed tree (its nodes and
// blobs; what this transaction wrote has no pages before commit), and each
// bucket b holds now — through its object if this transaction opened it,
// since buckets may have been moved into or out of it, or deleted, else its
// whole committed tree, in which nothing can have changed. A bucket moved
// out of b earlier in the transaction is no longer in b and keeps its
// pages; one moved in is freed with b; one deleted was freed then.
//
// The frees are made at once, not at commit: b's tree is discarded and
// never spills. The pages stay readable until the transaction ends (a
// transaction never reuses what it freed), which reads through a deleted
// bucket's handle rely on.
func (b *Bucket) freeContents() error {
	env := b.tx.env
	if len(b.buckets.list) == 0 && !b.tree.Dirty() {
		// Nothing in b was opened or changed: it is as committed.
		return btree.FreeAll(env, b.tree.Root())
	}
	if err := btree.FreeOwn(env, b.tree.Root()); err != nil {
		return err
	}
	c := b.tree.Cursor()
	for k, v, flags, ok := c.First(); ok; k, v, flags, ok = c.Next() {
		if flags != page.FlagBucket {
			continue
		}
		if child := b.buckets.get(k); child != nil {
			if err := child.freeContents(); err != nil {
				return err
			}
			continue
		}
		rec, err := page.DecodeBucketRecord(b.tree.Root().ID, v)
		if err != nil {
			env.Err = firstErr(env.Err, err)
			return err
		}
		if err := btree.FreeAll(env, rec.Root); err != nil {
			return err
		}
	}
	return env.Err
}

// detach marks a deleted bucket object, and the nested ones opened through
// it, deleted (see Bucket.deleted) and drops its cached children; its tree
// is discarded with it.
func (b *Bucket) detach() {
	for _, c := range b.buckets.list {
		c.detach()
	}
	b.buckets = childCache{}
	b.deleted = true
}

// MoveBucket moves the nested bucket name from b into dst, keeping its
// contents and any changes made to it earlier in the transaction. Errors,
// in bbolt's order: ErrTxClosed if either bucket's transaction has ended,
// ErrTxNotWritable if either is read-only, ErrDifferentDB if they belong
// to different transactions, ErrBucketNotFound if either was deleted in
// this transaction (bbolt panics), ErrBucketNotFound or ErrIncompatibleValue if
// name is not a nested bucket of b, ErrSameBuckets if b is dst,
// ErrBucketExists or ErrIncompatibleValue if dst already has the key, and
// ErrIncompatibleValue if dst is the bucket itself or inside it (bbolt
// moves it there, where nothing reaches it).
func (b *Bucket) MoveBucket(name []byte, dst *Bucket) error {
	if b.ended() || dst.ended() {
		return ErrTxClosed
	}
	if !b.tx.writable || !dst.tx.writable {
		return ErrTxNotWritable
	}
	if dst.tx != b.tx {
		return errDifferentDB
	}
	if b.deleted || dst.deleted {
		return ErrBucketNotFound
	}
	v, err := b.childRecord(name)
	if err != nil {
		return err
	}
	if b == dst {
		return errSameBuckets
	}
	child := b.Bucket(name)
	if child == nil {
		return firstErr(b.tx.env.Err, ErrBucketNotFound)
	}
	if _, f, exists := dst.tree.Get(name); exists {
		if f == page.FlagBucket {
			return ErrBucketExists
		}
		return ErrIncompatibleValue
	}
	// Last, as bbolt has no such check: where it answers, rivet answers the
	// same; where it would move the bucket into itself (and lose it),
	// rivet refuses.
	for p := dst; p != nil; p = p.parent {
		if p == child {
			return fmt.Errorf("%w: cannot move a bucket into itself", ErrIncompatibleValue)
		}
	}
	if err := dst.tree.Put(name, bytes.Clone(v), page.FlagBucket, 0); err != nil {
		return err
	}
	if _, err := b.tree.Delete(name, 0); err != nil {
		return err
	}
	b.logMove(name, dst)
	b.buckets.remove(name)
	child.parent = dst
	child.depth = dst.depth + 1
	child.seqDirty = true // make sure the record is rewritten in dst at commit
	dst.buckets.put(child)
	return nil
}

// Get returns the value of key, or nil if the key does not exist or names
// a nested bucket. The value is valid only for the life of the transaction.
func (b *Bucket) Get(key []byte) []byte {
	if b.ended() {
		return nil
	}
	v, flags, found := b.tree.Get(key)
	if !found || flags == page.FlagBucket {
		return nil
	}
	if btree.IsBlob(flags) {
		val, err := b.tree.Value(v, flags)
		if err != nil {
			return nil
		}
		return val
	}
	return v
}

// Put sets key to value. The key is copied; the value must stay unchanged
// until the transaction ends (as in bbolt). A nil value is stored as an
// empty one; until the transaction commits, Get and cursors return it as
// nil, as bbolt's do.
func (b *Bucket) Put(key, value []byte) error {
	if err := b.checkWrite(); err != nil {
		return err
	}
	if len(key) == 0 {
		return ErrKeyRequired
	}
	if len(key) > MaxKeySize {
		return ErrKeyTooLarge
	}
	if int64(len(value)) > MaxValueSize {
		return ErrValueTooLarge
	}
	// Invariant: a nil value is kept as nil until commit, so that reads in
	// the same transaction return nil, as bbolt's do; the committed value
	// reads back empty and not nil.
	if err := b.tree.Put(key, value, 0, page.FlagBucket); err != nil {
		return guardErr(err)
	}
	b.logKey(journal.OpPut, key, value)
	return nil
}

// Delete removes key. Deleting a missing key is not an error; deleting a
// nested bucket's key is ErrIncompatibleValue.
func (b *Bucket) Delete(key []byte) error {
	if err := b.checkWrite(); err != nil {
		return err
	}
	if _, err := b.tree.Delete(key, page.FlagBucket); err != nil {
		return guardErr(err)
	}
	b.logKey(journal.OpDelete, key, nil)
	return nil
}

// Sequence returns the bucket's sequence number.
func (b *Bucket) Sequence() uint64 { return b.sequence }

// SetSequence sets the bucket's sequence number.
func (b *Bucket) SetSequence(v uint64) error {
	if err := b.checkWrite(); err != nil {
		return err
	}
	if b.isRoot {
		return fmt.Errorf("rivet: the top level has no sequence")
	}
	b.sequence = v
	b.seqDirty = true
	b.logSequence()
	return nil
}

// NextSequence increments and returns the bucket's sequence number.
func (b *Bucket) NextSequence() (uint64, error) {
	if err := b.checkWrite(); err != nil {
		return 0, err
	}
	if b.isRoot {
		return 0, fmt.Errorf("rivet: the top level has no sequence")
	}
	b.sequence++
	b.seqDirty = true
	b.logSequence()
	return b.sequence, nil
}

// ForEach calls fn for every key in order; v is nil for nested buckets. fn
// must not change the bucket. An error from fn stops the walk and is returned.
func (b *Bucket) ForEach(fn func(k, v []byte) error) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return b.tx.env.Err
}

// ForEachBucket calls fn for every nested bucket's name, in order.
func (b *Bucket) ForEachBucket(fn func(k []byte) error) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	c := b.tree.Cursor()
	for k, _, flags, ok := c.First(); ok; k, _, flags, ok = c.Next() {
		if flags != page.FlagBucket {
			continue
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	return b.tx.env.Err
}

// spill writes the bucket's changed descendants and then its own tree. It
// reports whether anything in the bucket changed, so the parent knows to
// rewrite its record.
func (b *Bucket) spill() (bool, error) {
	changed := b.seqDirty
	for _, c := range b.buckets.list {
		name := c.name
		cc, err := c.spill()
		if err != nil {
			return false, err
		}
		if !cc {
			continue
		}
		rec := page.BucketRecord{Root: c.tree.Root(), Sequence: c.sequence, Inline: c.tree.Inline()}
		if err := b.tree.Put(name, rec.Encode(), page.FlagBucket, 0); err != nil {
			return false, err
		}
	}
	if b.tree.Dirty() {
		changed = true
		b.tree.FillPercent = b.FillPercent
		if err := b.tree.Rebalance(); err != nil {
			return false, err
		}
		spill := b.tree.Spill
		if !b.isRoot {
			spill = func() error { return b.tree.SpillInline(b.tx.env.PageSize / inlineBucketFraction) }
		}
		if err := spill(); err != nil {
			return false, err
		}
	}
	b.seqDirty = false
	return changed, nil
}

// inlineBucketFraction sets the largest inline bucket: a nested bucket
// whose content is one leaf of plain values of at most page size /
// inlineBucketFraction bytes is stored inside its parent's leaf instead of
// in a page of its own (bbolt's inline buckets, bbolt's limit). Without
// them a bucket of two small keys took a whole page: 100,000 such buckets
// made a 416 MiB file where bbolt's is 65 MiB.
const inlineBucketFraction = 4

// childCache holds the child buckets a transaction opened, by name. Most
// buckets have few children open at once, so it is a slice (no allocation
// for a lookup, one small one for the first child) and adds a map index
// only past a handful of entries.
type childCache struct {
	list  []*Bucket
	index map[string]*Bucket
}

const childCacheIndexAt = 16

func (c *childCache) get(name []byte) *Bucket {
	if c.index != nil {
		return c.index[string(name)]
	}
	for _, b := range c.list {
		if bytes.Equal(b.name, name) {
			return b
		}
	}
	return nil
}

func (c *childCache) put(b *Bucket) {
	c.list = append(c.list, b)
	if c.index != nil {
		c.index[string(b.name)] = b
	} else if len(c.list) > childCacheIndexAt {
		c.index = make(map[string]*Bucket, len(c.list))
		for _, x := range c.list {
			c.index[string(x.name)] = x
		}
	}
}

func (c *childCache) remove(name []byte) {
	for i, b := range c.list {
		if bytes.Equal(b.name, name) {
			c.list = append(c.list[:i], c.list[i+1:]...)
			break
		}
	}
	if c.index != nil {
		delete(c.index, string(name))
	}
}

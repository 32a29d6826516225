package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// The interfaces below are the slice of bbolt's API the workloads use,
// written generically so that one adapter (kvDB) serves every engine with a
// bbolt-shaped API: bbolt itself and rivet, whose API is bbolt's by design.
// Sharing the adapter is a fairness rule, not only less code: the two engines
// run exactly the same loop around exactly the same calls.

// cursorAPI is the part of *bbolt.Cursor the scans use.
type cursorAPI interface {
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	First() (key, value []byte)
	Last() (key, value []byte)
}

// bucketAPI is the part of *bbolt.Bucket the workloads use; B is the
// bucket type itself (nested buckets).
type bucketAPI[B any, C cursorAPI] interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	Cursor() C
	CreateBucketIfNotExists(name []byte) (B, error)
}

// txAPI is the part of *bbolt.Tx the workloads use.
type txAPI[B bucketAPI[B, C], C cursorAPI] interface {
	Bucket(name []byte) B
	CreateBucketIfNotExists(name []byte) (B, error)
	WriteTo(w io.Writer) (int64, error)
	Size() int64
}

// dbAPI is the part of *bbolt.DB the workloads use.
type dbAPI[T txAPI[B, C], B bucketAPI[B, C], C cursorAPI] interface {
	Update(fn func(T) error) error
	Batch(fn func(T) error) error
	View(fn func(T) error) error
	Close() error
}

// kvDB adapts a bbolt-shaped database to DB.
type kvDB[D dbAPI[T, B, C], T txAPI[B, C], B bucketAPI[B, C], C cursorAPI] struct {
	db D
	// counters reads the engine's cumulative I/O counters; engine specific
	// because the Stats types differ.
	counters func() Counters
}

// openKV wraps db and, unless readOnly, makes sure BucketName exists.
func openKV[D dbAPI[T, B, C], T txAPI[B, C], B bucketAPI[B, C], C cursorAPI](db D, readOnly bool, counters func() Counters) (*kvDB[D, T, B, C], error) {
	k := &kvDB[D, T, B, C]{db: db, counters: counters}
	if readOnly {
		return k, nil
	}
	// Look before creating: an Update is a durable commit, and a reopen
	// timed by a workload must measure Open, not an extra fsync.
	exists := false
	err := db.View(func(tx T) error {
		_, err := k.bucket(tx, BucketName)
		exists = err == nil
		return nil
	})
	if err == nil && !exists {
		err = db.Update(func(tx T) error {
			_, err := tx.CreateBucketIfNotExists(BucketName)
			return err
		})
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("creating bucket: %w", err)
	}
	return k, nil
}

// bucket returns the named bucket, or an error rather than the nil pointer
// bbolt returns, which would otherwise panic deep inside the engine.
func (k *kvDB[D, T, B, C]) bucket(tx T, name []byte) (B, error) {
	b := tx.Bucket(name)
	var none B
	if any(b) == any(none) {
		return b, fmt.Errorf("bucket %q not found", name)
	}
	return b, nil
}

// Update implements DB.
func (k *kvDB[D, T, B, C]) Update(bucket []byte, kvs []KV) error {
	return k.db.Update(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if err := b.Put(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpdateBuckets implements DB.
func (k *kvDB[D, T, B, C]) UpdateBuckets(batches []BucketKVs) error {
	return k.db.Update(func(tx T) error { return putBatches(tx.CreateBucketIfNotExists, batches) })
}

// UpdateNested implements NestedUpdater.
func (k *kvDB[D, T, B, C]) UpdateNested(parent []byte, batches []BucketKVs) error {
	return k.db.Update(func(tx T) error {
		p, err := tx.CreateBucketIfNotExists(parent)
		if err != nil {
			return err
		}
		return putBatches(p.CreateBucketIfNotExists, batches)
	})
}

// putBatches puts each batch into the bucket create returns for its name.
func putBatches[B bucketAPI[B, C], C cursorAPI](create func(name []byte) (B, error), batches []BucketKVs) error {
	for _, bk := range batches {
		b, err := create(bk.Bucket)
		if err != nil {
			return err
		}
		for _, kv := range bk.KVs {
			if err := b.Put(kv.Key, kv.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// Batch implements Batcher with the engine's DB.Batch: concurrent callers'
// functions are combined into one transaction.
func (k *kvDB[D, T, B, C]) Batch(bucket []byte, kvs []KV) error {
	return k.db.Batch(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if err := b.Put(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

// Delete implements DB.
func (k *kvDB[D, T, B, C]) Delete(bucket []byte, keys [][]byte) error {
	return k.db.Update(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		for _, key := range keys {
			if err := b.Delete(key); err != nil {
				return err
			}
		}
		return nil
	})
}

// Get implements DB.
func (k *kvDB[D, T, B, C]) Get(bucket []byte, keys [][]byte) (found int, err error) {
	err = k.db.View(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		for _, key := range keys {
			if b.Get(key) != nil {
				found++
			}
		}
		return nil
	})
	return found, err
}

// Scan implements DB.
func (k *kvDB[D, T, B, C]) Scan(bucket []byte, starts [][]byte, n int) (pairs int, err error) {
	err = k.db.View(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		for _, start := range starts {
			c := b.Cursor()
			key, _ := c.Seek(start)
			for i := 0; key != nil && i < n; i++ {
				pairs++
				key, _ = c.Next()
			}
		}
		return nil
	})
	return pairs, err
}

// Short transaction shapes (ShortTxns): what a raft log store does on
// every append and election, and what a web handler's lookup costs.
const (
	ShortEmpty = "empty View"
	ShortGet   = "View + Get"
	ShortFirst = "View + cursor First"
	ShortLast  = "View + cursor Last"
)

// ShortTxns runs n read transactions of shape on bucket, each looking up
// key (ShortGet) or positioning a new cursor (ShortFirst, ShortLast). The
// loop is here, in the adapter both engines share, so that both run the
// same code around the same calls; one closure serves all n.
func (k *kvDB[D, T, B, C]) ShortTxns(shape string, bucket, key []byte, n int) error {
	var fn func(T) error
	switch shape {
	case ShortEmpty:
		fn = func(T) error { return nil }
	case ShortGet:
		fn = func(tx T) error {
			if tx.Bucket(bucket).Get(key) == nil {
				return fmt.Errorf("key %x not found", key)
			}
			return nil
		}
	case ShortFirst:
		fn = func(tx T) error {
			if k, _ := tx.Bucket(bucket).Cursor().First(); k == nil {
				return fmt.Errorf("empty bucket")
			}
			return nil
		}
	case ShortLast:
		fn = func(tx T) error {
			if k, _ := tx.Bucket(bucket).Cursor().Last(); k == nil {
				return fmt.Errorf("empty bucket")
			}
			return nil
		}
	default:
		return fmt.Errorf("unknown short transaction shape %q", shape)
	}
	for range n {
		if err := k.db.View(fn); err != nil {
			return err
		}
	}
	return nil
}

// ValueChecker is implemented by DBs that can compare a stored value with
// the expected bytes (rivet and bbolt): large-value uses it to verify a
// value of hundreds of MiB without asking either engine for more than its
// own Get does.
type ValueChecker interface {
	// ValueEquals reports whether the value under key in bucket is want,
	// in one read transaction.
	ValueEquals(bucket, key, want []byte) (bool, error)
}

// ValueEquals implements ValueChecker. bbolt's Get returns a slice of its
// memory map, rivet's a copy for values above 16 MiB: each engine's own Get
// is what is measured.
func (k *kvDB[D, T, B, C]) ValueEquals(bucket, key, want []byte) (equal bool, err error) {
	err = k.db.View(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		equal = bytes.Equal(b.Get(key), want)
		return nil
	})
	return equal, err
}

// Snapshotter is implemented by DBs that can write a consistent copy of
// themselves while in use (Tx.WriteTo: rivet and bbolt).
type Snapshotter interface {
	// WriteSnapshot writes the state one read transaction sees to w.
	// started, if not nil, is called with the size of that state in bytes
	// (Tx.Size) once the transaction has begun and before the copy is
	// written: what is committed after it is not in the copy.
	WriteSnapshot(w io.Writer, started func(size int64)) (int64, error)
}

// WriteSnapshot implements Snapshotter with Tx.WriteTo.
func (k *kvDB[D, T, B, C]) WriteSnapshot(w io.Writer, started func(size int64)) (n int64, err error) {
	err = k.db.View(func(tx T) error {
		if started != nil {
			started(tx.Size())
		}
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// Digester is implemented by DBs that can summarise a bucket's content, so
// that two files can be compared (a snapshot with its source).
type Digester interface {
	// Digest returns the number of pairs in bucket and a SHA-256 over them
	// (each key and value with its length) in key order, from one read
	// transaction.
	Digest(bucket []byte) (pairs int, sum [sha256.Size]byte, err error)
}

// Digest implements Digester.
func (k *kvDB[D, T, B, C]) Digest(bucket []byte) (pairs int, sum [sha256.Size]byte, err error) {
	h := sha256.New()
	err = k.db.View(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		var n [8]byte
		c := b.Cursor()
		for key, v := c.First(); key != nil; key, v = c.Next() {
			for _, part := range [][]byte{key, v} {
				binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
				h.Write(n[:])
				h.Write(part)
			}
			pairs++
		}
		return nil
	})
	copy(sum[:], h.Sum(nil))
	return pairs, sum, err
}

// Counters implements DB.
func (k *kvDB[D, T, B, C]) Counters() Counters { return k.counters() }

// Close implements DB.
func (k *kvDB[D, T, B, C]) Close() error { return k.db.Close() }

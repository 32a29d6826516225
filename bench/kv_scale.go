package bench

import "errors"

// What the compaction-scale workload needs from a DB beyond DB: etcd's
// transactions mix deletes in one bucket with a put in another, and the
// figures after compaction walk the whole file. kvDB implements all of it
// for both bbolt-shaped engines, so the two run the same loops.

// BucketDeletes is the part of a mixed update that deletes keys from one
// bucket.
type BucketDeletes struct {
	Bucket []byte
	Keys   [][]byte
}

// MixedUpdater is implemented by DBs that can delete and put in several
// buckets in one transaction, as etcd's compaction does (deleting old
// revisions and recording its progress in the meta bucket).
type MixedUpdater interface {
	// UpdateMixed deletes every key of deletes, then puts every pair of
	// puts (creating buckets that do not exist yet), in one durable write
	// transaction.
	UpdateMixed(deletes []BucketDeletes, puts []BucketKVs) error
}

// SpaceCounter is implemented by DBs that can count the bytes they hold.
type SpaceCounter interface {
	// LiveBytes returns the sum of len(key)+len(value) over every pair of
	// every top-level bucket, in one read transaction. Nested buckets are
	// counted by their name only.
	LiveBytes() (int64, error)
}

// ValueScanner is implemented by DBs that can read every value of a
// bucket in key order.
type ValueScanner interface {
	// SumValues walks bucket with a cursor from First to the end in one
	// read transaction, reading every byte of every value, and returns the
	// pairs seen and the sum of the value bytes.
	SumValues(bucket []byte) (pairs int64, sum uint64, err error)
}

// UpdateMixed implements MixedUpdater.
func (k *kvDB[D, T, B, C]) UpdateMixed(deletes []BucketDeletes, puts []BucketKVs) error {
	return k.db.Update(func(tx T) error {
		for _, d := range deletes {
			b, err := k.bucket(tx, d.Bucket)
			if err != nil {
				return err
			}
			for _, key := range d.Keys {
				if err := b.Delete(key); err != nil {
					return err
				}
			}
		}
		return putBatches(tx.CreateBucketIfNotExists, puts)
	})
}

// LiveBytes implements SpaceCounter.
func (k *kvDB[D, T, B, C]) LiveBytes() (n int64, err error) {
	err = k.db.View(func(tx T) error {
		// Both engines' Tx has bbolt's ForEach; txAPI leaves it out because
		// no other workload lists buckets.
		lister, ok := any(tx).(interface {
			ForEach(fn func(name []byte, b B) error) error
		})
		if !ok {
			return errors.New("this engine's transactions cannot list their buckets")
		}
		return lister.ForEach(func(_ []byte, b B) error {
			c := b.Cursor()
			for key, v := c.First(); key != nil; key, v = c.Next() {
				n += int64(len(key) + len(v))
			}
			return nil
		})
	})
	return n, err
}

// SumValues implements ValueScanner.
func (k *kvDB[D, T, B, C]) SumValues(bucket []byte) (pairs int64, sum uint64, err error) {
	err = k.db.View(func(tx T) error {
		b, err := k.bucket(tx, bucket)
		if err != nil {
			return err
		}
		c := b.Cursor()
		for key, v := c.First(); key != nil; key, v = c.Next() {
			for _, x := range v {
				sum += uint64(x)
			}
			pairs++
		}
		return nil
	})
	return pairs, sum, err
}

// CompactionCounter is implemented by DBs that count their online
// compaction's work (rivet's Stats).
type CompactionCounter interface {
	// CompactionCounts returns the write transactions compaction has
	// committed and the pages it rewrote, cumulative since Open.
	CompactionCounts() (steps, pages int64)
}

// CompactionCounts implements CompactionCounter with rivet's
// Stats.CompactSteps and Stats.CompactPagesRewritten.
func (r rivetKV) CompactionCounts() (steps, pages int64) {
	s := r.db.Stats()
	return s.CompactSteps, s.CompactPagesRewritten
}

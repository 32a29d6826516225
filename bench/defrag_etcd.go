package bench

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// EtcdDefragmenter is implemented by engines that can defragment an open
// DB the way etcd's backend defragments bbolt (etcd #9222, #20952): copy
// every bucket into a new file, a fixed number of keys per transaction,
// close both, rename the copy over the original and open it again. The
// application can neither read nor write meanwhile.
type EtcdDefragmenter interface {
	// DefragEtcd defragments db, committing the copy every keysPerTxn
	// keys, and returns the DB opened on the new file (db is closed).
	// On an error before db was closed, db is returned as it was.
	DefragEtcd(db DB, keysPerTxn int) (DB, DefragStats, error)
}

// DefragStats is what a defragmentation did.
type DefragStats struct {
	// Txns is the write transactions the copy committed.
	Txns int64
	// PagesWritten is the pages the copy allocated (bbolt's
	// TxStats.PageCount of the new file: every page of it was written).
	PagesWritten int64
}

// defragFillPercent is the FillPercent of the copy's buckets: etcd sets
// 0.9, since the copy writes every bucket's keys in order.
const defragFillPercent = 0.9

// DefragEtcd implements EtcdDefragmenter. The copy is opened with the
// engine's own options, as etcd opens it with its backend's.
func (e boltEngine) DefragEtcd(db DB, keysPerTxn int) (DB, DefragStats, error) {
	k, ok := db.(*kvDB[*bolt.DB, *bolt.Tx, *bolt.Bucket, *bolt.Cursor])
	if !ok {
		return db, DefragStats{}, fmt.Errorf("%s cannot defragment a %T", e.name, db)
	}
	path := k.db.Path()
	tmpPath := path + ".defrag"
	if err := os.Remove(tmpPath); err != nil && !os.IsNotExist(err) {
		return db, DefragStats{}, err
	}
	tmp, err := bolt.Open(tmpPath, 0o600, e.options(false))
	if err != nil {
		return db, DefragStats{}, err
	}
	st, err := copyBuckets(k.db, tmp, keysPerTxn)
	if err != nil {
		return db, st, errors.Join(err, tmp.Close(), os.Remove(tmpPath))
	}
	stats := tmp.Stats()
	st.PagesWritten = stats.TxStats.GetPageCount()
	if err := db.Close(); err != nil {
		return nil, st, errors.Join(err, tmp.Close())
	}
	if err := tmp.Close(); err != nil {
		return nil, st, err
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return nil, st, err
	}
	fresh, err := e.Open(path, OpenOptions{})
	if err != nil {
		return nil, st, err
	}
	return fresh, st, nil
}

// copyBuckets copies every top-level bucket of src into dst from one read
// transaction, committing dst every keysPerTxn keys (counted across
// buckets). Nested buckets are refused: etcd has none, and copying them
// is not what is measured.
func copyBuckets(src, dst *bolt.DB, keysPerTxn int) (st DefragStats, err error) {
	if keysPerTxn <= 0 {
		return st, fmt.Errorf("keys per transaction must be positive, got %d", keysPerTxn)
	}
	out, err := dst.Begin(true)
	if err != nil {
		return st, err
	}
	defer func() {
		if out != nil {
			_ = out.Rollback()
		}
	}()
	in, err := src.Begin(false)
	if err != nil {
		return st, err
	}
	defer func() { _ = in.Rollback() }()

	pending := 0
	err = in.ForEach(func(name []byte, b *bolt.Bucket) error {
		ob, err := out.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		ob.FillPercent = defragFillPercent
		return b.ForEach(func(key, v []byte) error {
			if v == nil {
				return fmt.Errorf("bucket %s: nested bucket %q is not copied", bucketLabel(name), key)
			}
			// key and v are slices of src's map, valid until in ends,
			// which outlives every dst transaction that holds them.
			if err := ob.Put(key, v); err != nil {
				return err
			}
			if pending++; pending < keysPerTxn {
				return nil
			}
			if err := out.Commit(); err != nil {
				out = nil
				return err
			}
			st.Txns++
			pending = 0
			if out, err = dst.Begin(true); err != nil {
				return err
			}
			ob = out.Bucket(name)
			ob.FillPercent = defragFillPercent
			return nil
		})
	})
	if err != nil {
		return st, err
	}
	err = out.Commit()
	out = nil
	if err == nil {
		st.Txns++
	}
	return st, err
}

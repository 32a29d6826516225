package rivet

import "fmt"

// CompactInto copies every bucket and key of src into dst, committing
// whenever a transaction has written about txMaxSize bytes (0: one
// transaction): the offline way to rewrite a file compactly, into a new
// file, with every bucket filled to FillPercent 1.0. It is bbolt's Compact
// under a name that does not suggest DB.Compact, which compacts a file in
// place while it stays open.
func CompactInto(dst, src *DB, txMaxSize int64) error {
	return copyCompacted(dst, src, txMaxSize, nil)
}

// Compact is CompactInto, under the name bbolt gives it.
//
// Deprecated: use CompactInto (DB.Compact is the online compaction).
func Compact(dst, src *DB, txMaxSize int64) error {
	return CompactInto(dst, src, txMaxSize)
}

// copyCompacted is CompactInto; progress, if not nil, is called after each
// key with the bytes of keys and values copied so far.
func copyCompacted(dst, src *DB, txMaxSize int64, progress func(copied int64)) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	var size, copied int64
	err = src.View(func(stx *Tx) error {
		// path names the bucket from the top level down: a commit ends
		// the transaction its *Bucket came from, and the next one finds
		// it by name.
		var copyBucket func(sb *Bucket, parent *Bucket, path [][]byte) error
		copyBucket = func(sb *Bucket, parent *Bucket, path [][]byte) error {
			name := path[len(path)-1]
			var db *Bucket
			var err error
			if parent == nil {
				db, err = tx.CreateBucketIfNotExists(name)
			} else {
				db, err = parent.CreateBucketIfNotExists(name)
			}
			if err != nil {
				return err
			}
			db.FillPercent = 1.0
			if err := db.SetSequence(sb.Sequence()); err != nil {
				return err
			}
			c := sb.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if db.tx != tx {
					// An earlier commit ended the transaction db came from.
					if db, err = reopenPath(tx, path); err != nil {
						return err
					}
				}
				if v == nil {
					if child := sb.Bucket(k); child != nil {
						if err := copyBucket(child, db, append(path[:len(path):len(path)], k)); err != nil {
							return err
						}
						continue
					}
				}
				if txMaxSize > 0 && size+int64(len(k)+len(v)) > txMaxSize {
					// Commit and continue in a fresh transaction; reopen
					// the path of buckets down to here.
					if err := tx.Commit(); err != nil {
						return err
					}
					if tx, err = dst.Begin(true); err != nil {
						return err
					}
					size = 0
					if db, err = reopenPath(tx, path); err != nil {
						return err
					}
				}
				if err := db.Put(k, v); err != nil {
					return err
				}
				size += int64(len(k) + len(v))
				if progress != nil {
					copied += int64(len(k) + len(v))
					progress(copied)
				}
			}
			return stx.Err()
		}
		return stx.ForEach(func(name []byte, b *Bucket) error {
			if b == nil {
				// A plain value at the top level (bbolt writes one
				// through Tx.Cursor().Bucket()): copied as it is.
				v := stx.root.Get(name)
				size += int64(len(name) + len(v))
				return tx.root.Put(name, v)
			}
			return copyBucket(b, nil, [][]byte{name})
		})
	})
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("rivet: compact: %w", err)
	}
	return tx.Commit()
}

// reopenPath finds, in tx, the bucket at path (names from the top level
// down).
func reopenPath(tx *Tx, path [][]byte) (*Bucket, error) {
	cur := tx.root
	for _, name := range path {
		if cur = cur.Bucket(name); cur == nil {
			return nil, ErrBucketNotFound
		}
		cur.FillPercent = 1.0
	}
	return cur, nil
}

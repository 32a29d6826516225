package rivet

import (
	"fmt"
	"io"
	"os"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
)

// WriteTo writes a consistent copy of the state the transaction sees to w,
// as a complete database file, without blocking writers (a hot backup).
//
// The copy holds the reachable pages byte for byte; every other page is
// written as zeros, and the free-space maps are rebuilt from the tree, since
// the maps on disk may already describe a newer state than the snapshot.
func (tx *Tx) WriteTo(w io.Writer) (n int64, err error) {
	if tx.db == nil {
		return 0, ErrTxClosed
	}
	ps := tx.env.PageSize
	hwm := tx.meta.HWM
	data := tx.env.Data
	live := make([]uint64, (hwm+63)/64)
	walker := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			end := (id + n) * uint64(ps)
			if id+n > hwm || end > uint64(len(data)) {
				return nil, page.Corruptf(id, "run of %d pages beyond the file", n)
			}
			return data[id*uint64(ps) : end], nil
		},
		PageSize: ps,
		HWM:      hwm,
		All:      true,
		Visit: func(id page.ID, n uint64, _ page.Type) error {
			for p := id; p < id+n; p++ {
				if live[p/64]&(1<<(p%64)) != 0 {
					return page.Corruptf(p, "page reachable twice")
				}
				live[p/64] |= 1 << (p % 64)
			}
			return nil
		},
	}
	if err := walker.Walk(tx.meta.Root); err != nil {
		return 0, err
	}

	rp := page.RegionPages(ps)
	regions := tx.meta.RegionCount()
	meta := *tx.meta
	meta.Steady = meta.Txid
	meta.Selector = make([]byte, page.BitmapLen(regions))
	meta.Changed = make([]byte, page.BitmapLen(regions))
	var freeCount uint64
	maps := make([][]byte, regions)
	for r := uint64(0); r < regions; r++ {
		words := make([]uint64, rp/64)
		first := page.RegionFirstData(ps, r)
		for p := first; p < (r+1)*rp && p < hwm; p++ {
			if live[p/64]&(1<<(p%64)) == 0 {
				i := p - r*rp
				words[i/64] |= 1 << (i % 64)
				freeCount++
			}
		}
		maps[r] = make([]byte, ps)
		page.EncodeRegionMap(maps[r], ps, page.MapSlot(ps, r, 0), meta.Txid, words)
	}
	meta.FreePages = freeCount
	meta.FirstFreeRegion = 0
	metaBuf := make([]byte, ps)
	page.EncodeMeta(metaBuf, &meta)

	zero := make([]byte, ps)
	for p := uint64(0); p < hwm; p++ {
		var buf []byte
		r := p / rp
		switch {
		case p < 2:
			buf = metaBuf
		case p == page.MapSlot(ps, r, 0):
			buf = maps[r]
		case p == page.MapSlot(ps, r, 1):
			buf = zero
		case live[p/64]&(1<<(p%64)) != 0:
			buf = data[p*uint64(ps) : (p+1)*uint64(ps)]
		default:
			buf = zero
		}
		m, err := w.Write(buf)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Copy writes the database to w.
//
// Deprecated: use WriteTo.
func (tx *Tx) Copy(w io.Writer) error {
	_, err := tx.WriteTo(w)
	return err
}

// CopyFile writes a consistent copy of the database to the file at path,
// flushed before it returns.
func (tx *Tx) CopyFile(path string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := tx.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Compact copies every bucket and key of src into dst, committing whenever
// a transaction has written about txMaxSize bytes (0: one transaction). It
// is the offline way to rewrite a file compactly, as bbolt's Compact.
func Compact(dst, src *DB, txMaxSize int64) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	var size int64
	err = src.View(func(stx *Tx) error {
		var copyBucket func(sb *Bucket, parent *Bucket, name []byte) error
		copyBucket = func(sb *Bucket, parent *Bucket, name []byte) error {
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
					if db, err = reopenPath(tx, db); err != nil {
						return err
					}
				}
				if v == nil {
					if child := sb.Bucket(k); child != nil {
						if err := copyBucket(child, db, k); err != nil {
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
					if db, err = reopenPath(tx, db); err != nil {
						return err
					}
				}
				if err := db.Put(k, v); err != nil {
					return err
				}
				size += int64(len(k) + len(v))
			}
			return stx.Err()
		}
		return stx.ForEach(func(name []byte, b *Bucket) error {
			return copyBucket(b, nil, name)
		})
	})
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("rivet: compact: %w", err)
	}
	return tx.Commit()
}

// reopenPath finds, in tx, the bucket at the same path as b.
func reopenPath(tx *Tx, b *Bucket) (*Bucket, error) {
	var path [][]byte
	for p := b; p != nil && !p.isRoot; p = p.parent {
		path = append([][]byte{p.name}, path...)
	}
	cur := tx.root
	for _, name := range path {
		if cur = cur.Bucket(name); cur == nil {
			return nil, ErrBucketNotFound
		}
		cur.FillPercent = 1.0
	}
	return cur, nil
}

// Err returns the first corruption the transaction met in a method without
// an error return (Get, cursor moves, Bucket), or nil. View, Update and
// Commit return it too.
func (tx *Tx) Err() error { return tx.env.Err }

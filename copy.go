package rivet

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
	"github.com/rivetkv/rivet/internal/vfs"
)

// WriteTo writes the state the transaction sees to w as a complete
// database file, without blocking writers (a hot backup), and returns the
// bytes written: always tx.Size() on success.
//
// The copy is a file rivet itself could have written (docs/design.md §6,
// invariant 9): every page the state reaches is copied byte for byte, every
// other page is written as zeros, and the free-space maps and both metas are
// built anew from the reachable pages, so every meta field agrees with every
// map page it names. Nothing of the source file's free-space bookkeeping —
// map slots, selector, delta — is copied: later sync points may already
// have rewritten those for newer states. Every copied run's checksum is
// verified against its parent's record on the way, so a backup of a damaged
// file fails with ErrCorrupt instead of copying the damage.
//
// The metas are the first two pages written, as in bbolt; an error writing
// one is returned as "meta N copy: ...". CopyFile writes them last instead,
// so that a crash while it copies never leaves a file that opens.
func (tx *Tx) WriteTo(w io.Writer) (n int64, err error) {
	img, err := tx.copyImage()
	if err != nil {
		return 0, err
	}
	for i := int64(0); i < 2; i++ {
		m, err := w.Write(img.metaPage(i))
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("meta %d copy: %w", i, err)
		}
	}
	m, err := img.writeData(w)
	return n + m, err
}

// copyImage is the file image of a transaction's state as a database of its
// own (see WriteTo).
type copyImage struct {
	pageSize int
	hwm      uint64
	data     []byte   // the transaction's mapping: the reachable pages
	live     []uint64 // bit p set: page p is reachable from the root
	space    *spacemap.Standalone
	meta     []byte // the encoded meta, for both meta slots
	// raw is set for a bbolt image (boltBacking.copyImage): its data
	// pages are copied as they are (live and space are nil), and meta1
	// is meta slot 1's page.
	raw   bool
	meta1 []byte
}

// metaPage returns the page meta slot i holds.
func (img *copyImage) metaPage(i int64) []byte {
	if i == 1 && img.raw {
		return img.meta1
	}
	return img.meta
}

// copyImage walks the transaction's state and builds its image.
// livePages walks the tree rooted at root in data (the file's bytes from
// offset 0), verifying every run against its parent's checksum, and returns
// the bitmap of the pages it reaches. A run past hwm or the data, or a page
// reached twice, is corruption.
func livePages(data []byte, ps int, hwm uint64, root page.Ref) ([]uint64, error) {
	live := make([]uint64, (hwm+63)/64)
	walker := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			end := (id + n) * uint64(ps)
			if id+n > hwm || end > uint64(len(data)) {
				return nil, page.Corruptf(id, "run of %d pages beyond the file", n)
			}
			return data[id*uint64(ps) : end], nil
		},
		PageSize:        ps,
		HWM:             hwm,
		All:             true,
		VerifyChecksums: true,
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
	if err := walker.Walk(root); err != nil {
		return nil, err
	}
	return live, nil
}

func (tx *Tx) copyImage() (*copyImage, error) {
	if tx.ended() {
		return nil, ErrTxClosed
	}
	if b := tx.db.bolt; b != nil {
		return b.copyImage(), nil
	}
	ps := tx.env.PageSize
	snap := tx.meta
	hwm := snap.HWM
	data := tx.env.Data
	live, err := livePages(data, ps, hwm, snap.Root)
	if err != nil {
		return nil, err
	}
	space, err := spacemap.NewStandalone(ps, hwm, snap.Txid, live)
	if err != nil {
		return nil, err
	}
	// Built field by field, not copied from the snapshot's meta: every field
	// of the source meta that describes the source's map slots (selector,
	// changed, delta, free count, hint) would be wrong here, and so would
	// any such field a later format adds.
	meta := page.Meta{
		PageSize:        ps,
		Txid:            snap.Txid,
		Steady:          snap.Txid, // nothing for recovery to verify
		HWM:             hwm,
		Root:            snap.Root,
		RegionPages:     page.RegionPages(ps),
		FreePages:       space.FreePages,
		FirstFreeRegion: space.FirstFreeRegion,
		Selector:        space.Selector,
		Changed:         space.Changed,
	}
	buf := make([]byte, ps)
	page.EncodeMeta(buf, &meta)
	if _, err := page.DecodeMeta(0, buf); err != nil {
		return nil, fmt.Errorf("rivet: the copy's meta does not validate: %w", err)
	}
	return &copyImage{pageSize: ps, hwm: hwm, data: data, live: live, space: space, meta: buf}, nil
}

// writeData writes pages [2, hwm) of the image to w, which stands at the
// offset of page 2, in writes of up to copyChunk bytes.
func (img *copyImage) writeData(w io.Writer) (int64, error) {
	if img.raw {
		return img.writeBoltData(w)
	}
	ps := img.pageSize
	bw := bufio.NewWriterSize(w, copyChunk)
	var n int64
	zero := make([]byte, ps)
	mapBuf := make([]byte, ps)
	words := make([]uint64, page.RegionMapWords(ps))
	for p := uint64(2); p < img.hwm; p++ {
		var buf []byte
		if slot, ok := img.space.IsMapSlot(p); ok {
			buf = zero
			if slot == 0 {
				img.space.EncodeMap(p/page.RegionPages(ps), mapBuf, words)
				buf = mapBuf
			}
		} else if img.live[p/64]&(1<<(p%64)) != 0 {
			buf = img.data[p*uint64(ps) : (p+1)*uint64(ps)]
		} else {
			buf = zero
		}
		if _, err := bw.Write(buf); err != nil {
			return n - int64(bw.Buffered()), err
		}
		n += int64(ps)
	}
	if err := bw.Flush(); err != nil {
		return n - int64(bw.Buffered()), err
	}
	return n, nil
}

// copyChunk is the largest write WriteTo and CopyFile issue.
const copyChunk = 1 << 20

// Copy writes the database to w.
//
// Deprecated: use WriteTo.
func (tx *Tx) Copy(w io.Writer) error {
	_, err := tx.WriteTo(w)
	return err
}

// CopyFile writes a consistent copy of the state the transaction sees to
// the file at path (created with mode, or truncated), flushed before it
// returns. It flushes the truncation, writes every page but the metas,
// flushes, and only then writes and flushes the two metas, then the
// directory, so a crash or an error while copying leaves a file without a
// valid meta, which Open refuses with ErrInvalid, or (before the directory
// flush, if path did not exist) no file — never one that opens with pages
// missing, nor an earlier copy at path with some of its pages overwritten.
func (tx *Tx) CopyFile(path string, mode os.FileMode) error {
	return tx.copyFile(vfs.OS(), path, mode)
}

func (tx *Tx) copyFile(fs vfs.FS, path string, mode os.FileMode) error {
	img, err := tx.copyImage()
	if err != nil {
		return err
	}
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	ps := int64(img.pageSize)
	err = func() error {
		// The old file's metas must be gone before any new page lands.
		if err := f.Sync(vfs.SyncData); err != nil {
			return err
		}
		if _, err := img.writeData(&offsetWriter{f: f, off: 2 * ps}); err != nil {
			return err
		}
		if err := f.Sync(vfs.SyncData); err != nil {
			return err
		}
		for i := int64(0); i < 2; i++ {
			if _, err := f.WriteAt(img.metaPage(i), i*ps); err != nil {
				return fmt.Errorf("meta %d copy: %w", i, err)
			}
		}
		return f.Sync(vfs.SyncData)
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		syncDir(fs, path)
	}
	return err
}

// offsetWriter turns WriteAt into sequential writes from off.
type offsetWriter struct {
	f   vfs.File
	off int64
}

func (w *offsetWriter) Write(p []byte) (int, error) {
	n, err := w.f.WriteAt(p, w.off)
	w.off += int64(n)
	return n, err
}

// Compact copies every bucket and key of src into dst, committing whenever
// a transaction has written about txMaxSize bytes (0: one transaction). It
// is the offline way to rewrite a file compactly, as bbolt's Compact.
func Compact(dst, src *DB, txMaxSize int64) error {
	return compactInto(dst, src, txMaxSize, nil)
}

// compactInto is Compact; progress, if not nil, is called after each key
// with the bytes of keys and values copied so far.
func compactInto(dst, src *DB, txMaxSize int64, progress func(copied int64)) error {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	var size, copied int64
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
				if progress != nil {
					copied += int64(len(k) + len(v))
					progress(copied)
				}
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

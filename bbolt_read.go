package rivet

import (
	"errors"
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/image"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
)

// boltBacking is the bbolt file behind a DB opened read-only on one
// (docs/design.md §11.2): every transaction reads it through the same
// translating source, whose cache all of them share.
type boltBacking struct {
	file   *boltfile.File
	source *boltfile.Source
	// view holds the mapping the file is read through until Close: the
	// file never changes while the shared lock is held, so one mapping
	// serves every transaction.
	view *pager.View
}

// bboltCacheBytes is the translated-node cache of each DB reading a bbolt
// file; tests lower it to make evictions happen.
var bboltCacheBytes = boltfile.DefaultCacheBytes

// errBboltBacked is the error of what a DB reading a bbolt file cannot do.
func errBboltBacked(what string) error {
	return fmt.Errorf("rivet: %s is not available on a bbolt file opened read-only (convert it: Options.ConvertBbolt or `rivet import`)", what)
}

// loadBbolt opens db.file, a bbolt file opened read-only, at the meta bbolt
// would open at. Like Open of a rivet file it reads the two meta pages and
// nothing proportional to the file's size.
func (db *DB) loadBbolt(size int64) error {
	metas, err := boltfile.ReadMetas(db.file, size)
	if err != nil {
		return &bboltReadError{path: db.path, err: err}
	}
	m := metas.Meta
	db.pageSize = m.PageSize
	p, err := pager.Open(db.file, pager.Options{PageSize: m.PageSize, InitialMmapSize: int64(db.opts.InitialMmapSize), ReadOnly: true})
	if err != nil {
		return err
	}
	if err := p.EnsureMapped(m.HWM); err != nil {
		_ = p.Close()
		return err
	}
	view := p.Acquire()
	f, err := boltfile.New(view.Bytes(), m)
	if err != nil {
		view.Release()
		_ = p.Close()
		return err
	}
	src := boltfile.NewSource(f, bboltCacheBytes)
	db.pager = p
	db.bolt = &boltBacking{file: f, source: src, view: view}
	db.foreign = src
	meta := &page.Meta{PageSize: m.PageSize, Txid: m.Txid, Steady: m.Txid, HWM: m.HWM, Root: src.Root()}
	db.head = meta
	db.readers.Open(meta, p.Acquire())
	db.durable = m.Txid
	db.recovered = Recovery{Txid: m.Txid}
	if other := 1 - m.Slot; metas.Errs[other] != nil {
		// bbolt writes its two metas alternately, so the other one is the
		// previous commit; damaged, it costs nothing here.
		db.recovered.DamagedMeta = fmt.Sprintf("bbolt meta %d is damaged: %v", other, metas.Errs[other])
		db.logger.Warningf("%s: %s; opened at txn %d from meta %d", db.path, db.recovered.DamagedMeta, m.Txid, m.Slot)
	}
	db.mu.Lock()
	db.opened = true
	db.mu.Unlock()
	return nil
}

// bboltReadError is a read-only Open's failure to read a bbolt file: it
// matches errors.ErrBboltFile (and so ErrInvalid) and the cause (ErrCorrupt,
// ErrVersionMismatch).
type bboltReadError struct {
	path string
	err  error
}

func (e *bboltReadError) Error() string {
	return "rivet: cannot read the bbolt file " + e.path + ": " + e.err.Error()
}

func (e *bboltReadError) Unwrap() []error { return []error{rerrors.ErrBboltFile, e.err} }

// close releases the mapping the bbolt file was read through; the caller
// closes the pager after it.
func (b *boltBacking) close() { b.view.Release() }

// check runs the bbolt reader's own structural check (boltfile.File.Check),
// which visits each page at most once, so it ends in time bounded by the
// file's pages even on a file whose pages form cycles.
func (b *boltBacking) check() []error {
	var errs []error
	b.file.Check(func(err error) bool {
		errs = append(errs, err)
		return len(errs) < maxCheckErrors
	})
	return errs
}

// copyImage is the image of a bbolt file as bbolt's own Tx.WriteTo writes
// it: its meta for slot 0, the same meta with the previous txid for slot 1,
// and every other page as it is in the file. A copy of a bbolt file is a
// bbolt file (what a program moving from bbolt expects of a backup), which
// rivet opens read-only or converts, and bbolt opens as before.
func (b *boltBacking) copyImage() *image.Image {
	m := b.file.Meta()
	ps := b.file.PageSize()
	metas := [2][]byte{make([]byte, ps), make([]byte, ps)}
	boltfile.EncodeMeta(metas[0], m, 0)
	if m.Txid > 0 {
		m.Txid--
	}
	boltfile.EncodeMeta(metas[1], m, 1)
	return image.Raw(ps, m.HWM, b.file.Data(), metas[0], metas[1])
}

// isBboltFile reports whether either of the file's first two pages, at any
// page size bbolt may have used, is a bbolt meta page (by its flags and
// magic number). It reads at most a few bytes per candidate page.
func (db *DB) isBboltFile() bool {
	var head [boltfile.HeaderSize + 4]byte
	isMeta := func(off int64) bool {
		if _, err := db.readAt(head[:], off); err != nil {
			return false
		}
		return boltfile.IsMetaPage(head[:])
	}
	if isMeta(0) {
		return true
	}
	for ps := int64(512); ps <= 1<<20; ps *= 2 {
		if isMeta(ps) {
			return true
		}
	}
	return false
}

// errPathMoved is openFile's verdict when the name it opened was renamed
// over after it opened it (a conversion by another process finished
// meanwhile): Open starts again on what the name holds now.
var errPathMoved = errors.New("rivet: the file was replaced while Open waited for its lock")

// errConverted is openFile's verdict after it converted the bbolt file it
// opened: Open starts again on the rivet file now at the path.
var errConverted = errors.New("rivet: converted; open again")

// loadBboltFile decides what Open does with a bbolt file: read it
// (read-only), convert it (Options.ConvertBbolt), or refuse it.
func (db *DB) loadBboltFile(size int64) error {
	// A conversion renames its result over the name while other opens
	// may be waiting for the lock on the file it replaced: they must not
	// read, nor convert again, what is now the backup.
	if same, err := db.fs.SameFile(db.file, db.path); err == nil && !same {
		return errPathMoved
	}
	if db.readOnly {
		return db.loadBbolt(size)
	}
	if db.opts.ConvertBbolt {
		if err := db.convertBbolt(size); err != nil {
			return err
		}
		return errConverted
	}
	return rerrors.ErrBboltFile
}

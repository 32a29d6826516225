package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/digest"
	"github.com/rivetkv/rivet/internal/image"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// Names a conversion uses beside the file it converts (docs/design.md §11.3).
const (
	// BboltBackupSuffix names the bbolt file a conversion keeps:
	// PATH + BboltBackupSuffix.
	BboltBackupSuffix = ".bbolt"
	// convertingSuffix names the rivet file a conversion writes before
	// it takes PATH's name.
	convertingSuffix = ".converting"
	// partialSuffix names a backup being copied (where links fail).
	partialSuffix = ".partial"
)

// convertTxBytes bounds a conversion's write transactions (keys and values
// copied per commit), as `rivet import` does. A variable so that tests
// reach several transactions with small files.
var convertTxBytes int64 = 64 << 20

// ConvertSpaceError is Open's refusal to convert a bbolt file
// (Options.ConvertBbolt) when the file system lacks room for the rivet file
// (or, where hard links are not possible, the backup copy). Nothing was
// written. It matches syscall.ENOSPC with errors.Is.
type ConvertSpaceError struct {
	// Path is the bbolt file.
	Path string
	// Needed is what the conversion may need, in bytes: for the rivet
	// file, estimated from the bbolt file's live pages with room for
	// rivet's growth steps.
	Needed int64
	// Available is what the file system can still give, in bytes.
	Available int64
}

func (e *ConvertSpaceError) Error() string {
	return fmt.Sprintf("rivet: not enough space to convert the bbolt file %s: it needs about %d bytes, the file system has %d", e.Path, e.Needed, e.Available)
}

// Is reports whether target is syscall.ENOSPC.
func (e *ConvertSpaceError) Is(target error) bool { return target == syscall.ENOSPC }

// converter is one conversion of the bbolt file db.file, which db holds
// open for writing under its exclusive lock, into a rivet file at its path.
type converter struct {
	db     *DB
	fs     vfs.FS
	path   string
	dir    string
	tmp    string // the rivet file being written
	backup string // the name the bbolt file keeps
	size   int64  // the bbolt file's size
	logger Logger
}

// convertBbolt converts db.file, a bbolt file opened for writing under its
// exclusive lock, into a rivet file at db.path (docs/design.md §11.3):
//
//  1. check the names: PATH.bbolt must be free or already the bbolt file
//     (a link or a whole copy a crashed conversion left); a stale
//     PATH.converting is removed;
//  2. check the room: the rivet file's size, estimated from the bbolt
//     file's live pages, against the file system's free space;
//  3. read the bbolt file's digest straight from its pages (a walk that
//     enters each page once: shared or cyclic pages are refused here);
//  4. copy every bucket, key, value and sequence into a new rivet file at
//     PATH.converting, in transactions of about convertTxBytes, through
//     the translating source, and close it (its last flush);
//  5. verify: the digest of the copy, read back through rivet, equals the
//     bbolt file's, and the copy passes Check;
//  6. keep the bbolt file as PATH.bbolt (link(2); a flushed copy where
//     links fail), flush the directory;
//  7. rename PATH.converting over PATH, flush the directory.
//
// The bbolt file is never written. Until step 7's rename is durable PATH is
// the bbolt file; after it, the verified rivet file. Any error before the
// rename removes what this call made and leaves the bbolt file as it was.
func (db *DB) convertBbolt(size int64) (err error) {
	c := &converter{
		db:     db,
		fs:     db.fs,
		path:   db.path,
		dir:    filepath.Dir(db.path),
		tmp:    db.path + convertingSuffix,
		backup: db.path + BboltBackupSuffix,
		size:   size,
		logger: db.logger,
	}
	start := time.Now()
	src, err := c.openSource()
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	backupReady, err := c.checkBackupName()
	if err != nil {
		return err
	}
	if err := removeIfPresent(c.fs, c.tmp); err != nil {
		return fmt.Errorf("rivet: removing %s left by an earlier conversion: %w", c.tmp, err)
	}
	if err := c.checkRoom(c.estimate(src.bolt.file)); err != nil {
		return err
	}
	c.logger.Infof("%s: converting from bbolt (%d bytes, %d-byte pages) to rivet in %s", c.path, size, src.pageSize, c.tmp)
	made := false // whether this call made the backup name
	defer func() {
		if err != nil {
			_ = c.fs.Remove(c.tmp)
			if made {
				_ = c.fs.Remove(c.backup)
			}
		}
	}()
	// The bbolt file's digest, read straight from its pages, comes first:
	// that walk enters each page once, so a file whose pages are shared
	// or form cycles is refused before the copy walks it.
	want, err := sourceDigest(src.bolt.file)
	if err != nil {
		return fmt.Errorf("rivet: converting %s: reading the bbolt file: %w (the bbolt file is unchanged)", c.path, err)
	}
	copied, err := c.copy(src)
	if err != nil {
		return fmt.Errorf("rivet: converting %s: %w (the bbolt file is unchanged)", c.path, err)
	}
	sum, err := c.verify(want)
	if err != nil {
		return fmt.Errorf("rivet: converting %s: %w (the bbolt file is unchanged)", c.path, err)
	}
	if !backupReady {
		if err := c.makeBackup(); err != nil {
			return fmt.Errorf("rivet: converting %s: keeping the bbolt file as %s: %w (the bbolt file is unchanged)", c.path, c.backup, err)
		}
		made = true
	}
	if err := c.fs.SyncDir(c.dir); err != nil {
		return fmt.Errorf("rivet: converting %s: flushing %s: %w (the bbolt file is unchanged)", c.path, c.dir, err)
	}
	if err := c.fs.Rename(c.tmp, c.path); err != nil {
		return fmt.Errorf("rivet: converting %s: %w (the bbolt file is unchanged)", c.path, err)
	}
	made = false // the backup is now the only name of the bbolt file
	if err := c.fs.SyncDir(c.dir); err != nil {
		// The rename may not be durable: a crash could put the bbolt file
		// back at PATH and lose whatever would be written to the rivet
		// file meanwhile. Refuse to open rather than risk that; the next
		// Open finds whichever file the directory holds.
		return fmt.Errorf("rivet: converted %s, but flushing %s after the rename failed: %w", c.path, c.dir, err)
	}
	c.logger.Infof("%s: converted from bbolt in %.1f s: %d buckets, %d keys, %d bytes of keys and values, sha256 %s; the bbolt file is kept as %s",
		c.path, time.Since(start).Seconds(), sum.Buckets, sum.Keys, copied, sum.Sum(), c.backup)
	return nil
}

// openSource returns a read-only DB reading the bbolt file through db's
// own open file (whose exclusive lock it shares).
func (c *converter) openSource() (*DB, error) {
	opts := Options{ReadOnly: true, InitialMmapSize: c.db.opts.InitialMmapSize, Logger: c.db.opts.Logger}
	src := newDB(c.fs, c.path, c.db.mode, opts)
	src.file = borrowedFile{c.db.file}
	if err := src.loadBbolt(c.size); err != nil {
		return nil, err
	}
	return src, nil
}

// borrowedFile is an open file lent to a second DB, which must neither
// lock, unlock nor close it: its owner does.
type borrowedFile struct{ vfs.File }

func (borrowedFile) TryLock(bool) error { return nil }
func (borrowedFile) Unlock() error      { return nil }
func (borrowedFile) Close() error       { return nil }

// Unwrap returns the lent file.
func (b borrowedFile) Unwrap() vfs.File { return b.File }

// checkBackupName reports whether the backup name already holds the bbolt
// file — the same file (a link made by a conversion that crashed before
// its rename) or a whole copy — and refuses a name taken by anything else.
// A partial copy a crashed conversion left is removed.
func (c *converter) checkBackupName() (bool, error) {
	if err := removeIfPresent(c.fs, c.backup+partialSuffix); err != nil {
		return false, err
	}
	same, err := c.fs.SameFile(c.db.file, c.backup)
	if err != nil {
		return false, err
	}
	if same {
		return true, nil
	}
	f, err := c.fs.OpenFile(c.backup, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if equal, err := sameContents(f, c.db.file, c.size); err != nil || !equal {
		if err == nil {
			err = fmt.Errorf("rivet: cannot convert %s: %s exists and is not a copy of it; move it away (a conversion keeps the bbolt file under that name)", c.path, c.backup)
		}
		return false, err
	}
	return true, nil
}

// sameContents reports whether f holds exactly the size bytes of g.
func sameContents(f, g vfs.File, size int64) (bool, error) {
	if fs, err := f.Size(); err != nil || fs != size {
		return false, err
	}
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(a)) {
		n := min(int64(len(a)), size-off)
		if _, err := f.ReadAt(a[:n], off); err != nil && err != io.EOF {
			return false, err
		}
		if _, err := g.ReadAt(b[:n], off); err != nil && err != io.EOF {
			return false, err
		}
		if !bytes.Equal(a[:n], b[:n]) {
			return false, nil
		}
	}
	return true, nil
}

// removeIfPresent removes name; a missing name is not an error.
func removeIfPresent(fs vfs.FS, name string) error {
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// estimate returns the bytes the rivet file may take at its largest while
// it is written: the bbolt file's live pages (rivet packs a load in key
// order into full pages, and bbolt's are at most full), an eighth more for
// rivet's growth step, and the first growth steps of a small file.
func (c *converter) estimate(f *boltfile.File) int64 {
	m := f.Meta()
	free, err := f.FreeCount()
	if err != nil || free > m.HWM {
		free = 0
	}
	live := int64(m.HWM-free) * int64(m.PageSize)
	return live + live/8 + 16<<20
}

// checkRoom refuses the conversion when the file system reports less free
// space than need. A file system that cannot say is not refused.
func (c *converter) checkRoom(need int64) error {
	avail, err := c.fs.FreeSpace(c.dir)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rivet: converting %s: asking for the free space: %w", c.path, err)
	}
	if avail < need {
		return &ConvertSpaceError{Path: c.path, Needed: need, Available: avail}
	}
	return nil
}

// copy writes src's buckets, keys, values and sequences into a new rivet
// file at c.tmp and closes it. It returns the bytes of keys and values
// copied.
func (c *converter) copy(src *DB) (int64, error) {
	opts := Options{
		PageSize:        src.pageSize,
		Durability:      None, // Close makes it durable, once
		InitialMmapSize: c.db.opts.InitialMmapSize,
		Logger:          c.db.opts.Logger,
	}
	dst, err := openFile(c.fs, c.tmp, c.db.mode, opts)
	if err != nil {
		return 0, err
	}
	total := max(int64(src.bolt.file.Meta().HWM)*int64(src.pageSize), 1)
	next := int64(10)
	var copied int64
	err = copyCompacted(dst, src, convertTxBytes, func(n int64) {
		copied = n
		if pct := n * 100 / total; pct >= next && pct < 100 {
			c.logger.Infof("%s: converting from bbolt: %d%% (%d of about %d bytes)", c.path, pct, n, total)
			next = pct + 10
		}
	})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return copied, err
}

// sourceDigest is the digest of the bbolt file's canonical stream, read
// straight from its pages (boltfile.File.Walk), apart from the translation
// the copy reads through.
func sourceDigest(f *boltfile.File) (*digest.Digest, error) {
	d := digest.New()
	err := f.Walk(func(e digest.Entry) error {
		d.Add(e)
		return nil
	})
	return d, err
}

// verify reads the rivet file back through rivet and compares its digest
// with want, the bbolt file's; the rivet file must also pass Check. It
// returns the digest.
func (c *converter) verify(want *digest.Digest) (*digest.Digest, error) {
	dst, err := openFile(c.fs, c.tmp, 0, Options{ReadOnly: true, InitialMmapSize: c.db.opts.InitialMmapSize})
	if err != nil {
		return nil, fmt.Errorf("reopening the rivet file: %w", err)
	}
	defer func() { _ = dst.Close() }()
	var got *digest.Digest
	err = dst.View(func(tx *Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("the rivet file fails its check: %w", err)
		}
		var err error
		got, err = digest.Of(digestView{tx: tx})
		return err
	})
	if err != nil {
		return nil, err
	}
	if got.Sum() != want.Sum() {
		return nil, fmt.Errorf("the rivet file does not match the bbolt file: %d buckets, %d keys, sha256 %s; bbolt: %d buckets, %d keys, sha256 %s",
			got.Buckets, got.Keys, got.Sum(), want.Buckets, want.Keys, want.Sum())
	}
	return got, nil
}

// makeBackup gives the bbolt file the backup name: a hard link, or where
// the file system refuses one, a copy, flushed, renamed into place.
func (c *converter) makeBackup() error {
	err := c.fs.Link(c.path, c.backup)
	if err == nil {
		return nil
	}
	c.logger.Warningf("%s: cannot link the bbolt file as %s (%v); copying it", c.path, c.backup, err)
	if err := c.checkRoom(c.size); err != nil {
		return err
	}
	part := c.backup + partialSuffix
	f, err := c.fs.OpenFile(part, os.O_RDWR|os.O_CREATE|os.O_EXCL, c.db.mode)
	if err != nil {
		return err
	}
	err = copyFileBytes(f, c.db.file, c.size)
	if err == nil {
		err = f.Sync(vfs.SyncData)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.fs.Rename(part, c.backup)
	}
	if err != nil {
		_ = c.fs.Remove(part)
	}
	return err
}

// copyFileBytes copies the first size bytes of src to dst.
func copyFileBytes(dst, src vfs.File, size int64) error {
	buf := make([]byte, image.ChunkSize)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if _, err := src.ReadAt(buf[:n], off); err != nil && err != io.EOF {
			return err
		}
		if _, err := dst.WriteAt(buf[:n], off); err != nil {
			return err
		}
	}
	return nil
}

// digestView adapts a rivet bucket, or a transaction's root, to the
// canonical stream's walk (package digest).
type digestView struct {
	tx *Tx
	b  *Bucket
}

func (v digestView) ForEach(fn func(k, val []byte, isBucket bool) error) error {
	b := v.b
	if b == nil {
		b = v.tx.root
	}
	c := b.tree.Cursor()
	for k, val, flags, ok := c.First(); ok; k, val, flags, ok = c.Next() {
		if flags == page.FlagBucket {
			if err := fn(k, nil, true); err != nil {
				return err
			}
			continue
		}
		if val, err := b.tree.Value(val, flags); err != nil {
			return err
		} else if err := fn(k, val, false); err != nil {
			return err
		}
	}
	return v.tx.env.Err
}

func (v digestView) Bucket(name []byte) digest.Bucket {
	b := v.b
	if b == nil {
		b = v.tx.root
	}
	if c := b.Bucket(name); c != nil {
		return digestView{tx: v.tx, b: c}
	}
	return nil
}

func (v digestView) Sequence() uint64 {
	if v.b == nil {
		return 0
	}
	return v.b.Sequence()
}

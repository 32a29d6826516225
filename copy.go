package rivet

import (
	"io"
	"os"

	"github.com/rivetkv/rivet/internal/image"
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
	return img.WriteTo(w)
}

// copyImage is the file image of the transaction's state as a database of
// its own (see WriteTo).
func (tx *Tx) copyImage() (*image.Image, error) {
	if tx.ended() {
		return nil, ErrTxClosed
	}
	if b := tx.db.bolt; b != nil {
		return b.copyImage(), nil
	}
	if err := tx.flushDeferred(); err != nil {
		return nil, err
	}
	return image.Build(tx.env.PageSize, tx.meta, tx.env.Data)
}

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
	return img.WriteFile(fs, path, mode)
}

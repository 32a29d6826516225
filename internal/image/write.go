package image

import (
	"fmt"
	"io"
	"os"

	"github.com/rivetkv/rivet/internal/vfs"
)

// WriteTo writes the image to w and returns the bytes written, Size() on
// success. The metas are the first two pages written, as bbolt writes
// them; an error writing one is returned as "meta N copy: ...". A file
// that must never open with pages missing is written by WriteFile or
// WriteNewFile instead, which write the metas last.
func (img *Image) WriteTo(w io.Writer) (n int64, err error) {
	for i := int64(0); i < 2; i++ {
		m, err := w.Write(img.MetaPage(i))
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("meta %d copy: %w", i, err)
		}
	}
	m, err := img.WriteData(w)
	return n + m, err
}

// writeFile is the order every image file is written in: data (which
// writes pages [2, hwm) to f), a flush, both metas, a flush. A crash or an
// error at any point leaves f without a valid meta, which Open refuses
// with ErrInvalid, or the whole image — never a file whose metas name
// pages that are not there.
func (img *Image) writeFile(f vfs.File, data func() error) error {
	if err := data(); err != nil {
		return err
	}
	if err := f.Sync(vfs.SyncData); err != nil {
		return err
	}
	ps := int64(img.pageSize)
	for i := int64(0); i < 2; i++ {
		if _, err := f.WriteAt(img.MetaPage(i), i*ps); err != nil {
			return fmt.Errorf("meta %d copy: %w", i, err)
		}
	}
	return f.Sync(vfs.SyncData)
}

// WriteFile writes the image to the file at path (created with mode, or
// truncated) in fs, flushed before it returns, then flushes the directory.
// It flushes the truncation before it writes any page, so a crash or an
// error while copying leaves a file without a valid meta or (before the
// directory flush, if path did not exist) no file: never one that opens
// with pages missing, nor an earlier copy at path with some of its pages
// overwritten.
func (img *Image) WriteFile(fs vfs.FS, path string, mode os.FileMode) error {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	err = func() error {
		// The old file's metas must be gone before any new page lands.
		if err := f.Sync(vfs.SyncData); err != nil {
			return err
		}
		return img.writeFile(f, func() error {
			_, err := img.WriteData(&offsetWriter{f: f, off: 2 * int64(img.pageSize)})
			return err
		})
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		vfs.SyncParentDir(fs, path)
	}
	return err
}

// WriteNewFile writes the image to a new file at path in fs (O_EXCL: an
// error matching fs.ErrExist if it exists) as WriteFile does, calling
// progress, if not nil, with the bytes written so far and Size() before
// the first write, after every chunk and at the end. On any error, a
// progress callback's included, the file is removed. It returns the bytes
// written.
func (img *Image) WriteNewFile(fs vfs.FS, path string, mode os.FileMode, progress func(written, total int64) error) (int64, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	ps := int64(img.pageSize)
	total := img.Size()
	var w io.Writer = &offsetWriter{f: f, off: 2 * ps}
	if progress != nil {
		if err := progress(0, total); err != nil {
			_ = f.Close()
			_ = fs.Remove(path)
			return 0, err
		}
		w = &progressWriter{w: w, done: 2 * ps, total: total, fn: progress}
	}
	err = img.writeFile(f, func() error {
		_, err := img.WriteData(w)
		return err
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fs.Remove(path)
		return 0, err
	}
	vfs.SyncParentDir(fs, path)
	if progress != nil {
		if err := progress(total, total); err != nil {
			_ = fs.Remove(path)
			return 0, err
		}
	}
	return total, nil
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

// progressWriter reports the bytes that pass through it (WriteData's
// writes are ChunkSize bytes each, so about every megabyte).
type progressWriter struct {
	w     io.Writer
	done  int64
	total int64
	fn    func(written, total int64) error
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if err == nil {
		err = p.fn(p.done, p.total)
	}
	return n, err
}

package image

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// recordFS records, for every file it opens, the order of writes and
// flushes: "w<page>" for a write starting at a page, "s" for a flush.
type recordFS struct {
	vfs.FS
	ps  int64
	ops []string
}

func (r *recordFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := r.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &recordFile{File: f, fs: r}, nil
}

type recordFile struct {
	vfs.File
	fs *recordFS
}

func (f *recordFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.ops = append(f.fs.ops, "w"+string(rune('0'+off/f.fs.ps)))
	return f.File.WriteAt(p, off)
}

func (f *recordFile) Sync(kind vfs.SyncKind) error {
	f.fs.ops = append(f.fs.ops, "s")
	return f.File.Sync(kind)
}

// rawImage is a raw image of six 1 KiB pages, page p filled with byte p+1.
func rawImage() (*Image, []byte) {
	const ps = 1024
	data := make([]byte, 6*ps)
	for p := range 6 {
		copy(data[p*ps:(p+1)*ps], bytes.Repeat([]byte{byte(p + 1)}, ps))
	}
	return Raw(ps, 6, data, data[:ps], data[ps:2*ps]), data
}

// TestWriteFileOrder: the metas are written only after every data page
// is flushed, and flushed themselves before WriteFile returns; a file that
// existed is truncated durably before any page lands.
func TestWriteFileOrder(t *testing.T) {
	img, data := rawImage()
	rec := &recordFS{FS: vfs.NewMem(), ps: 1024}
	if err := img.WriteFile(rec, "/copy", 0o600); err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, op := range rec.ops {
		got += op + " "
	}
	// Pages 2-5 go out in one write (WriteData buffers up to ChunkSize).
	if want := "s w2 s w0 w1 s "; got != want {
		t.Fatalf("operations %q, want %q", got, want)
	}
	f, err := rec.FS.OpenFile("/copy", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, len(data))
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, data) {
		t.Fatalf("the file does not hold the image (%v)", err)
	}
}

// TestWriteNewFileProgressError: a progress callback's error stops the
// copy, is returned, and leaves no file; an existing file is refused and
// kept.
func TestWriteNewFileProgressError(t *testing.T) {
	img, _ := rawImage()
	mem := vfs.NewMem()
	stop := errors.New("stop")
	calls := 0
	_, err := img.WriteNewFile(mem, "/new", 0o600, func(written, total int64) error {
		if calls++; written > 0 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Fatalf("WriteNewFile: %v after %d progress calls, want the callback's error after 2", err, calls)
	}
	if _, err := mem.OpenFile("/new", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stopped copy was left behind (%v)", err)
	}
	var totals []int64
	n, err := img.WriteNewFile(mem, "/new", 0o600, func(written, total int64) error {
		totals = append(totals, written, total)
		return nil
	})
	if err != nil || n != img.Size() || len(totals) < 4 || totals[len(totals)-2] != img.Size() {
		t.Fatalf("WriteNewFile: %d bytes, %v; progress %v", n, err, totals)
	}
	if _, err := img.WriteNewFile(mem, "/new", 0o600, nil); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("WriteNewFile over an existing file: %v, want fs.ErrExist", err)
	}
	if f, err := mem.OpenFile("/new", os.O_RDONLY, 0); err != nil {
		t.Fatalf("the existing file is gone: %v", err)
	} else {
		f.Close()
	}
}

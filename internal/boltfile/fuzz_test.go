package boltfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/digest"
	"github.com/rivetkv/rivet/internal/page"
)

// Fuzz targets for every decoder here, and for a whole-file walk. None may
// panic, loop or allocate beyond the input's size; every failure must be
// an error (corruption is errors.ErrCorrupt).

// seedFiles returns the testdata files cut to their high-water mark (what
// a file needs), as fuzz seeds.
func seedFiles(f *testing.F) [][]byte {
	var out [][]byte
	for _, data := range testFiles(f) {
		ms, err := ReadMetas(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			f.Fatal(err)
		}
		if n := ms.Meta.HWM * uint64(ms.Meta.PageSize); n <= 64<<10 {
			out = append(out, data[:n])
		}
	}
	if len(out) < 2 {
		f.Fatalf("only %d small seed files", len(out))
	}
	return out
}

// seedPages returns every branch, leaf and freelist page of the seed files.
func seedPages(f *testing.F) [][]byte {
	var out [][]byte
	for _, data := range testFiles(f) {
		ms, _ := ReadMetas(bytes.NewReader(data), int64(len(data)))
		ps := ms.Meta.PageSize
		for _, flags := range []uint16{flagBranch, flagLeaf, flagFreelist} {
			for _, id := range pagesOf(data, ps, flags) {
				out = append(out, data[id*uint64(ps):(id+1)*uint64(ps)])
				if len(out) > 64 {
					return out
				}
			}
		}
	}
	return out
}

func FuzzDecodeMeta(f *testing.F) {
	for _, data := range seedFiles(f) {
		f.Add(data[:probeSize])
	}
	f.Add(make([]byte, probeSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b, 0)
		if err != nil {
			return
		}
		buf := make([]byte, len(b))
		copy(buf, b)
		EncodeMeta(buf, m, 0)
		m2, err := DecodeMeta(buf, 0)
		if err != nil || m2 != m {
			t.Fatalf("re-encoded meta %+v, %v; want %+v", m2, err, m)
		}
	})
}

// pageFile puts b at page 2 of a file of 1 KiB pages (its overflow pages
// after it), with a meta naming every page, so that a page's decoding and
// translation can be fuzzed alone.
func pageFile(b []byte) *File {
	const ps = 1024
	pages := uint64(2 + (len(b)+ps-1)/ps)
	if pages < 3 {
		pages = 3
	}
	data := make([]byte, pages*ps)
	copy(data[2*ps:], b)
	binary.LittleEndian.PutUint64(data[2*ps:], 2) // the page names itself
	return &File{data: data, ps: ps, meta: Meta{PageSize: ps, Root: 2, Freelist: NoFreelist, HWM: pages, Txid: 5}}
}

func FuzzTranslatePage(f *testing.F) {
	for _, p := range seedPages(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file := pageFile(b)
		n, err := NewSource(file, 1<<16).ReadNode(page.Ref{ID: 2})
		if err != nil {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("%v is not ErrCorrupt", err)
			}
			return
		}
		// A translated node is a valid rivet node: every accessor works.
		for i := 0; i < n.Count(); i++ {
			if !n.IsLeaf() {
				if _, err := n.BranchKey(i); err != nil {
					t.Fatalf("translated branch element %d: %v", i, err)
				}
				if ref := n.BranchChild(i); ref.ID < 2 || ref.ID >= file.meta.HWM || ref.Txid != 5 {
					t.Fatalf("translated child %+v", ref)
				}
				continue
			}
			flags, k, _, err := n.LeafElem(i)
			if err != nil {
				t.Fatalf("translated leaf element %d: %v", i, err)
			}
			if flags == page.FlagBucket {
				v := leafValue(t, n, i)
				rec, err := page.DecodeBucketRecord(2, v)
				if err != nil {
					t.Fatalf("translated bucket record: %v", err)
				}
				if rec.Inline != nil {
					if _, err := page.InlineLeaf(2, rec.Inline); err != nil {
						t.Fatalf("translated inline bucket: %v", err)
					}
				}
			} else if flags != 0 {
				t.Fatalf("translated flags %d", flags)
			}
			if _, _, err := n.LeafSearch(k); err != nil {
				t.Fatalf("search: %v", err)
			}
		}
		if !n.IsLeaf() {
			if _, err := n.BranchSearch(nil); err != nil {
				t.Fatalf("search: %v", err)
			}
		}
		file.Check(func(error) bool { return true })
		_ = file.Walk(func(digest.Entry) error { return nil })
	})
}

func leafValue(t *testing.T, n page.Node, i int) []byte {
	_, _, v, err := n.LeafElem(i)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzBucketValue(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Add(append(make([]byte, 16), make([]byte, 16)...))
	for _, data := range testFiles(f) {
		file := open(f, data)
		for _, id := range pagesOf(data, file.ps, flagLeaf) {
			p, err := file.Node(id)
			if err != nil {
				continue
			}
			for i := 0; i < p.Count(); i++ {
				if bucket, _, v, err := p.LeafElem(i); err == nil && bucket {
					f.Add(bytes.Clone(v))
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		file := pageFile(nil)
		s := NewSource(file, 0)
		rec, err := s.bucketRecord(2, v)
		if err != nil {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("%v is not ErrCorrupt", err)
			}
			return
		}
		if _, err := page.DecodeBucketRecord(2, rec); err != nil {
			t.Fatalf("a translated bucket record does not decode: %v", err)
		}
	})
}

func FuzzFreelist(f *testing.F) {
	for _, data := range testFiles(f) {
		file := open(f, data)
		for _, id := range pagesOf(data, file.ps, flagFreelist) {
			f.Add(bytes.Clone(data[id*uint64(file.ps) : (id+1)*uint64(file.ps)]))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file := pageFile(b)
		ids, pages, err := file.Freelist(2)
		if err != nil {
			return
		}
		if uint64(len(ids))/8 > pages*uint64(file.ps)/8 || len(ids)%8 != 0 {
			t.Fatalf("%d id bytes from a %d-page run", len(ids), pages)
		}
		if n, _ := file.FreeCount(); n != 0 {
			t.Fatalf("FreeCount of a file without a freelist: %d", n)
		}
	})
}

// FuzzFile treats arbitrary bytes as a bbolt file and walks all of it: the
// metas, the check, the canonical walk, the translation of every page.
// Each is bounded by the file's pages, so this ends on every input.
func FuzzFile(f *testing.F) {
	for _, data := range seedFiles(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ReadMetas(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		file, err := New(data, ms.Meta)
		if err != nil {
			return
		}
		reports := 0
		file.Check(func(err error) bool {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("check: %v is not ErrCorrupt", err)
			}
			reports++
			return reports < 1000
		})
		err = file.Walk(func(digest.Entry) error { return nil })
		if err != nil && !errors.Is(err, rerrors.ErrCorrupt) && !errors.Is(err, digest.ErrKeyOutsideBucket) {
			t.Fatalf("walk: %v is neither corruption nor a key outside any bucket", err)
		}
		src := NewSource(file, 1<<16)
		for id := uint64(0); id < file.meta.HWM; id++ {
			_, _ = src.ReadNode(page.Ref{ID: id})
		}
		_, _ = file.FreeCount()
	})
}

package inspect_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/rivetkv/rivet/inspect"
)

// FuzzDecodePage feeds arbitrary bytes to the public decoders: DecodePage
// at any page id and high-water mark, and ReadMetas over the bytes as a
// file. They must not panic, and what they return must be consistent
// with the bytes given.
func FuzzDecodePage(f *testing.F) {
	img, err := os.ReadFile(makeFile(f, 200))
	if err != nil {
		f.Fatal(err)
	}
	for id := 0; id*testPageSize < len(img); id++ {
		f.Add(img[id*testPageSize:], uint64(id), uint8(0), uint64(len(img)/testPageSize))
	}
	f.Add([]byte{}, uint64(2), uint8(1), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, id uint64, sizeSel uint8, hwm uint64) {
		ps := inspect.MinPageSize << (sizeSel % 7)
		if len(b) < ps && len(b) > 0 {
			// Stretch the input to a page so most cases decode.
			b = bytes.Repeat(b, ps/len(b)+1)
		}
		p, err := inspect.DecodePage(b, id, ps, hwm)
		if ps > inspect.MaxPageSize || len(b) < ps {
			if err == nil {
				t.Fatalf("page size %d, %d bytes: accepted", ps, len(b))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		set := 0
		for _, ok := range []bool{p.Meta != nil, p.Node != nil, p.Blob != nil, p.RegionMap != nil} {
			if ok {
				set++
			}
		}
		if set > 1 || (set == 1 && p.Err != nil) {
			t.Fatalf("page %d decodes as %d things, error %v", id, set, p.Err)
		}
		if n := p.Node; n != nil && (len(n.Elements) > n.Count || (len(n.Elements) < n.Count) != (n.Err != nil)) {
			t.Fatalf("node of %d elements decoded %d, error %v", n.Count, len(n.Elements), n.Err)
		}
		if bl := p.Blob; bl != nil && (uint64(len(bl.Payload)) > bl.Length || bl.PagesRead > bl.Pages) {
			t.Fatalf("blob %+v", bl)
		}
		metas, errs := inspect.ReadMetas(bytes.NewReader(b), int64(len(b)))
		for slot := range metas {
			if (metas[slot] == nil) == (errs[slot] == nil) {
				t.Fatalf("meta %d: %+v, %v", slot, metas[slot], errs[slot])
			}
		}
	})
}

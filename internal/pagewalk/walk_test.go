package pagewalk

import (
	"bytes"
	"errors"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// testPS is the page size of the images the tests build.
const testPS = page.MinPageSize

// testImage builds a one-region snapshot by hand and returns its bytes
// and meta:
//
//	0, 1          metas (1 is an older state)
//	2, 3          region 0's map slots (3 never written)
//	d             root bucket's leaf: bucket "a"
//	d+1           a's leaf: "k" and the blob "big"
//	d+2, d+3      the blob's extent
//	d+4           free
//	d+5           leaked: used in the map, reached by nothing
//
// where d = page.RegionFirstData(testPS, 0).
func testImage() ([]byte, *page.Meta) {
	const txid = 5
	d := page.RegionFirstData(testPS, 0)
	hwm := d + 6
	img := make([]byte, hwm*testPS)
	at := func(id page.ID, n uint64) []byte { return img[id*testPS : (id+n)*testPS] }

	page.EncodeBlobExtent(at(d+2, 2), testPS, d+2, txid, page.ExtentRef{}, bytes.Repeat([]byte("B"), 1500))
	blob := page.BlobRef{Length: 1500, First: page.ExtentRef{
		Ref: page.Ref{ID: d + 2, Txid: txid, Checksum: page.Checksum(at(d+2, 2))}, Pages: 2}}
	page.EncodeLeaf(at(d+1, 1), testPS, d+1, txid, []page.LeafElem{
		{Flags: page.FlagBlob, Key: []byte("big"), Value: blob.Encode()},
		{Key: []byte("k"), Value: []byte("v")},
	})
	bucket := page.BucketRecord{Root: page.Ref{ID: d + 1, Txid: txid, Checksum: page.Checksum(at(d+1, 1))}}
	page.EncodeLeaf(at(d, 1), testPS, d, txid, []page.LeafElem{
		{Flags: page.FlagBucket, Key: []byte("a"), Value: bucket.Encode()},
	})

	free := make([]uint64, page.RegionMapWords(testPS))
	free[(d+4)/64] |= 1 << ((d + 4) % 64)
	slot := page.MapSlot(testPS, 0, 0)
	page.EncodeRegionMap(at(slot, 1), testPS, slot, txid, free)

	meta := &page.Meta{
		PageSize: testPS, Txid: txid, Steady: txid, HWM: hwm,
		Root:        page.Ref{ID: d, Txid: txid, Checksum: page.Checksum(at(d, 1))},
		RegionPages: page.RegionPages(testPS), FreePages: 1,
		Selector: []byte{0}, Changed: []byte{1},
	}
	page.EncodeMeta(at(0, 1), meta)
	older := *meta
	older.Txid, older.Steady = txid-1, txid-1
	older.Root.Txid = txid - 1
	page.EncodeMeta(at(1, 1), &older)
	return img, meta
}

// walkAll runs a whole walk and fails the test unless its uses cover
// [0, HWM) exactly once, in order.
func walkAll(t testing.TB, img []byte, meta *page.Meta, src FreeSource) []Use {
	t.Helper()
	w := New(img, testPS, meta)
	w.Trees()
	w.ReadFreeSet(src)
	var uses []Use
	next := page.ID(0)
	err := w.Emit(func(u Use) error {
		if u.ID != next || u.Pages < 1 || u.Kind < Meta || u.Kind > Unknown {
			t.Fatalf("use %+v: want a run of a known kind starting at page %d", u, next)
		}
		next += uint64(u.Pages)
		uses = append(uses, u)
		return nil
	})
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	if next != meta.HWM {
		t.Fatalf("uses cover [0, %d), the HWM is %d", next, meta.HWM)
	}
	return uses
}

// TestWalkImage: every page of a hand-built snapshot gets the use its
// layout gives it, read from the region maps.
func TestWalkImage(t *testing.T) {
	img, meta := testImage()
	d := page.RegionFirstData(testPS, 0)
	type want struct {
		id      page.ID
		pages   int
		kind    Kind
		bucket  string
		key     string
		current bool
		bad     bool // Err set
	}
	wants := []want{
		{id: 0, pages: 1, kind: Meta, current: true},
		{id: 1, pages: 1, kind: Meta},
		{id: 2, pages: 1, kind: RegionMap, current: true},
		{id: 3, pages: 1, kind: RegionMap},
		{id: d, pages: 1, kind: Leaf},
		{id: d + 1, pages: 1, kind: Leaf, bucket: "a"},
		{id: d + 2, pages: 2, kind: Blob, bucket: "a", key: "big"},
		{id: d + 4, pages: 1, kind: Free},
		{id: d + 5, pages: 1, kind: Unreachable, bad: true},
	}
	uses := walkAll(t, img, meta, FreeSource{})
	if len(uses) != len(wants) {
		t.Fatalf("%d uses, want %d: %+v", len(uses), len(wants), uses)
	}
	for i, u := range uses {
		w := wants[i]
		var bucket string
		if len(u.Bucket) > 0 {
			bucket = string(bytes.Join(u.Bucket, []byte("/")))
		}
		if u.ID != w.id || u.Pages != w.pages || u.Kind != w.kind || bucket != w.bucket || string(u.Key) != w.key ||
			u.Current != w.current || (u.Err != nil) != w.bad {
			t.Errorf("use %d: %+v, want %+v", i, u, w)
		}
		if (u.Kind == Leaf || u.Kind == Blob) && (u.Checksum != ChecksumOK || u.Txid != meta.Txid) {
			t.Errorf("use %d: %+v: checksum or txid", i, u)
		}
	}
	if err := uses[len(uses)-1].Err; !errors.Is(err, rerrors.ErrCorrupt) {
		t.Errorf("leaked page: %v, want ErrCorrupt", err)
	}

	// The same free set handed in as unknown: the pages no tree reaches
	// carry the reason, and the reachable ones are unchanged.
	why := errors.New("not known here")
	for i, u := range walkAll(t, img, meta, FreeSource{Unknown: why}) {
		switch {
		case u.ID >= d+4:
			if u.Kind != Unknown || u.Err != why {
				t.Errorf("use %d with the free set unknown: %+v", i, u)
			}
		case u.Kind != wants[i].kind:
			t.Errorf("use %d with the free set unknown: %+v, want %v", i, u, wants[i].kind)
		}
	}
}

// TestWalkTruncated: pages below the HWM that the file does not hold are
// one damaged run, and a run the root's tree points to beyond the file is
// damage named at its parent, not a read past the end.
func TestWalkTruncated(t *testing.T) {
	img, meta := testImage()
	d := page.RegionFirstData(testPS, 0)
	short := img[:(d+3)*testPS] // half the blob's extent is gone
	uses := walkAll(t, short, meta, FreeSource{})
	last := uses[len(uses)-1]
	if last.ID != d+3 || last.Kind != Damaged || last.Pages != 3 || !errors.Is(last.Err, rerrors.ErrCorrupt) {
		t.Errorf("past the end: %+v", last)
	}
	var damaged int
	for _, u := range uses {
		if u.Err != nil {
			damaged++
		}
	}
	if damaged < 2 {
		t.Errorf("truncated blob: %d uses with an error, want the blob's leaf and the missing pages: %+v", damaged, uses)
	}
}

// FuzzWalk: whatever the bytes of the file, a walk neither panics nor
// loses a page: it covers [0, HWM) exactly once, in order.
func FuzzWalk(f *testing.F) {
	img, _ := testImage()
	f.Add(img, uint8(0))
	f.Add(img[:len(img)-testPS], uint8(1))
	damaged := bytes.Clone(img)
	damaged[(page.RegionFirstData(testPS, 0)+1)*testPS+100] ^= 0xff
	f.Add(damaged, uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, choice uint8) {
		if len(b) < 2*testPS || len(b) > 64*testPS {
			return
		}
		meta, err := page.DecodeMeta(0, b[:testPS])
		if err != nil || meta.PageSize != testPS {
			// A meta that does not decode is not walked; take the
			// original one, with its HWM, over the fuzzed bytes.
			_, meta = testImage()
		}
		if meta.HWM > 1<<20 {
			// The walk allocates by the pages the file holds, but Emit's
			// last run reports the rest up to the HWM; keep it countable.
			meta.HWM = 1 << 20
		}
		src := FreeSource{}
		if choice%2 == 1 {
			src.Unknown = errors.New("unknown")
		}
		walkAll(t, b, meta, src)
	})
}

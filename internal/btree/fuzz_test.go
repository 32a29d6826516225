package btree

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// fuzzPS is the page size of the fuzzed image: small, so a tree of a few
// hundred keys is several levels deep and the image stays cheap to copy.
const fuzzPS = page.MinPageSize

// fuzzInline is the inline limit of the fuzz images: a quarter page, so
// that values of a few hundred bytes are blobs and the images stay small
// (the default, eight pages, would need values of 8 KiB).
const fuzzInline = fuzzPS / 4

// maxSteps bounds every walk over the fuzzed image. The valid tree has a few
// hundred elements, so a walk that needs more steps is running in circles.
const maxSteps = 100000

// bumpAlloc allocates runs past the end of the image and ignores frees: an
// image built with it is a valid tree and nothing else.
type bumpAlloc struct {
	next  uint64
	frees int
}

func (a *bumpAlloc) Allocate(n uint64) (page.ID, error) {
	id := a.next
	a.next += n
	return id, nil
}

func (a *bumpAlloc) Free(id page.ID, n, _ uint64) error {
	a.frees++
	return nil
}

// applyRuns writes runs into img at their pages, growing it.
func applyRuns(img []byte, runs []page.Run) []byte {
	for _, r := range runs {
		end := int(r.ID)*fuzzPS + len(r.Data)
		if end > len(img) {
			img = append(img, make([]byte, end-len(img))...)
		}
		copy(img[int(r.ID)*fuzzPS:], r.Data)
	}
	return img
}

// fuzzImage is the valid image every input mutates, built once.
type fuzzImage struct {
	img  []byte
	root page.Ref
	hwm  uint64
	txid uint64
	keys [][]byte
}

var fuzzBase *fuzzImage

// buildFuzzImage commits three transactions into an in-memory image: a root
// tree of a few hundred keys with inline values, blob values (> page/4, in
// one- and multi-page extents), a nested bucket and an empty one; then two
// more that update, delete and replace blobs, so pages carry txids 1..3.
func buildFuzzImage(tb testing.TB) *fuzzImage {
	if fuzzBase != nil {
		return fuzzBase
	}
	a := &bumpAlloc{next: 4}
	img := make([]byte, 4*fuzzPS)
	var keys [][]byte
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%05d", i)) }

	// txn 1: a nested bucket's tree and the root tree.
	env := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: a.next, Txid: 1, Alloc: a}
	sub := Open(env, page.Ref{})
	for i := 0; i < 60; i++ {
		must(tb, sub.Put([]byte(fmt.Sprintf("sub%03d", i)), bytes.Repeat([]byte{byte(i)}, i%40), 0, 0))
	}
	must(tb, sub.Put([]byte("subblob"), bytes.Repeat([]byte("S"), 3000), 0, 0))
	must(tb, sub.Rebalance())
	must(tb, sub.Spill())
	t := Open(env, page.Ref{})
	for i := 0; i < 300; i++ {
		v := []byte(fmt.Sprintf("value-%d", i))
		if i%37 == 0 {
			v = bytes.Repeat([]byte{byte('a' + i%26)}, 300+i*10) // > page/4: a blob
		}
		must(tb, t.Put(key(i), v, 0, 0))
		keys = append(keys, key(i))
	}
	must(tb, t.Put([]byte("nested"), page.BucketRecord{Root: sub.Root(), Sequence: 3}.Encode(), page.FlagBucket, 0))
	must(tb, t.Put([]byte("emptybucket"), page.BucketRecord{}.Encode(), page.FlagBucket, 0))
	keys = append(keys, []byte("nested"), []byte("emptybucket"))
	must(tb, t.Rebalance())
	must(tb, t.Spill())
	img = applyRuns(img, env.Runs)
	root := t.Root()

	// txns 2 and 3: updates, deletes and a replaced blob.
	for txid := uint64(2); txid <= 3; txid++ {
		env := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: a.next, Txid: txid, Alloc: a}
		t := Open(env, root)
		for i := int(txid); i < 300; i += 17 {
			must(tb, t.Put(key(i), []byte(fmt.Sprintf("update-%d-%d", txid, i)), 0, 0))
		}
		if _, err := t.Delete(key(int(txid)*50), 0); err != nil {
			tb.Fatal(err)
		}
		must(tb, t.Put(key(int(txid)*37), bytes.Repeat([]byte("B"), 2500), 0, 0))
		must(tb, t.Rebalance())
		must(tb, t.Spill())
		img = applyRuns(img, env.Runs)
		root = t.Root()
	}
	fuzzBase = &fuzzImage{img: img, root: root, hwm: a.next, txid: 3, keys: keys}
	return fuzzBase
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// mutate applies a fuzzer-chosen list of edits to img. Each edit is 6 bytes:
// op, a 24-bit offset (or two page numbers) and a 16-bit argument.
func mutate(img []byte, muts []byte) {
	pages := len(img) / fuzzPS
	for len(muts) >= 6 {
		op, arg := muts[0], binary.LittleEndian.Uint16(muts[4:])
		off := int(uint32(muts[1])|uint32(muts[2])<<8|uint32(muts[3])<<16) % len(img)
		muts = muts[6:]
		switch op % 6 {
		case 0: // set a byte
			img[off] = byte(arg)
		case 1: // flip a bit
			img[off] ^= 1 << (arg % 8)
		case 2: // a huge little-endian u32 (counts, offsets, lengths)
			if off+4 <= len(img) {
				binary.LittleEndian.PutUint32(img[off:], 0xffff0000|uint32(arg))
			}
		case 3: // a small u32 (page ids, txids)
			if off+4 <= len(img) {
				binary.LittleEndian.PutUint32(img[off:], uint32(arg))
			}
		case 4: // zero a page
			p := off / fuzzPS
			clear(img[p*fuzzPS : (p+1)*fuzzPS])
		case 5: // copy a page over another
			src, dst := off/fuzzPS, int(arg)%pages
			copy(img[dst*fuzzPS:(dst+1)*fuzzPS], img[src*fuzzPS:(src+1)*fuzzPS])
		}
	}
}

// requireCorrupt fails unless err (if any) is a *CorruptError.
func requireCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ce *rerrors.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("%s: error %v (%T) is not a *CorruptError", what, err, err)
	}
}

// walkTree runs every read path over the tree rooted at root and recurses
// into nested buckets; steps counts cursor moves across the whole input.
func walkTree(t *testing.T, env *Env, root page.Ref, seeks [][]byte, depth int, steps *int) {
	t.Helper()
	if depth > MaxDepth {
		// Bucket nesting is the caller's notion: this package opens one
		// tree per record and cannot tell a cycle of bucket records from
		// deep nesting (see the root package's hostile tests).
		return
	}
	tick := func(what string) {
		*steps++
		if *steps > maxSteps {
			t.Fatalf("%s: more than %d cursor steps over a tree of a few hundred keys", what, maxSteps)
		}
	}
	tr := Open(env, root)
	var nested []page.Ref
	c := tr.Cursor()
	for k, v, f, ok := c.First(); ok; k, v, f, ok = c.Next() {
		tick("First/Next")
		if k == nil {
			t.Fatalf("cursor returned ok with a nil key")
		}
		switch {
		case f == page.FlagBucket:
			if rec, err := page.DecodeBucketRecord(root.ID, v); err == nil && !rec.Root.IsZero() {
				nested = append(nested, rec.Root)
			}
		case IsBlob(f):
			val, err := tr.Value(v, f)
			requireCorrupt(t, "Value", err)
			if err == nil && len(val) <= env.MaxInlineValue() {
				t.Fatalf("blob value of %d bytes, not above the inline limit", len(val))
			}
		}
	}
	c = tr.Cursor()
	for _, _, _, ok := c.Last(); ok; _, _, _, ok = c.Prev() {
		tick("Last/Prev")
	}
	for _, s := range seeks {
		c = tr.Cursor()
		n := 0
		for _, _, _, ok := c.Seek(s); ok && n < 3; _, _, _, ok = c.Next() {
			tick("Seek/Next")
			n++
		}
		tr.Get(s)
		tick("Get")
	}
	for _, r := range nested {
		walkTree(t, env, r, seeks, depth+1, steps)
	}
}

// FuzzTreeRead mutates a valid tree image and runs every read path over
// it: cursor walks in both directions, seeks, gets, blob reads, the full
// Walker with and without checksums, FreeAll, and a write transaction
// (Put, Delete, Rebalance, Spill). Nothing may panic, every walk must end
// within maxSteps, and every error must be a *CorruptError.
func FuzzTreeRead(f *testing.F) {
	base := buildFuzzImage(f)
	f.Add([]byte{}, []byte("key00100"))
	f.Add([]byte{1, 0x10, 0x10, 0, 3, 0}, []byte("key00037\x00nested"))
	f.Add([]byte{2, 4, 0x14, 0, 0, 0, 4, 0, 0x18, 0, 0, 0}, []byte("a"))
	f.Add([]byte{5, 0, 0x14, 0, 7, 0, 3, 0x10, 0x18, 0, 9, 0}, []byte("key00299\x00zzz"))
	f.Add([]byte{0, 0x1c, 0x0c, 0, 0xff, 0}, []byte("sub010"))
	f.Fuzz(func(t *testing.T, muts []byte, seekList []byte) {
		img := bytes.Clone(base.img)
		mutate(img, muts)
		seeks := bytes.Split(seekList, []byte{0})
		if len(seeks) > 8 {
			seeks = seeks[:8]
		}
		seeks = append(seeks, base.keys[7], base.keys[len(base.keys)/2])

		hints := &checkedHints{t: t, hwm: base.hwm}
		env := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: base.hwm, Txid: base.txid, Readahead: hints}
		steps := 0
		walkTree(t, env, base.root, seeks, 0, &steps)
		requireCorrupt(t, "read env", env.Err)

		for _, verify := range []bool{true, false} {
			visits := 0
			fetched := uint64(0)
			var errs []error
			w := Walker{
				Fetch: func(id page.ID, n uint64) ([]byte, error) {
					if id >= base.hwm || n > base.hwm-id {
						return nil, page.Corruptf(id, "run of %d pages beyond the image", n)
					}
					fetched += n
					return img[id*fuzzPS : (id+n)*fuzzPS], nil
				},
				PageSize:        fuzzPS,
				HWM:             base.hwm,
				All:             true,
				VerifyChecksums: verify,
				Readahead:       hints,
				Visit: func(id page.ID, n uint64, typ page.Type) error {
					visits++
					if visits > maxSteps {
						t.Fatalf("Walker (checksums %t): more than %d runs visited in a %d-page image", verify, maxSteps, base.hwm)
					}
					return nil
				},
				Report: func(err error) bool {
					errs = append(errs, err)
					return len(errs) < 1000
				},
			}
			first := w.Walk(base.root)
			// The Walker's invariant: each page is read at most twice.
			if fetched > 2*base.hwm {
				t.Fatalf("Walker (checksums %t) read %d pages of a %d-page image, more than twice each", verify, fetched, base.hwm)
			}
			requireCorrupt(t, "Walker", first)
			for _, err := range errs {
				requireCorrupt(t, "Walker report", err)
			}
			if (first == nil) != (len(errs) == 0) {
				t.Fatalf("Walker returned %v but reported %d problems", first, len(errs))
			}
		}

		// Write paths over the damaged image.
		a := &bumpAlloc{next: base.hwm}
		wenv := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: base.hwm, Txid: base.txid + 1, Alloc: a}
		tr := Open(wenv, base.root)
		for _, s := range seeks {
			if len(s) == 0 {
				continue
			}
			requireCorrupt(t, "Put", tr.Put(s, []byte("v"), 0, 0))
		}
		_, err := tr.Delete(base.keys[11], 0)
		requireCorrupt(t, "Delete", err)
		if wenv.Err == nil {
			requireCorrupt(t, "Rebalance", tr.Rebalance())
		}
		if wenv.Err == nil {
			requireCorrupt(t, "Spill", tr.Spill())
		}
		fenv := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: base.hwm, Txid: base.txid + 1, Alloc: &bumpAlloc{next: base.hwm}}
		requireCorrupt(t, "FreeAll", FreeAll(fenv, base.root))
		if fa := fenv.Alloc.(*bumpAlloc); fa.frees > maxSteps {
			t.Fatalf("FreeAll freed %d runs of a %d-page image", fa.frees, base.hwm)
		}
	})
}

// The image the fuzzer starts from must itself be valid: every walk clean.
func TestFuzzImageIsValid(t *testing.T) {
	base := buildFuzzImage(t)
	env := &Env{Data: base.img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: base.hwm, Txid: base.txid}
	steps := 0
	walkTree(t, env, base.root, nil, 0, &steps)
	if env.Err != nil {
		t.Fatal(env.Err)
	}
	if steps < 300 {
		t.Fatalf("only %d steps over the valid image", steps)
	}
	types := map[page.Type]int{}
	w := Walker{
		Fetch:           func(id page.ID, n uint64) ([]byte, error) { return base.img[id*fuzzPS : (id+n)*fuzzPS], nil },
		PageSize:        fuzzPS,
		HWM:             base.hwm,
		All:             true,
		VerifyChecksums: true,
		Visit:           func(id page.ID, n uint64, typ page.Type) error { types[typ]++; return nil },
	}
	if err := w.Walk(base.root); err != nil {
		t.Fatal(err)
	}
	if types[page.TypeBranch] == 0 || types[page.TypeLeaf] < 5 || types[page.TypeBlob] < 5 {
		t.Fatalf("image lacks variety: %v", types)
	}
	tr := Open(env, base.root)
	v, f, ok := tr.Get([]byte("key00074"))
	if !ok || !IsBlob(f) {
		t.Fatalf("key00074: found %t flags %d", ok, f)
	}
	if val, err := tr.Value(v, f); err != nil || len(val) != 2500 {
		t.Fatalf("blob key00074: %d bytes, %v", len(val), err)
	}
}

// hostileImage lays out encoded runs (page id -> one-page run) in an image of
// hwm pages.
func hostileImage(hwm uint64, runs map[page.ID][]byte) []byte {
	img := make([]byte, hwm*fuzzPS)
	for id, r := range runs {
		copy(img[id*fuzzPS:], r)
	}
	return img
}

// A blob extent whose successor is itself, under a reference claiming an
// enormous length: Walker.blob only stops when the running total passes the
// length, so it must bound the length (as readBlob does) or it loops for
// ~2^64/payload iterations. Fetch stops the walk after a bound so the test
// ends either way.
func TestWalkerBlobCycleTerminates(t *testing.T) {
	const txid = 1
	ext := make([]byte, fuzzPS)
	page.EncodeBlobExtent(ext, fuzzPS, 5, txid, page.ExtentRef{Ref: page.Ref{ID: 5, Txid: txid}, Pages: 1}, []byte("cycle"))
	leaf := make([]byte, fuzzPS)
	ref := page.BlobRef{Length: 1<<64 - 1, First: page.ExtentRef{Ref: page.Ref{ID: 5, Txid: txid}, Pages: 1}}
	page.EncodeLeaf(leaf, fuzzPS, 4, txid, []page.LeafElem{{Flags: page.FlagBlob, Key: []byte("k"), Value: ref.Encode()}})
	img := hostileImage(6, map[page.ID][]byte{4: leaf, 5: ext})
	root := page.Ref{ID: 4, Txid: txid}

	// The read path bounds the length by the file and MaxValueSize.
	env := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: 6, Txid: txid}
	tr := Open(env, root)
	v, f, ok := tr.Get([]byte("k"))
	if !ok {
		t.Fatalf("key not found: %v", env.Err)
	}
	if _, err := tr.Value(v, f); !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("Value of a cyclic blob: %v, want ErrCorrupt", err)
	}

	fetches := 0
	w := Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			fetches++
			if fetches > 10000 {
				return nil, errors.New("test: walk ran away")
			}
			return img[id*fuzzPS : (id+n)*fuzzPS], nil
		},
		PageSize: fuzzPS,
		HWM:      6,
		All:      true,
		Report:   func(error) bool { return true },
	}
	err := w.Walk(root)
	if fetches > 10000 {
		t.Fatalf("regression walker-blob-cycle: Walker.blob followed a cyclic chain %d times (length %d not bounded)", fetches-1, ref.Length)
	}
	if !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("Walk over a cyclic blob: %v, want ErrCorrupt", err)
	}
}

// A DAG of branch pages (every branch's two children are the same page,
// all written by one txn) has no cycle and no path deeper than MaxDepth, yet
// 2^depth root-to-leaf paths: a cursor that never checks that keys advance
// walks them all. It must fail with ErrCorrupt instead.
func TestCursorBranchDAGTerminates(t *testing.T) {
	const txid, levels = 1, 40
	runs := map[page.ID][]byte{}
	leaf := make([]byte, fuzzPS)
	page.EncodeLeaf(leaf, fuzzPS, 4, txid, []page.LeafElem{{Key: []byte("k"), Value: []byte("v")}})
	runs[4] = leaf
	child := page.Ref{ID: 4, Txid: txid, Checksum: page.Checksum(leaf)}
	for id := page.ID(5); id < 5+levels; id++ {
		b := make([]byte, fuzzPS)
		page.EncodeBranch(b, fuzzPS, id, txid, []page.BranchElem{{Key: []byte("k"), Child: child}, {Key: []byte("l"), Child: child}})
		runs[id] = b
		child = page.Ref{ID: id, Txid: txid, Checksum: page.Checksum(b)}
	}
	img := hostileImage(5+levels, runs)
	env := &Env{Data: img, PageSize: fuzzPS, InlineLimit: fuzzInline, HWM: 5 + levels, Txid: txid}
	tr := Open(env, child)
	steps := 0
	c := tr.Cursor()
	for _, _, _, ok := c.First(); ok && steps < 10000; _, _, _, ok = c.Next() {
		steps++
	}
	if steps >= 10000 {
		t.Fatalf("regression cursor-dag: First/Next returned the same leaf's key %d times on a %d-page file and would go on 2^%d times", steps, 5+levels, levels)
	}
	if !errors.Is(env.Err, rerrors.ErrCorrupt) {
		t.Fatalf("cursor over a branch DAG: %d steps, env.Err %v, want ErrCorrupt", steps, env.Err)
	}
}

// A walk split between two walkers (Workers 2) visits the same runs as a
// walk by one, and reports damage that only the second half reaches.
func TestWalkerWorkersVisitTheSame(t *testing.T) {
	base := buildFuzzImage(t)
	walk := func(img []byte, workers int) (map[page.ID]page.Type, error) {
		var mu sync.Mutex
		seen := map[page.ID]page.Type{}
		w := Walker{
			Fetch:           func(id page.ID, n uint64) ([]byte, error) { return img[id*fuzzPS : (id+n)*fuzzPS], nil },
			PageSize:        fuzzPS,
			HWM:             base.hwm,
			All:             true,
			VerifyChecksums: true,
			Visit: func(id page.ID, n uint64, typ page.Type) error {
				mu.Lock()
				defer mu.Unlock()
				seen[id] = typ
				return nil
			},
			Workers: workers,
		}
		return seen, w.Walk(base.root)
	}
	one, err := walk(base.img, 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := walk(base.img, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(one, two) {
		t.Fatalf("one walker visited %d runs, two walkers %d", len(one), len(two))
	}
	// Damage the rightmost leaf: it lies under the root's last child, in
	// the half the second walker takes.
	ref := base.root
	for depth := 0; ; depth++ {
		n, err := page.NodeFromBuffer(base.img[ref.ID*fuzzPS:(ref.ID+1)*fuzzPS], fuzzPS, ref.ID, ref.Txid, base.hwm)
		if err != nil {
			t.Fatal(err)
		}
		if n.IsLeaf() {
			if depth == 0 {
				t.Fatal("the image's root is a leaf: there is nothing to split")
			}
			break
		}
		ref = n.BranchChild(n.Count() - 1)
	}
	last := ref.ID
	damaged := slices.Clone(base.img)
	damaged[last*fuzzPS+fuzzPS-1] ^= 0xff
	for _, workers := range []int{1, 2} {
		if _, err := walk(damaged, workers); !errors.Is(err, rerrors.ErrCorrupt) {
			t.Fatalf("%d walker(s) over a damaged leaf %d: %v, want ErrCorrupt", workers, last, err)
		}
	}
}

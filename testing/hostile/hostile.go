// Package hostile damages rivet files on purpose, for tests and benchmarks:
// it re-encodes the pages of a valid file into a tree of a chosen bad shape
// (shared subtrees, cycles) and re-seals every checksum and txid on the way
// up to the meta, so that the damage passes every cheap check and only a
// walk that remembers where it has been can tell. Nothing in the library
// imports it; it is public so that the tool's and the benchmark harness's
// modules, which may not import internal packages, can build such files.
// It is no part of rivet's storage API.
package hostile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
)

// Shape names a damaged tree that Build makes.
type Shape string

// The shapes. Each is built from the node pages of one top-level bucket's
// tree, levels deep: a DAG whose unfolding has fan-out^levels paths (about
// 31 per level at 1 KiB pages, 127 at 4 KiB), or a cycle back to the top.
const (
	// BranchDAG: every branch's elements all point at one child branch.
	BranchDAG Shape = "branch DAG"
	// BucketDAG: every leaf's elements are bucket records all naming one
	// child leaf as their root. Nested bucket roots carry no key bounds
	// from their parents, so nothing but remembering pages tells the
	// copies apart.
	BucketDAG Shape = "bucket DAG"
	// BranchCycle: a chain of branches whose deepest one points back at
	// the top from every element but its first.
	BranchCycle Shape = "branch cycle"
	// BucketCycle: a chain of leaves, each a bucket record for the next,
	// whose deepest one names the top as the root of every one of its
	// buckets.
	BucketCycle Shape = "bucket cycle"
)

// Shapes lists every shape.
var Shapes = []Shape{BranchDAG, BucketDAG, BranchCycle, BucketCycle}

// Damage describes what Build made.
type Damage struct {
	// Top is the structure's first page: the bucket's record names it.
	Top page.ID
	// Twice is the first page a depth-first walk that remembers pages
	// finds reachable a second time: the bottom leaf of a DAG, the top of
	// a cycle.
	Twice page.ID
	// HWM is the damaged state's high-water mark (its pages).
	HWM uint64
}

// cycleChecksum is the checksum the top of a cycle is forged to have, so
// that the reference back to it can record it before the pages below are
// encoded.
const cycleChecksum = 0x0bad5eed

// Build damages img, a rivet file's bytes, in place: the tree of the
// top-level bucket named bucket becomes shape, levels deep (at least 2),
// made of the tree's own node pages, which must number at least levels+1.
// The root bucket's root must be a single leaf (a file with a few top-level
// buckets) and the bucket's tree must not be inline.
//
// With fresh, the damaged pages carry the txid of the newest commit's root
// leaf, so that Open's recovery, which verifies what the last sync point
// wrote, reads them when that commit was not followed by a clean Close;
// otherwise they keep the bucket's txid and only reads and Check meet them.
func Build(img []byte, bucket string, shape Shape, levels int, fresh bool) (Damage, error) {
	f, err := parse(img)
	if err != nil {
		return Damage{}, err
	}
	rootLeaf := f.meta.Root.ID
	recOff, err := f.recordOffset(rootLeaf, bucket)
	if err != nil {
		return Damage{}, err
	}
	rec, err := page.DecodeBucketRecord(rootLeaf, img[recOff:recOff+page.RecordSize])
	if err != nil || rec.Root.IsZero() {
		return Damage{}, fmt.Errorf("bucket %q has no tree of its own (err %v)", bucket, err)
	}
	pages, err := f.treePages(rec.Root.ID)
	if err != nil {
		return Damage{}, err
	}
	if levels < 2 || len(pages) < levels+1 {
		return Damage{}, fmt.Errorf("bucket %q has %d node pages; %d levels need %d", bucket, len(pages), levels, levels+1)
	}
	top, bottom := pages[0], pages[levels]
	txid := f.header(top).Txid
	if fresh {
		txid = f.header(rootLeaf).Txid
	}
	ps := f.ps
	ref := func(id page.ID) page.Ref { return page.Ref{ID: id, Txid: txid, Checksum: page.Checksum(f.page(id))} }
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	const keyLen = 5
	branchFan := (ps - page.HeaderSize) / (page.BranchElemSize + keyLen)
	bucketFan := (ps - page.HeaderSize) / (page.LeafElemSize + keyLen + page.RecordSize)
	page.EncodeLeaf(f.page(bottom), ps, bottom, txid, []page.LeafElem{{Key: key(0), Value: []byte("bottom")}})
	d := Damage{Top: top, Twice: bottom, HWM: f.meta.HWM}

	// branch and bucket encode page id as a branch or a leaf of bucket
	// records with n elements, element i pointing at child(i).
	branch := func(id page.ID, n int, child func(i int) page.Ref) {
		page.EncodeBranchFunc(f.page(id), ps, id, txid, n, func(i int) ([]byte, page.Ref) { return key(i), child(i) })
	}
	buckets := func(id page.ID, n int, child func(i int) page.Ref) {
		page.EncodeLeafFunc(f.page(id), ps, id, txid, n, func(i int) (uint32, []byte, []byte) {
			return page.FlagBucket, key(i), page.BucketRecord{Root: child(i)}.Encode()
		})
	}
	encode, fan := branch, branchFan
	if shape == BucketDAG || shape == BucketCycle {
		encode, fan = buckets, bucketFan
	}
	switch shape {
	case BranchDAG, BucketDAG:
		child := ref(bottom)
		for l := levels - 1; l >= 0; l-- {
			c := child
			encode(pages[l], fan, func(int) page.Ref { return c })
			child = ref(pages[l])
		}
	case BranchCycle, BucketCycle:
		// The top's checksum is chosen first and recorded in the deepest
		// page; the chain is encoded bottom-up, then the top's last four
		// bytes (unused space: the encoders zero it) are forged so that
		// its CRC comes out as chosen.
		back := page.Ref{ID: top, Txid: txid, Checksum: cycleChecksum}
		first := ref(bottom)
		encode(pages[levels-1], fan, func(i int) page.Ref {
			if i == 0 && shape == BranchCycle {
				return first
			}
			return back
		})
		for l := levels - 2; l >= 0; l-- {
			c := ref(pages[l+1])
			encode(pages[l], 1, func(int) page.Ref { return c })
		}
		ForgeCRC(f.page(top), ps-4, cycleChecksum)
		if page.Checksum(f.page(top)) != cycleChecksum {
			return Damage{}, errors.New("forging the top's checksum failed")
		}
		d.Twice = top
	default:
		return Damage{}, fmt.Errorf("unknown shape %q", shape)
	}
	// The bucket's record names the top with its txid and checksum; the
	// meta records the root leaf's checksum.
	le := binary.LittleEndian
	le.PutUint64(img[recOff:], top)
	le.PutUint64(img[recOff+8:], txid)
	le.PutUint32(img[recOff+16:], page.Checksum(f.page(top)))
	f.meta.Root.Checksum = page.Checksum(f.page(rootLeaf))
	page.EncodeMeta(f.page(f.metaSlot), f.meta)
	return d, nil
}

// file is a parsed image.
type file struct {
	img      []byte
	ps       int
	meta     *page.Meta
	metaSlot page.ID
}

func parse(img []byte) (*file, error) {
	metas, _ := page.ReadMetas(bytes.NewReader(img), int64(len(img)), nil)
	f := &file{img: img}
	for slot, m := range metas {
		if m != nil && (f.meta == nil || m.Txid > f.meta.Txid) {
			f.meta, f.metaSlot = m, page.ID(slot)
		}
	}
	if f.meta == nil {
		return nil, errors.New("neither meta page is valid")
	}
	ps := f.meta.PageSize
	f.ps = ps
	if len(img) < 4*ps || len(img)%ps != 0 {
		return nil, fmt.Errorf("image of %d bytes is not a whole number of %d-byte pages", len(img), ps)
	}
	if f.meta.HWM*uint64(ps) > uint64(len(img)) {
		return nil, fmt.Errorf("state needs %d pages, image has %d", f.meta.HWM, len(img)/ps)
	}
	return f, nil
}

func (f *file) page(id page.ID) []byte { return f.img[int(id)*f.ps : int(id+1)*f.ps] }

func (f *file) header(id page.ID) page.Header {
	h, _ := page.ReadHeader(id, f.page(id))
	return h
}

func (f *file) node(id page.ID) (page.Node, error) {
	return page.ReadNode(f.img, f.ps, id, 0, f.meta.HWM)
}

// recordOffset returns the offset in the image of the bucket record of the
// top-level bucket name, in the root leaf id.
func (f *file) recordOffset(id page.ID, name string) (int, error) {
	n, err := f.node(id)
	if err != nil {
		return 0, err
	}
	if !n.IsLeaf() || n.Header().Overflow != 0 {
		return 0, fmt.Errorf("root bucket's root %d is not a one-page leaf", id)
	}
	le := binary.LittleEndian
	p := f.page(id)
	for i := 0; i < n.Count(); i++ {
		flags, key, _, err := n.LeafElem(i)
		if err != nil {
			return 0, err
		}
		if string(key) != name {
			continue
		}
		if flags != page.FlagBucket {
			return 0, fmt.Errorf("%q is not a bucket", name)
		}
		el := p[page.HeaderSize+i*page.LeafElemSize:]
		return int(id)*f.ps + int(le.Uint32(el[4:])) + len(key), nil
	}
	return 0, fmt.Errorf("no top-level bucket %q", name)
}

// treePages returns the one-page nodes of the tree rooted at id, root first,
// depth first.
func (f *file) treePages(id page.ID) ([]page.ID, error) {
	var out []page.ID
	var walk func(id page.ID, depth int) error
	walk = func(id page.ID, depth int) error {
		if depth > 64 {
			return errors.New("tree too deep")
		}
		n, err := f.node(id)
		if err != nil {
			return err
		}
		if n.Header().Overflow == 0 {
			out = append(out, id)
		}
		for i := 0; !n.IsLeaf() && i < n.Count(); i++ {
			if err := walk(n.BranchChild(i).ID, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	err := walk(id, 0)
	if len(out) > 0 && out[0] != id {
		return nil, fmt.Errorf("bucket root %d is a multi-page node", id)
	}
	return out, err
}

// ForgeCRC rewrites the four bytes of b at off so that the CRC-32C of b is
// target. CRC is affine over GF(2) for a fixed length: flipping bit j of
// the four bytes changes the CRC by a fixed vector d_j, and the 32 vectors
// are independent, so solving a 32×32 linear system gives the bits to flip.
func ForgeCRC(b []byte, off int, target uint32) {
	clear(b[off : off+4])
	base := page.Checksum(b)
	var cols [32]uint32
	for j := 0; j < 32; j++ {
		b[off+j/8] ^= 1 << (j % 8)
		cols[j] = page.Checksum(b) ^ base
		b[off+j/8] ^= 1 << (j % 8)
	}
	// Gaussian elimination: rows are CRC bits, columns the 32 input bits.
	// Track, for each reduced column, which input bits compose it.
	var combo [32]uint32
	for j := range combo {
		combo[j] = 1 << j
	}
	var pivotCol [32]int
	for i := range pivotCol {
		pivotCol[i] = -1
	}
	used := uint32(0)
	for bit := 0; bit < 32; bit++ {
		p := -1
		for j := 0; j < 32; j++ {
			if used&(1<<j) == 0 && cols[j]&(1<<bit) != 0 {
				p = j
				break
			}
		}
		if p < 0 {
			continue
		}
		used |= 1 << p
		pivotCol[bit] = p
		for j := 0; j < 32; j++ {
			if j != p && cols[j]&(1<<bit) != 0 {
				cols[j] ^= cols[p]
				combo[j] ^= combo[p]
			}
		}
	}
	want := base ^ target
	var flips uint32
	for bit := 0; bit < 32; bit++ {
		if want&(1<<bit) != 0 && pivotCol[bit] >= 0 {
			flips ^= combo[pivotCol[bit]]
		}
	}
	for j := 0; j < 32; j++ {
		if flips&(1<<j) != 0 {
			b[off+j/8] ^= 1 << (j % 8)
		}
	}
}

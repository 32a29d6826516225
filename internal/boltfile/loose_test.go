package boltfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
	"unsafe"

	rerrors "github.com/rivetkv/rivet/errors"
)

// TestLooseMeta: the loose decoder agrees with DecodeMeta on every
// fixture's metas, reads a big-endian meta, and keeps a damaged meta's
// fields with the reason it fails.
func TestLooseMeta(t *testing.T) {
	checked := 0
	for name, data := range testFiles(t) {
		ms, err := ReadMetas(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		ps := ms.Meta.PageSize
		for slot := range 2 {
			b := data[slot*ps:]
			want, err := DecodeMeta(b, slot)
			if err != nil {
				t.Fatalf("%s meta %d: %v", name, slot, err)
			}
			m, err := DecodeLooseMeta(b, slot, ps)
			if err != nil || m.Order != binary.LittleEndian || m.Root != want.Root || m.HWM != want.HWM || m.Txid != want.Txid || m.RootSequence != want.RootSequence {
				t.Fatalf("%s meta %d: %+v, %v; want %+v", name, slot, m, err, want)
			}
			if _, err := DecodeLooseMeta(b, slot, 2*ps); !errors.Is(err, ErrOtherPageSize) {
				t.Fatalf("%s meta %d at twice its page size: %v", name, slot, err)
			}
			if MetaOrder(b) != binary.LittleEndian || !HasMetaMagic(data) {
				t.Fatalf("%s meta %d not recognised", name, slot)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("%d metas checked", checked)
	}

	be := make([]byte, LooseMetaSize)
	le := make([]byte, LooseMetaSize)
	EncodeMeta(le, Meta{PageSize: 4096, Root: 3, Freelist: 2, HWM: 9, Txid: 7, RootSequence: 5}, 1)
	copy(be, le)
	// The same meta as a big-endian machine writes it: every field
	// swapped, the checksum taken over the big-endian bytes.
	binary.BigEndian.PutUint64(be, 1)
	binary.BigEndian.PutUint16(be[8:], flagMeta)
	for off := HeaderSize; off < HeaderSize+16; off += 4 {
		binary.BigEndian.PutUint32(be[off:], binary.LittleEndian.Uint32(le[off:]))
	}
	for off := HeaderSize + 16; off < HeaderSize+metaSumSize; off += 8 {
		binary.BigEndian.PutUint64(be[off:], binary.LittleEndian.Uint64(le[off:]))
	}
	h := fnv.New64a()
	h.Write(be[HeaderSize : HeaderSize+metaSumSize])
	binary.BigEndian.PutUint64(be[HeaderSize+metaSumSize:], h.Sum64())
	m, err := DecodeLooseMeta(be, 1, 4096)
	if err != nil || m.Order != binary.BigEndian || m.Root != 3 || m.HWM != 9 || m.Txid != 7 || m.RootSequence != 5 {
		t.Fatalf("big-endian meta: %+v, %v", m, err)
	}
	if MetaOrder(be) != binary.BigEndian || IsMetaPage(be) {
		t.Fatal("a big-endian meta is recognised by MetaOrder only")
	}

	for _, c := range []struct {
		damage func(b []byte)
		want   string
	}{
		{func(b []byte) { b[HeaderSize+40] ^= 1 }, "checksum mismatch"},
		{func(b []byte) { b[8] = 0x10 }, "page flags 0x10, want meta"},
		{func(b []byte) { b[HeaderSize+4] = 3 }, "version 3, want 2"},
	} {
		b := bytes.Clone(le)
		c.damage(b)
		m, err := DecodeLooseMeta(b, 1, 4096)
		if m == nil || err == nil || err.Error() != c.want || m.Txid != 7 {
			t.Fatalf("damaged meta: %+v, %v; want %q", m, err, c.want)
		}
	}
	b := bytes.Clone(le)
	b[HeaderSize] ^= 0xff
	if m, err := DecodeLooseMeta(b, 1, 4096); m != nil || err == nil || HasMetaMagic(b) || MetaOrder(b) != nil {
		t.Fatalf("no magic: %+v, %v", m, err)
	}
}

// TestLooseNode: every branch and leaf page of the fixtures decodes whole
// and agrees with Page; damage is named as salvage reports it.
func TestLooseNode(t *testing.T) {
	nodes := 0
	for name, data := range testFiles(t) {
		f := open(t, data)
		for id := uint64(2); id < f.Meta().HWM; id++ {
			p, err := f.Node(id)
			if err != nil {
				continue
			}
			run := p.buf
			pages, err := LooseRunPages(run, id, binary.LittleEndian)
			if err != nil || pages != p.Pages() {
				t.Fatalf("%s page %d: %d pages, %v; want %d", name, id, pages, err, p.Pages())
			}
			n, err := DecodeLooseNode(id, run, binary.LittleEndian, nil, nil, true)
			if err != nil {
				t.Fatalf("%s page %d: %v", name, id, err)
			}
			if n.Leaf != p.IsLeaf() || len(n.Keys) != p.Count() {
				t.Fatalf("%s page %d: leaf %t, %d keys; want %t, %d", name, id, n.Leaf, len(n.Keys), p.IsLeaf(), p.Count())
			}
			for i := range n.Keys {
				if n.Leaf {
					bucket, k, v, err := p.LeafElem(i)
					if err != nil || !bytes.Equal(k, n.Keys[i]) || !bytes.Equal(v, n.Values[i]) || bucket != n.Buckets[i] {
						t.Fatalf("%s page %d element %d differs", name, id, i)
					}
					if bucket {
						root, seq, err := DecodeLooseBucketHeader(id, v, binary.LittleEndian)
						want, werr := f.DecodeBucket(id, v)
						if err != nil || werr != nil || root != want.Root || seq != want.Sequence {
							t.Fatalf("%s page %d bucket %q: %d %d %v; want %+v %v", name, id, k, root, seq, err, want, werr)
						}
						if root == 0 {
							in, err := DecodeLooseInline(id, v, binary.LittleEndian)
							if err != nil || len(in.Keys) != want.Inline.Count() {
								t.Fatalf("%s page %d inline bucket %q: %v", name, id, k, err)
							}
						}
					}
				} else {
					k, child, err := p.BranchElem(i)
					if err != nil || !bytes.Equal(k, n.Keys[i]) || child != n.Children[i] {
						t.Fatalf("%s page %d element %d differs", name, id, i)
					}
				}
			}
			nodes++
			if len(n.Keys) > 2 {
				// Keys outside the range a parent gives fail.
				if _, err := DecodeLooseNode(id, run, binary.LittleEndian, n.Keys[1], nil, false); err == nil || !errors.Is(err, rerrors.ErrCorrupt) {
					t.Fatalf("%s page %d below its range: %v", name, id, err)
				}
				if _, err := DecodeLooseNode(id, run, binary.LittleEndian, nil, n.Keys[len(n.Keys)-1], false); err == nil {
					t.Fatalf("%s page %d above its range: %v", name, id, err)
				}
			}
			if _, err := LooseRunPages(run, id+1, binary.LittleEndian); err == nil || err.Error() != fmt.Sprintf("rivet: corrupt page %d: page header names page %d", id+1, id) {
				t.Fatalf("%s page %d read as %d: %v", name, id, id+1, err)
			}
		}
	}
	if nodes < 50 {
		t.Fatalf("%d nodes checked", nodes)
	}
}

// FuzzLooseMeta: DecodeLooseMeta, MetaOrder and HasMetaMagic on any bytes
// never panic; a meta they accept has bbolt's magic in its order.
func FuzzLooseMeta(f *testing.F) {
	for _, data := range seedFiles(f) {
		f.Add(data[:LooseMetaSize], uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, sizeSel uint8) {
		ps := 512 << (sizeSel % 12)
		m, err := DecodeLooseMeta(b, 0, ps)
		if m != nil && (m.Order == nil || m.Order.Uint32(b[HeaderSize:]) != Magic) {
			t.Fatalf("meta %+v without magic", m)
		}
		if err == nil && (m.Root < 2 || m.Root >= m.HWM || MetaOrder(b) == nil) {
			t.Fatalf("valid meta %+v: root outside [2, HWM) or no meta header", m)
		}
		if MetaOrder(b) != nil && !HasMetaMagic(b) {
			t.Fatal("a meta header without magic")
		}
	})
}

// FuzzLooseNode: DecodeLooseNode, LooseRunPages and the bucket decoders
// on any bytes in either byte order never panic, and what they return
// lies inside the bytes given.
func FuzzLooseNode(f *testing.F) {
	for _, p := range seedPages(f) {
		f.Add(p, uint64(binary.LittleEndian.Uint64(p)), false, false)
	}
	f.Add([]byte{}, uint64(2), true, true)
	f.Fuzz(func(t *testing.T, b []byte, id uint64, big, emptyOK bool) {
		bo := binary.ByteOrder(binary.LittleEndian)
		if big {
			bo = binary.BigEndian
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		inside := func(s []byte) bool {
			start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
			return len(s) == 0 || (start >= base && start+uintptr(len(s)) <= base+uintptr(len(b)))
		}
		if pages, err := LooseRunPages(b, id, bo); err == nil && (pages == 0 || pages > 1<<32) {
			t.Fatalf("run of %d pages", pages)
		}
		if n, err := DecodeLooseNode(id, b, bo, nil, nil, emptyOK); err == nil {
			for i, k := range n.Keys {
				if len(k) == 0 || !inside(k) || (n.Leaf && !inside(n.Values[i])) {
					t.Fatalf("element %d outside the page", i)
				}
				if i > 0 && bytes.Compare(n.Keys[i-1], k) >= 0 {
					t.Fatalf("key %d not after key %d", i, i-1)
				}
			}
			if n.Leaf && (len(n.Values) != len(n.Keys) || len(n.Buckets) != len(n.Keys)) || !n.Leaf && len(n.Children) != len(n.Keys) {
				t.Fatal("element lists of different lengths")
			}
		}
		if _, _, err := DecodeLooseBucketHeader(id, b, bo); err == nil && len(b) < BucketHeaderSize {
			t.Fatal("bucket header from too few bytes")
		}
		if n, err := DecodeLooseInline(id, b, bo); err == nil {
			for i := range n.Keys {
				if n.Buckets[i] || !inside(n.Keys[i]) || !inside(n.Values[i]) {
					t.Fatalf("inline element %d: a bucket or outside the value", i)
				}
			}
		}
	})
}

package bench

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rivetkv/rivet/testing/hostile"
)

// bbolt's page layout (go.etcd.io/bbolt v1.5 internal/common, little-endian
// on the machines this runs on): a 16-byte header (id u64, flags u16,
// count u16, overflow u32), then 16-byte elements. A branch element is
// pos u32, ksize u32, pgid u64; a leaf element flags u32, pos u32, ksize
// u32, vsize u32; pos counts from the element itself. A meta page's meta
// follows the header: magic, version, page size, flags (u32 each), the root
// bucket (root pgid u64, sequence u64), freelist pgid, high-water pgid,
// txid, checksum (u64 each). A bucket's value is its root pgid and
// sequence (u64 each). bbolt keeps no checksum of data pages, so a page
// rewritten in place needs nothing else changed.
const (
	boltHeaderSize = 16
	boltElemSize   = 16
	boltBranchFlag = 0x01
	boltLeafFlag   = 0x02
	boltBucketFlag = 0x01
	boltMetaRoot   = boltHeaderSize + 16 // the root bucket's root pgid
	boltMetaTxid   = boltHeaderSize + 48
	boltMetaPSize  = boltHeaderSize + 8
	boltBucketSize = 16
)

// damageBbolt rewrites, in the bbolt file image img, the tree of the
// top-level bucket named bucket into shape, levels deep, from the tree's
// own one-page nodes (at least levels+1 of them), as hostile.Build does for
// rivet files. The bucket's root page stays the top of the structure, so
// its record is unchanged.
func damageBbolt(img []byte, bucket string, shape hostile.Shape, levels int) error {
	le := binary.LittleEndian
	if len(img) < 2*4096 || le.Uint32(img[boltHeaderSize:]) != boltMagic {
		return errors.New("not a bbolt file")
	}
	ps := int(le.Uint32(img[boltMetaPSize:]))
	if ps < 1024 || len(img) < 2*ps || len(img)%ps != 0 {
		return fmt.Errorf("bbolt page size %d does not fit a %d-byte file", ps, len(img))
	}
	meta := img[:ps]
	if m1 := img[ps : 2*ps]; le.Uint32(m1[boltHeaderSize:]) == boltMagic && le.Uint64(m1[boltMetaTxid:]) > le.Uint64(meta[boltMetaTxid:]) {
		meta = m1
	}
	pages := uint64(len(img) / ps)
	pg := func(id uint64) ([]byte, error) {
		if id < 2 || id >= pages {
			return nil, fmt.Errorf("page %d outside the file", id)
		}
		return img[id*uint64(ps) : (id+1)*uint64(ps)], nil
	}
	rootPage, err := pg(le.Uint64(meta[boltMetaRoot:]))
	if err != nil {
		return err
	}
	top := uint64(0)
	for i := range int(le.Uint16(rootPage[10:])) {
		e := rootPage[boltHeaderSize+i*boltElemSize:]
		pos, ks := int(le.Uint32(e[4:])), int(le.Uint32(e[8:]))
		at := boltHeaderSize + i*boltElemSize + pos
		if le.Uint16(rootPage[8:]) == boltLeafFlag && le.Uint32(e)&boltBucketFlag != 0 && string(rootPage[at:at+ks]) == bucket {
			top = le.Uint64(rootPage[at+ks:])
		}
	}
	if top == 0 {
		return fmt.Errorf("no paged top-level bucket %q in root page", bucket)
	}
	var nodes []uint64
	var collect func(id uint64, depth int) error
	collect = func(id uint64, depth int) error {
		p, err := pg(id)
		if err != nil || depth > 64 {
			return fmt.Errorf("walking bucket %q: %v", bucket, err)
		}
		if le.Uint32(p[12:]) == 0 {
			nodes = append(nodes, id)
		}
		if le.Uint16(p[8:]) == boltBranchFlag {
			for i := range int(le.Uint16(p[10:])) {
				if err := collect(le.Uint64(p[boltHeaderSize+i*boltElemSize+8:]), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := collect(top, 0); err != nil {
		return err
	}
	if len(nodes) < levels+1 || nodes[0] != top {
		return fmt.Errorf("bucket %q has %d one-page nodes; %d levels need %d", bucket, len(nodes), levels, levels+1)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	const keyLen = 5
	// encode writes page id with n elements: a branch whose element i
	// points at child(i), or a leaf of bucket records naming child(i) as
	// their root; with child nil, a leaf holding one plain value.
	encode := func(id uint64, branch bool, n int, child func(i int) uint64) {
		p := img[id*uint64(ps) : (id+1)*uint64(ps)]
		clear(p)
		flags := uint16(boltLeafFlag)
		if branch {
			flags = boltBranchFlag
		}
		le.PutUint64(p[0:], id)
		le.PutUint16(p[8:], flags)
		le.PutUint16(p[10:], uint16(n))
		data := boltHeaderSize + n*boltElemSize
		for i := range n {
			e := boltHeaderSize + i*boltElemSize
			k := key(i)
			pos := data - e
			switch {
			case branch:
				le.PutUint32(p[e:], uint32(pos))
				le.PutUint32(p[e+4:], uint32(len(k)))
				le.PutUint64(p[e+8:], child(i))
				data += copy(p[data:], k)
			case child != nil:
				le.PutUint32(p[e:], boltBucketFlag)
				le.PutUint32(p[e+4:], uint32(pos))
				le.PutUint32(p[e+8:], uint32(len(k)))
				le.PutUint32(p[e+12:], boltBucketSize)
				data += copy(p[data:], k)
				le.PutUint64(p[data:], child(i))
				data += boltBucketSize
			default:
				v := []byte("bottom")
				le.PutUint32(p[e+4:], uint32(pos))
				le.PutUint32(p[e+8:], uint32(len(k)))
				le.PutUint32(p[e+12:], uint32(len(v)))
				data += copy(p[data:], k)
				data += copy(p[data:], v)
			}
		}
	}
	bottom := nodes[levels]
	encode(bottom, false, 1, nil)
	branch := shape == hostile.BranchDAG || shape == hostile.BranchCycle
	fan := (ps - boltHeaderSize) / (boltElemSize + keyLen + boltBucketSize)
	if branch {
		fan = (ps - boltHeaderSize) / (boltElemSize + keyLen)
	}
	switch shape {
	case hostile.BranchDAG, hostile.BucketDAG:
		for l := levels - 1; l >= 0; l-- {
			c := nodes[l+1]
			encode(nodes[l], branch, fan, func(int) uint64 { return c })
		}
	case hostile.BranchCycle, hostile.BucketCycle:
		encode(nodes[levels-1], branch, fan, func(i int) uint64 {
			if i == 0 && branch {
				return bottom
			}
			return top
		})
		for l := levels - 2; l >= 0; l-- {
			c := nodes[l+1]
			encode(nodes[l], branch, 1, func(int) uint64 { return c })
		}
	default:
		return fmt.Errorf("unknown shape %q", shape)
	}
	return nil
}

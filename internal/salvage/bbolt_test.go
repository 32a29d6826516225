package salvage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/digest"
)

// boltFixtures are the bbolt files internal/boltfile's tests read, each
// with a .digest file: the canonical digest, buckets, keys and bytes of
// what bbolt reads from it.
func boltFixtures(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "boltfile", "testdata", "*.bbolt"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("bbolt fixtures: %v, %d found", err, len(paths))
	}
	return paths
}

type boltWant struct {
	sum           string
	buckets, keys int64
}

func readWant(t testing.TB, path string) boltWant {
	t.Helper()
	b, err := os.ReadFile(path + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 4 {
		t.Fatalf("%s.digest: %q", path, b)
	}
	w := boltWant{sum: f[0]}
	if w.buckets, err = strconv.ParseInt(f[1], 10, 64); err == nil {
		w.keys, err = strconv.ParseInt(f[2], 10, 64)
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// digestVisitor feeds what a salvage hands over into a canonical digest:
// a visit outside the current bucket path first ends the buckets it left.
type digestVisitor struct {
	d    *digest.Digest
	path [][]byte
}

func newDigestVisitor() *digestVisitor { return &digestVisitor{d: digest.New()} }

func (v *digestVisitor) moveTo(path [][]byte) error {
	for len(v.path) > len(path) || !samePrefix(v.path, path) {
		v.d.Add(digest.Entry{Kind: digest.KindEnd})
		v.path = v.path[:len(v.path)-1]
	}
	if len(v.path) != len(path) {
		return errors.New("a visit below a bucket that was not visited")
	}
	return nil
}

func samePrefix(prefix, path [][]byte) bool {
	if len(prefix) > len(path) {
		return false
	}
	for i := range prefix {
		if !bytes.Equal(prefix[i], path[i]) {
			return false
		}
	}
	return true
}

func (v *digestVisitor) Bucket(path [][]byte, seq uint64) error {
	if err := v.moveTo(path[:len(path)-1]); err != nil {
		return err
	}
	name := bytes.Clone(path[len(path)-1])
	v.d.Add(digest.Entry{Kind: digest.KindBucket, Key: name, Seq: seq})
	v.path = append(v.path, name)
	return nil
}

func (v *digestVisitor) Put(path [][]byte, k, val []byte) error {
	if err := v.moveTo(path); err != nil {
		return err
	}
	v.d.Add(digest.Entry{Kind: digest.KindKV, Key: k, Value: val})
	return nil
}

// sum ends the open buckets and returns the digest.
func (v *digestVisitor) sum() string {
	for range v.path {
		v.d.Add(digest.Entry{Kind: digest.KindEnd})
	}
	v.path = nil
	return v.d.Sum()
}

// TestBboltFixtures: every whole bbolt fixture salvages whole (File, with
// its lock) into exactly what bbolt reads from it, in both byte orders.
func TestBboltFixtures(t *testing.T) {
	for _, path := range boltFixtures(t) {
		want := readWant(t, path)
		img, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, order := range []string{"little-endian", "big-endian"} {
			t.Run(filepath.Base(path)+"/"+order, func(t *testing.T) {
				b := img
				if order == "big-endian" {
					b = boltToBigEndian(t, img)
				}
				file := filepath.Join(t.TempDir(), "db.bbolt")
				if err := os.WriteFile(file, b, 0o600); err != nil {
					t.Fatal(err)
				}
				v := newDigestVisitor()
				rep, err := File(file, v)
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Lost) != 0 || len(rep.Notes) != 0 {
					t.Fatalf("lost %v, notes %v", rep.Lost, rep.Notes)
				}
				if got := v.sum(); got != want.sum || rep.Buckets != want.buckets || rep.Keys != want.keys {
					t.Fatalf("digest %s, %d buckets, %d keys; want %s, %d, %d", got, rep.Buckets, rep.Keys, want.sum, want.buckets, want.keys)
				}
			})
		}
	}
}

// TestBboltDamage: a bbolt leaf that names another page id loses exactly
// its key range; the salvage reports it in Salvage's loss shape and reads
// every other key, in either byte order.
func TestBboltDamage(t *testing.T) {
	path := filepath.Join("..", "boltfile", "testdata", "mixed-4k.bbolt")
	want := readWant(t, path)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, big := range []bool{false, true} {
		b := bytes.Clone(img)
		bo := binary.ByteOrder(binary.LittleEndian)
		if big {
			b, bo = boltToBigEndian(t, img), binary.BigEndian
		}
		// The last leaf page the tree reaches holds keys of some bucket
		// between separators its parent branch gives.
		leaf := lastLeaf(t, b, bo)
		bo.PutUint64(b[leaf*4096:], 999999)
		v := newDigestVisitor()
		rep, err := Read(bytes.NewReader(b), int64(len(b)), v)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Lost) != 1 || len(rep.Notes) != 0 {
			t.Fatalf("big-endian %t: lost %v, notes %v", big, rep.Lost, rep.Notes)
		}
		t.Logf("big-endian %t: %v; %d keys %d buckets salvaged of %d, %d", big, rep.Lost[0], rep.Keys, rep.Buckets, want.keys, want.buckets)
		l := rep.Lost[0]
		if l.Page != leaf || l.Reason() != "page header names page 999999" || len(l.Bucket) == 0 || l.Key != nil || l.From == nil {
			t.Fatalf("big-endian %t: loss %v", big, l)
		}
		if rep.Keys >= want.keys || rep.Keys < want.keys/2 || rep.Buckets > want.buckets {
			t.Fatalf("big-endian %t: %d keys %d buckets salvaged of %d, %d", big, rep.Keys, rep.Buckets, want.keys, want.buckets)
		}
	}
}

// lastLeaf returns the highest-numbered leaf page in a bbolt image of
// 4 KiB pages whose header names itself and which holds elements.
func lastLeaf(t *testing.T, b []byte, bo binary.ByteOrder) uint64 {
	for id := uint64(len(b)/4096) - 1; id >= 2; id-- {
		p := b[id*4096:]
		if bo.Uint64(p) == id && bo.Uint16(p[8:]) == 0x02 && bo.Uint16(p[10:]) > 4 {
			return id
		}
	}
	t.Fatal("no leaf page")
	return 0
}

// TestBboltRandomDamage: byte flips and cuts anywhere in bbolt files of
// both byte orders. The salvage never panics, hands over no more than the
// file holds, and its report counts what the visitor saw.
func TestBboltRandomDamage(t *testing.T) {
	img, err := os.ReadFile(filepath.Join("..", "boltfile", "testdata", "mixed-1k.bbolt"))
	if err != nil {
		t.Fatal(err)
	}
	images := [][]byte{img, boltToBigEndian(t, img)}
	r := rand.New(rand.NewSource(11))
	ran, walked := 0, 0
	for i := range 600 {
		b := bytes.Clone(images[i%2])
		for range 1 + r.Intn(4) {
			b[r.Intn(len(b))] ^= byte(1 + r.Intn(255))
		}
		if r.Intn(10) == 0 {
			b = b[:r.Intn(len(b))]
		}
		var v countVisitor
		rep, err := Read(bytes.NewReader(b), int64(len(b)), &v)
		ran++
		if err != nil {
			if !errors.Is(err, rerrors.ErrCorrupt) && !errors.Is(err, rerrors.ErrInvalid) {
				t.Fatalf("damage %d: %v", i, err)
			}
			continue
		}
		walked++
		if v.bytes > int64(len(b)) || rep.Keys != v.keys || rep.Buckets != v.buckets {
			t.Fatalf("damage %d: %d bytes from a %d-byte file; report %d keys %d buckets, visitor %d, %d", i, v.bytes, len(b), rep.Keys, rep.Buckets, v.keys, v.buckets)
		}
	}
	if ran != 600 || walked < 300 {
		t.Fatalf("%d cases ran, %d walked", ran, walked)
	}
}

// countVisitor counts what a salvage hands over.
type countVisitor struct{ buckets, keys, bytes int64 }

func (c *countVisitor) Bucket(path [][]byte, _ uint64) error {
	c.buckets++
	c.bytes += int64(len(path[len(path)-1]))
	return nil
}

func (c *countVisitor) Put(_ [][]byte, k, v []byte) error {
	c.keys++
	c.bytes += int64(len(k) + len(v))
	return nil
}

// FuzzReadBbolt: Read of any bytes, seeded with bbolt files of both byte
// orders, ends without panicking and hands over no more than it was given.
func FuzzReadBbolt(f *testing.F) {
	seeds := 0
	for _, path := range boltFixtures(f) {
		img, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		// Small files only, cut to the pages the state uses: the fuzzer
		// minimizes every new input, which is slow on large ones.
		ms, err := boltfile.ReadMetas(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			f.Fatal(err)
		}
		if n := ms.Meta.HWM * uint64(ms.Meta.PageSize); n <= 96<<10 {
			img = img[:n]
			f.Add(img, uint32(0), byte(0))
			f.Add(boltToBigEndian(f, img), uint32(3*1024+20), byte(0x80))
			seeds++
		}
	}
	if seeds < 2 {
		f.Fatalf("%d small seed files", seeds)
	}
	f.Fuzz(func(t *testing.T, b []byte, off uint32, x byte) {
		b = bytes.Clone(b)
		if len(b) > 0 {
			b[int(off)%len(b)] ^= x
		}
		var v countVisitor
		rep, err := Read(bytes.NewReader(b), int64(len(b)), &v)
		if err == nil && (v.bytes > int64(len(b)) || rep.Keys != v.keys) {
			t.Fatalf("%d bytes (%d keys, report %d) from a %d-byte file", v.bytes, v.keys, rep.Keys, len(b))
		}
	})
}

// boltToBigEndian rewrites a whole little-endian bbolt image as a
// big-endian machine would have written it: the metas (checksums
// recomputed over the big-endian bytes) and every page the trees reach,
// with the bucket values and inline pages in them. Free pages are left
// as they are; salvage does not read them.
func boltToBigEndian(t testing.TB, img []byte) []byte {
	t.Helper()
	le, be := binary.LittleEndian, binary.BigEndian
	b := bytes.Clone(img)
	ps := int(le.Uint32(b[16+8:]))
	swap := func(p []byte, n int) {
		switch n {
		case 2:
			be.PutUint16(p, le.Uint16(p))
		case 4:
			be.PutUint32(p, le.Uint32(p))
		case 8:
			be.PutUint64(p, le.Uint64(p))
		}
	}
	swapHeader := func(p []byte) {
		swap(p, 8)
		swap(p[8:], 2)
		swap(p[10:], 2)
		swap(p[12:], 4)
	}
	// The newer meta's root: the tree the whole file holds.
	root := le.Uint64(b[16+16:])
	if le.Uint64(b[ps+16+48:]) > le.Uint64(b[16+48:]) {
		root = le.Uint64(b[ps+16+16:])
	}
	for slot := range 2 {
		p := b[slot*ps:]
		swapHeader(p)
		m := p[16:]
		for _, f := range []struct{ off, n int }{{0, 4}, {4, 4}, {8, 4}, {12, 4}, {16, 8}, {24, 8}, {32, 8}, {40, 8}, {48, 8}} {
			swap(m[f.off:], f.n)
		}
		h := fnv.New64a()
		h.Write(m[:56])
		be.PutUint64(m[56:], h.Sum64())
	}
	seen := map[uint64]bool{}
	// leafElems swaps the leaf elements of the page p (read little-endian
	// count first) and returns the values that are buckets.
	var leafElems func(p []byte, count int)
	var walk func(id uint64)
	bucketValue := func(v []byte) {
		bucketRoot := le.Uint64(v)
		swap(v, 8)
		swap(v[8:], 8)
		if bucketRoot != 0 {
			walk(bucketRoot)
			return
		}
		in := v[16:]
		count := int(le.Uint16(in[10:]))
		swapHeader(in)
		leafElems(in, count)
	}
	leafElems = func(p []byte, count int) {
		for i := range count {
			e := p[16+i*16:]
			flags, pos, ks, vs := le.Uint32(e), int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
			for j := 0; j < 16; j += 4 {
				swap(e[j:], 4)
			}
			if flags&1 != 0 {
				bucketValue(e[pos+ks : pos+ks+vs])
			}
		}
	}
	walk = func(id uint64) {
		if seen[id] {
			t.Fatalf("page %d reached twice", id)
		}
		seen[id] = true
		p := b[id*uint64(ps):]
		flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
		swapHeader(p)
		switch flags {
		case 0x01:
			for i := range count {
				e := p[16+i*16:]
				child := le.Uint64(e[8:])
				swap(e, 4)
				swap(e[4:], 4)
				swap(e[8:], 8)
				walk(child)
			}
		case 0x02:
			leafElems(p, count)
		default:
			t.Fatalf("page %d has flags %#x", id, flags)
		}
	}
	walk(root)
	return b
}

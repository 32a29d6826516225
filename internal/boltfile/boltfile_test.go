package boltfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/digest"
	"github.com/rivetkv/rivet/internal/page"
)

// testFiles returns the bbolt files bbolt v1.5 made for these tests (see
// bench's TestWriteBboltTestdata), by name.
func testFiles(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.bbolt"))
	if err != nil || len(paths) < 6 {
		t.Fatalf("testdata: %v, %d files", err, len(paths))
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// wantDigest is the digest bbolt's own view of a testdata file had.
func wantDigest(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".digest"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))[0]
}

func open(t testing.TB, data []byte) *File {
	t.Helper()
	ms, err := ReadMetas(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(data, ms.Meta)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func checkAll(f *File) []error {
	var errs []error
	f.Check(func(err error) bool {
		errs = append(errs, err)
		return len(errs) < 100
	})
	return errs
}

func walkDigest(f *File) (*digest.Digest, error) {
	d := digest.New()
	err := f.Walk(func(e digest.Entry) error {
		d.Add(e)
		return nil
	})
	return d, err
}

// TestTestdata reads every testdata file: its metas, Check (nothing to
// report), Walk (the digest bbolt's own view had), and the translation of
// every page the walk reaches.
func TestTestdata(t *testing.T) {
	for name, data := range testFiles(t) {
		f := open(t, data)
		if errs := checkAll(f); len(errs) > 0 {
			t.Errorf("%s: Check: %v", name, errs)
		}
		d, err := walkDigest(f)
		if err != nil {
			t.Fatalf("%s: Walk: %v", name, err)
		}
		if d.Sum() != wantDigest(t, name) {
			t.Errorf("%s: Walk's digest %s, bbolt's %s", name, d.Sum(), wantDigest(t, name))
		}
		src := NewSource(f, 1<<20)
		translated := 0
		for id := uint64(2); id < f.meta.HWM; id++ {
			p, err := f.Node(id)
			if err != nil {
				continue // free, freelist or overflow pages
			}
			n, err := src.ReadNode(page.Ref{ID: id})
			if err != nil {
				t.Fatalf("%s: page %d: %v", name, id, err)
			}
			if n.Count() != p.Count() || n.IsLeaf() != p.IsLeaf() || n.ID() != id || n.Header().Pages() != p.Pages() {
				t.Fatalf("%s: page %d translated to %d elements (leaf %t, %d pages), bbolt page has %d (leaf %t, %d pages)",
					name, id, n.Count(), n.IsLeaf(), n.Header().Pages(), p.Count(), p.IsLeaf(), p.Pages())
			}
			translated++
		}
		if strings.HasPrefix(name, "mixed") && translated < 10 {
			t.Errorf("%s: only %d pages translated", name, translated)
		}
	}
}

// pagesOf returns the ids of the file's pages whose header carries flags
// (branch, leaf or freelist pages, free ones included).
func pagesOf(data []byte, ps int, flags uint16) []uint64 {
	var ids []uint64
	for id := uint64(2); (id+1)*uint64(ps) <= uint64(len(data)); id++ {
		h := data[id*uint64(ps):]
		if binary.LittleEndian.Uint64(h) == id && binary.LittleEndian.Uint16(h[8:]) == flags {
			ids = append(ids, id)
		}
	}
	return ids
}

// reachableBranch returns a branch page the tree reaches and its first
// child.
func reachableBranch(t *testing.T, f *File) (id, child uint64) {
	t.Helper()
	var found func(id uint64, depth int) bool
	found = func(pid uint64, depth int) bool {
		p, err := f.Node(pid)
		if err != nil || depth > 10 {
			return false
		}
		if !p.IsLeaf() {
			_, c, _ := p.BranchElem(0)
			id, child = pid, c
			return true
		}
		for i := 0; i < p.Count(); i++ {
			bucket, _, v, _ := p.LeafElem(i)
			if bucket {
				if b, err := f.DecodeBucket(pid, v); err == nil && b.Root != 0 && found(b.Root, depth+1) {
					return true
				}
			}
		}
		return false
	}
	if !found(f.meta.Root, 0) {
		t.Fatal("no branch page reachable")
	}
	return id, child
}

// TestCycleAndDAG makes a branch element point back at its own page (a
// cycle) or every element of a branch at one child (a shared subtree): the
// check reports a page reachable twice and ends, the walk fails with
// ErrCorrupt, and translation still serves every page.
func TestCycleAndDAG(t *testing.T) {
	orig := testFiles(t)["mixed-1k.bbolt"]
	for _, dag := range []bool{false, true} {
		data := bytes.Clone(orig)
		f := open(t, data)
		id, child := reachableBranch(t, f)
		p, _ := f.Node(id)
		ps := uint64(f.ps)
		for i := 0; i < p.Count(); i++ {
			e := data[id*ps+HeaderSize+uint64(i*elemSize):]
			switch {
			case dag:
				binary.LittleEndian.PutUint64(e[8:], child)
			case i == 0:
				binary.LittleEndian.PutUint64(e[8:], id)
			}
		}
		errs := checkAll(f)
		twice := false
		for _, err := range errs {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("dag %t: %v is not ErrCorrupt", dag, err)
			}
			twice = twice || strings.Contains(err.Error(), "reachable twice")
		}
		if !twice {
			t.Fatalf("dag %t: Check did not find a page reachable twice: %v", dag, errs)
		}
		if _, err := walkDigest(f); !errors.Is(err, rerrors.ErrCorrupt) {
			t.Fatalf("dag %t: Walk: %v, want ErrCorrupt", dag, err)
		}
	}
}

// TestCheckLeakAndDoubleFree: a page dropped from the freelist is leaked,
// a reachable page listed free is both.
func TestCheckLeakAndDoubleFree(t *testing.T) {
	data := bytes.Clone(testFiles(t)["freed-4k.bbolt"])
	f := open(t, data)
	ids, _, err := f.Freelist(f.meta.Freelist)
	if err != nil || len(ids) < 16 {
		t.Fatalf("freelist: %d ids, %v", len(ids)/8, err)
	}
	leaked := binary.LittleEndian.Uint64(ids)
	binary.LittleEndian.PutUint64(ids, f.meta.Root) // the root page, listed free
	errs := checkAll(f)
	var sawLeak, sawBoth bool
	for _, err := range errs {
		var ce *rerrors.CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("%v is not a CorruptError", err)
		}
		sawLeak = sawLeak || (ce.Page == leaked && strings.Contains(ce.Reason, "leaked"))
		sawBoth = sawBoth || (ce.Page == f.meta.Root && strings.Contains(ce.Reason, "reachable and free"))
	}
	if !sawLeak || !sawBoth {
		t.Fatalf("leak of page %d found %t, root %d reachable and free found %t: %v", leaked, sawLeak, f.meta.Root, sawBoth, errs)
	}
}

// TestReadMetas covers the metas: a damaged meta 0 (meta 1 names the page
// size), both damaged, an unsupported page size, a file shorter than its
// meta says, a newer bbolt format.
func TestReadMetas(t *testing.T) {
	orig := testFiles(t)["mixed-4k.bbolt"]
	good, err := ReadMetas(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	read := func(data []byte) (Metas, error) { return ReadMetas(bytes.NewReader(data), int64(len(data))) }

	data := bytes.Clone(orig)
	clear(data[:4096])
	ms, err := read(data)
	if err != nil || ms.Meta.Slot != 1 || ms.Errs[0] == nil || ms.Meta.PageSize != 4096 {
		t.Fatalf("meta 0 zeroed: %+v, %v; want meta 1", ms, err)
	}

	data = bytes.Clone(orig)
	data[good.Meta.Slot*4096+HeaderSize+20] ^= 1 // the newest meta's root, without its checksum
	ms, err = read(data)
	if err != nil || ms.Meta.Slot == good.Meta.Slot || ms.Meta.Txid >= good.Meta.Txid {
		t.Fatalf("newest meta damaged: %+v, %v; want the older one", ms, err)
	}

	data = bytes.Clone(orig)
	clear(data[:4096])
	clear(data[4096:8192])
	if _, err := read(data); err == nil || !strings.Contains(err.Error(), "no valid meta") {
		t.Fatalf("both metas zeroed: %v", err)
	}

	for _, ps := range []int{512, 128 << 10} {
		data := make([]byte, 4*ps)
		for slot := 0; slot < 2; slot++ {
			EncodeMeta(data[slot*ps:], Meta{PageSize: ps, Root: 3, Freelist: 2, HWM: 4, Txid: uint64(slot)}, slot)
		}
		if _, err := read(data); err == nil || !strings.Contains(err.Error(), "rivet reads page sizes") {
			t.Fatalf("page size %d: %v, want a refusal naming the page sizes rivet reads", ps, err)
		}
	}

	if _, err := read(orig[:good.Meta.HWM*4096-1]); !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("file shorter than its HWM: %v, want ErrCorrupt", err)
	}

	data = bytes.Clone(orig)
	for slot := 0; slot < 2; slot++ {
		binary.LittleEndian.PutUint32(data[slot*4096+HeaderSize+4:], Version+1)
	}
	if _, err := read(data); !errors.Is(err, rerrors.ErrVersionMismatch) {
		t.Fatalf("newer bbolt format: %v, want ErrVersionMismatch", err)
	}
}

// TestMetaRoundTrip: EncodeMeta writes what DecodeMeta reads, checksum
// included.
func TestMetaRoundTrip(t *testing.T) {
	m := Meta{Slot: 1, PageSize: 8192, Flags: 0, Root: 9, RootSequence: 3, Freelist: NoFreelist, HWM: 20, Txid: 77}
	buf := make([]byte, 8192)
	EncodeMeta(buf, m, 1)
	got, err := DecodeMeta(buf, 1)
	if err != nil || got != m {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, m)
	}
	buf[HeaderSize+50] ^= 1
	if _, err := DecodeMeta(buf, 1); !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("a flipped txid bit: %v, want a checksum failure", err)
	}
}

// TestCacheStaysWithinBudget translates every page of a file through a
// small cache and checks the cache never holds more than its budget, and
// that a hit returns the node a miss made.
func TestCacheStaysWithinBudget(t *testing.T) {
	f := open(t, testFiles(t)["mixed-1k.bbolt"])
	const budget = 16 << 10
	src := NewSource(f, budget)
	for round := 0; round < 2; round++ {
		for id := uint64(2); id < f.meta.HWM; id++ {
			if _, err := f.Node(id); err != nil {
				continue
			}
			a, err := src.ReadNode(page.Ref{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := src.ReadNode(page.Ref{ID: id})
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("page %d: two reads differ", id)
			}
			if got := src.cache.cachedBytes(); got > budget {
				t.Fatalf("cache holds %d bytes, budget %d", got, budget)
			}
		}
	}
	if src.cache.cachedBytes() == 0 {
		t.Fatal("the cache kept nothing")
	}
	none := NewSource(f, 0)
	if _, err := none.ReadNode(page.Ref{ID: f.meta.Root}); err != nil || none.cache.cachedBytes() != 0 {
		t.Fatalf("a source without a cache: %v, %d bytes cached", err, none.cache.cachedBytes())
	}
}

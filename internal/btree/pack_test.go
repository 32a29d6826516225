package btree

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// TestLeafCut checks leafCut's rule on streams of random element sizes:
// at least one element; a leaf of several elements within packLeafPages
// pages; one page whenever every element is at most 1/16 of a page; the
// fewest pages that are full enough, when any are; a cut of a cut is
// itself (packing packed leaves changes nothing); and a cut reported
// settled stays when elements follow.
func TestLeafCut(t *testing.T) {
	const ps = 4096
	rng := rand.New(rand.NewSource(1))
	dists := []struct {
		name     string
		min, max int // element sizes, encoded
	}{
		{"100B", 100 + 33, 100 + 33},
		{"small", 40, ps / 16},
		{"1KiB", 700, 1300},
		{"etcd", 512 + 33, 8192 + 33},
		{"near-page", ps - 200, ps + 200},
		{"huge", 8 * ps, 8*ps + 100},
	}
	pagesOf := func(els []int) int { return int(page.RunPages(page.HeaderSize+sum(els), ps)) }
	full := func(els []int) bool {
		p := pagesOf(els)
		return (p*ps-page.HeaderSize-sum(els))*packFullDen <= p*ps*(packFullDen-packFullNum)
	}
	cases, settledCases := 0, 0
	for _, d := range dists {
		for range 300 {
			els := make([]int, 1+rng.Intn(60))
			for i := range els {
				els[i] = d.min + rng.Intn(d.max-d.min+1)
			}
			cut := leafCut(els, ps)
			cases++
			if cut < 1 || cut > len(els) {
				t.Fatalf("%s: cut %d of %d elements", d.name, cut, len(els))
			}
			p := pagesOf(els[:cut])
			if cut > 1 && p > packLeafPages {
				t.Fatalf("%s: %d elements in %d pages", d.name, cut, p)
			}
			if d.max <= ps/16 && p != 1 {
				t.Fatalf("%s: small elements cut into a leaf of %d pages", d.name, p)
			}
			// The fewest pages any full-enough cut has.
			fewest := 0
			for j := 1; j <= len(els) && pagesOf(els[:j]) <= packLeafPages; j++ {
				if jp := pagesOf(els[:j]); full(els[:j]) && (j == len(els) || pagesOf(els[:j+1]) > jp) && fewest == 0 {
					fewest = jp
				}
			}
			if fewest != 0 && (p != fewest || !full(els[:cut])) {
				t.Fatalf("%s: cut into %d pages (full %t), but %d pages can be full enough", d.name, p, full(els[:cut]), fewest)
			}
			if again := leafCut(els[:cut], ps); again != cut {
				t.Fatalf("%s: cut %d, cut again %d", d.name, cut, again)
			}
			// Once settled, more elements change nothing.
			if _, settled := cutLeaf(els, ps); settled {
				more := append(els[:len(els):len(els)], d.min+rng.Intn(d.max-d.min+1), 40)
				if again := leafCut(more, ps); again != cut {
					t.Fatalf("%s: settled cut %d, %d with more elements", d.name, cut, again)
				}
				settledCases++
			}
		}
	}
	if cases != 300*len(dists) || settledCases < cases/4 {
		t.Fatalf("%d cases ran, %d settled", cases, settledCases)
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// packImage is an in-memory file of 4 KiB pages that a test's
// transactions write their runs into.
type packImage struct {
	img   []byte
	alloc *bumpAlloc
	txid  uint64
	root  page.Ref
}

const packPS = 4096

func newPackImage() *packImage {
	return &packImage{img: make([]byte, 4*packPS), alloc: &bumpAlloc{next: 4}}
}

// update runs fn on the tree in a write transaction and writes its runs.
func (im *packImage) update(t *testing.T, repack bool, fn func(tr *Tree)) {
	t.Helper()
	im.txid++
	env := &Env{Data: im.img, PageSize: packPS, HWM: im.alloc.next, Txid: im.txid, Alloc: im.alloc}
	tr := Open(env, im.root)
	tr.Repack = repack
	fn(tr)
	must(t, tr.Rebalance())
	must(t, tr.Spill())
	for _, r := range env.Runs {
		end := int(r.ID)*packPS + len(r.Data)
		if end > len(im.img) {
			im.img = append(im.img, make([]byte, end-len(im.img))...)
		}
		copy(im.img[int(r.ID)*packPS:], r.Data)
	}
	im.root = tr.Root()
}

func (im *packImage) env() *Env {
	return &Env{Data: im.img, PageSize: packPS, HWM: im.alloc.next, Txid: im.txid}
}

// leafGroups returns, per branch whose children are leaves, its leaves.
func (im *packImage) leafGroups(t *testing.T) [][]page.Node {
	t.Helper()
	env := im.env()
	var groups [][]page.Node
	var walk func(ref page.Ref)
	walk = func(ref page.Ref) {
		n, err := env.readNode(ref)
		must(t, err)
		if n.IsLeaf() {
			return
		}
		var group []page.Node
		for i := 0; i < n.Count(); i++ {
			c, err := env.readNode(n.BranchChild(i))
			must(t, err)
			if c.IsLeaf() {
				group = append(group, c)
			} else {
				walk(n.BranchChild(i))
			}
		}
		if len(group) > 0 {
			groups = append(groups, group)
		}
	}
	walk(im.root)
	return groups
}

// leafShape counts the leaves of the image's tree and their pages.
func (im *packImage) leafShape(t *testing.T) (leaves, pages, maxPages int) {
	t.Helper()
	for _, g := range im.leafGroups(t) {
		for _, l := range g {
			p := int(l.Header().Pages())
			leaves, pages, maxPages = leaves+1, pages+p, max(maxPages, p)
		}
	}
	return leaves, pages, maxPages
}

// TestRepackAsSimulated: compaction's packing of a tree's leaves (Touch
// with Repack, Rebalance, Spill) makes exactly the leaves packSavings
// predicts for it, keeps every key and value, builds leaves of several
// pages only from elements too large for one page to be full, and a second
// simulation of the packed tree finds nothing worth repacking.
func TestRepackAsSimulated(t *testing.T) {
	for _, shape := range []struct {
		name       string
		vmin, vmax int
		multi      bool // leaves of several pages expected
	}{
		{"etcd", 512, 8192, true},
		{"1KiB", 700, 1300, true},
		{"100B", 100, 100, false},
	} {
		t.Run(shape.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(2))
			im := newPackImage()
			want := map[string][]byte{}
			key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
			n := 24 << 20 / ((shape.vmin + shape.vmax) / 2)
			for start := 0; start < n; start += 2000 {
				im.update(t, false, func(tr *Tree) {
					for i := start; i < min(start+2000, n); i++ {
						v := make([]byte, shape.vmin+rng.Intn(shape.vmax-shape.vmin+1))
						rng.Read(v)
						want[string(key(i))] = v
						must(t, tr.Put(key(i), v, 0, 0))
					}
				})
			}
			// Random deletes leave leaves of every fill.
			im.update(t, false, func(tr *Tree) {
				for i := range n {
					if rng.Intn(3) == 0 {
						if _, err := tr.Delete(key(i), 0); err != nil {
							t.Fatal(err)
						}
						delete(want, string(key(i)))
					}
				}
			})
			leavesBefore, pagesBefore, _ := im.leafShape(t)
			predLeaves, predPages := 0, 0
			tr := Open(im.env(), im.root)
			for _, g := range im.leafGroups(t) {
				after, _, pagesAfter, err := tr.packSavings(g)
				must(t, err)
				predLeaves += after
				predPages += pagesAfter
			}
			// Pack every leaf, as a repacking step does with the groups it
			// takes.
			im.update(t, true, func(tr *Tree) {
				for _, g := range im.leafGroups(t) {
					for _, l := range g {
						k, err := l.LeafKey(0)
						must(t, err)
						must(t, tr.Touch(bytes.Clone(k)))
					}
				}
			})
			leaves, pages, maxPages := im.leafShape(t)
			t.Logf("%d keys: %d leaves of %d pages -> %d leaves of %d pages (largest %d)", len(want), leavesBefore, pagesBefore, leaves, pages, maxPages)
			if leaves != predLeaves || pages != predPages {
				t.Fatalf("packing made %d leaves of %d pages, packSavings predicted %d of %d", leaves, pages, predLeaves, predPages)
			}
			if pages >= pagesBefore {
				t.Fatalf("packing %d pages of leaves made %d", pagesBefore, pages)
			}
			if maxPages > packLeafPages || (maxPages > 1) != shape.multi {
				t.Fatalf("largest leaf %d pages; leaves of several pages expected: %t", maxPages, shape.multi)
			}
			tr = Open(im.env(), im.root)
			for _, g := range im.leafGroups(t) {
				after, before, pagesAfter, err := tr.packSavings(g)
				must(t, err)
				// Groups may differ from those packed (a branch that lost
				// leaves merged into its sibling, and the tail leaf of
				// one group now packs with the next), but not enough to
				// be worth a rewrite.
				if worthRepacking(len(g), after, before, pagesAfter) {
					t.Fatalf("packed group of %d leaves of %d pages would pack again into %d of %d", len(g), before, after, pagesAfter)
				}
			}
			got := 0
			c := tr.Cursor()
			for k, v, _, ok := c.First(); ok; k, v, _, ok = c.Next() {
				if w, found := want[string(k)]; !found || !bytes.Equal(v, w) {
					t.Fatalf("key %x: value of %d bytes, want %d (found %t)", k, len(v), len(w), found)
				}
				got++
			}
			if got != len(want) {
				t.Fatalf("%d keys after packing, want %d", got, len(want))
			}
			im.validate(t)
		})
	}
}

// validate walks the image's tree as Check does: every run's checksum,
// header and key order.
func (im *packImage) validate(t *testing.T) {
	t.Helper()
	w := Walker{
		Fetch:           func(id page.ID, n uint64) ([]byte, error) { return im.img[id*packPS : (id+n)*packPS], nil },
		PageSize:        packPS,
		HWM:             im.alloc.next,
		All:             true,
		VerifyChecksums: true,
		Visit:           func(page.ID, uint64, page.Type) error { return nil },
	}
	if err := w.Walk(im.root); err != nil {
		t.Fatal(err)
	}
}

// TestResplitPackedLeaf: a commit that updates an element of a packed leaf
// of several pages cuts it as a commit cuts any node, but into full pages:
// a leaf of 1 KiB values into leaves of one page, none of one element (the
// last two elements go together rather than one overflowing the part
// before them into a second page).
func TestResplitPackedLeaf(t *testing.T) {
	for _, n := range []int{40, 41, 43, 47, 52, 58} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			im := newPackImage()
			key := func(i int) []byte { return []byte(fmt.Sprintf("key%04d", i)) }
			val := bytes.Repeat([]byte("v"), 1000)
			im.update(t, false, func(tr *Tree) {
				for i := range n {
					must(t, tr.Put(key(i), val, 0, 0))
				}
			})
			var multi [][]byte // the first key of each leaf of several pages
			touch := func() {
				multi = nil
				im.update(t, true, func(tr *Tree) {
					for _, g := range im.leafGroups(t) {
						for _, l := range g {
							k, err := l.LeafKey(0)
							must(t, err)
							must(t, tr.Touch(bytes.Clone(k)))
						}
					}
				})
				for _, g := range im.leafGroups(t) {
					for _, l := range g {
						if l.Header().Pages() > 1 {
							k, _ := l.LeafKey(0)
							multi = append(multi, bytes.Clone(k))
						}
					}
				}
			}
			touch()
			if len(multi) == 0 {
				t.Fatal("packing 1 KiB values made no leaf of several pages")
			}
			im.update(t, false, func(tr *Tree) {
				for _, k := range multi {
					must(t, tr.Put(k, val[:990], 0, 0))
				}
			})
			leaves, short := 0, 0
			for _, g := range im.leafGroups(t) {
				for _, l := range g {
					leaves++
					if l.Header().Pages() > 1 || l.Count() < 2 {
						k, _ := l.LeafKey(0)
						t.Fatalf("leaf at %q: %d elements in %d pages after an update", k, l.Count(), l.Header().Pages())
					}
					if l.Count() < 3 {
						short++
					}
				}
			}
			// Full pages hold three values each: at most the last part of
			// each cut leaf, and the tree's last leaf, hold fewer.
			if leaves < n/3 || short > len(multi)+1 {
				t.Fatalf("%d leaves for %d values of 1 KiB, %d of fewer than three (%d leaves cut)", leaves, n, short, len(multi))
			}
			im.validate(t)
		})
	}
}

// TestPackMixedLevels: a leaf whose right sibling is a branch (a corrupt
// file) stops packing with a *CorruptError, whether the sibling is only
// measured or also materialised, instead of reading a branch as a leaf.
func TestPackMixedLevels(t *testing.T) {
	for _, materialised := range []bool{false, true} {
		const txid = 1
		img := make([]byte, 8*packPS)
		ref := func(id page.ID) page.Ref {
			return page.Ref{ID: id, Txid: txid, Checksum: page.Checksum(img[id*packPS : (id+1)*packPS])}
		}
		big := bytes.Repeat([]byte("v"), 3000)
		page.EncodeLeaf(img[4*packPS:5*packPS], packPS, 4, txid, []page.LeafElem{{Key: []byte("a"), Value: big}})
		page.EncodeLeaf(img[5*packPS:6*packPS], packPS, 5, txid, []page.LeafElem{{Key: []byte("m"), Value: big}})
		page.EncodeBranch(img[6*packPS:7*packPS], packPS, 6, txid, []page.BranchElem{{Key: []byte("m"), Child: ref(5)}})
		page.EncodeBranch(img[7*packPS:8*packPS], packPS, 7, txid, []page.BranchElem{{Key: []byte("a"), Child: ref(4)}, {Key: []byte("m"), Child: ref(6)}})
		env := &Env{Data: img, PageSize: packPS, HWM: 8, Txid: txid + 1, Alloc: &bumpAlloc{next: 8}}
		tr := Open(env, ref(7))
		tr.Repack = true
		must(t, tr.Touch([]byte("a")))
		if materialised {
			must(t, tr.Touch([]byte("m")))
		}
		err := tr.Rebalance()
		if err == nil {
			t.Fatalf("materialised %t: Rebalance packed a leaf with a branch sibling", materialised)
		}
		requireCorrupt(t, "Rebalance", err)
	}
}

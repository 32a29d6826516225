package btree

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// hintLog is a Readahead that records the hints it is given. Pages below
// resident are in memory, the others not.
type hintLog struct {
	ranges   [][2]uint64 // id, pages
	resident uint64
	probes   int
}

func (h *hintLog) WillNeed(id page.ID, n uint64) {
	h.ranges = append(h.ranges, [2]uint64{id, n})
}

func (h *hintLog) Resident(id page.ID) bool {
	h.probes++
	return id < h.resident
}

// covered reports whether every page of [id, id+n) lies in one of the
// first upto hints.
func (h *hintLog) covered(id, n uint64, upto int) bool {
	for p := id; p < id+n; p++ {
		in := false
		for _, r := range h.ranges[:upto] {
			if p >= r[0] && p < r[0]+r[1] {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return true
}

func (h *hintLog) pages() uint64 {
	var n uint64
	for _, r := range h.ranges {
		n += r[1]
	}
	return n
}

// raPS is the page size of the read-ahead tests' trees: 4 KiB, the
// default, so that a parent has as many leaves as in a real file.
const raPS = 4096

// readaheadImage builds a tree of leaves of one to four pages (values up to
// three pages), written in key order by one spill with a bump allocator:
// leaves one after another in key order, as compaction leaves them, and
// the branches after them.
func readaheadImage(t *testing.T, keys int) (img []byte, root page.Ref, hwm uint64, key func(int) []byte) {
	a := &bumpAlloc{next: page.MinPages}
	key = func(i int) []byte { return []byte(fmt.Sprintf("key%06d", i)) }
	env := &Env{PageSize: raPS, HWM: a.next, Txid: 1, Alloc: a}
	tr := Open(env, page.Ref{})
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < keys; i++ {
		v := make([]byte, 100+rng.Intn(3*raPS))
		must(t, tr.Put(key(i), v, 0, 0))
	}
	must(t, tr.Rebalance())
	must(t, tr.Spill())
	img = make([]byte, a.next*raPS)
	for _, r := range env.Runs {
		copy(img[r.ID*raPS:], r.Data)
	}
	return img, tr.Root(), a.next, key
}

// leafWalk records, for a cursor walk, each leaf entered: its run and the
// number of hints given before the move that entered it.
type leafEntry struct {
	id, pages uint64
	parent    uint64 // the leaf's parent's page
	before    int    // hints given before the move into the leaf
}

func walkLeaves(c *Cursor, log *hintLog, start, step func(*Cursor) ([]byte, []byte, uint32, bool)) []leafEntry {
	var leaves []leafEntry
	last := uint64(0)
	before := len(log.ranges)
	for _, _, _, ok := start(c); ok; _, _, _, ok = step(c) {
		top := c.stack[len(c.stack)-1].page
		if id := top.ID(); id != last {
			leaves = append(leaves, leafEntry{id: id, pages: top.Header().Pages(), parent: c.stack[len(c.stack)-2].page.ID(), before: before})
			last = id
		}
		before = len(log.ranges)
	}
	return leaves
}

// A cursor walking a tree leaf by leaf asks for the leaves ahead in
// windows, before it reaches them: every leaf but the first two of a walk
// is asked for before the move that enters it, and every parent but the
// first, with a hint per window (not per leaf) and little read that the
// walk does not need.
func TestCursorReadaheadWindows(t *testing.T) {
	img, root, hwm, _ := readaheadImage(t, 6000)
	walks := []struct {
		name        string
		start, step func(*Cursor) ([]byte, []byte, uint32, bool)
	}{
		{"First/Next", (*Cursor).First, (*Cursor).Next},
		{"Last/Prev", (*Cursor).Last, (*Cursor).Prev},
	}
	for _, w := range walks {
		log := &hintLog{}
		env := &Env{Data: img, PageSize: raPS, HWM: hwm, Txid: 1, Readahead: log}
		leaves := walkLeaves(Open(env, root).Cursor(), log, w.start, w.step)
		if env.Err != nil {
			t.Fatal(env.Err)
		}
		parents := map[uint64]bool{}
		var leafPages uint64
		late, lateParents := 0, 0
		for i, l := range leaves {
			leafPages += l.pages
			newParent := !parents[l.parent]
			parents[l.parent] = true
			if i > 0 && newParent && !log.covered(l.parent, 1, l.before) {
				lateParents++
			}
			if !log.covered(l.id, l.pages, l.before) {
				late++
			}
		}
		t.Logf("%s: %d leaves (%d pages) under %d parents: %d hints for %d pages; %d leaves and %d parents not asked for before entered",
			w.name, len(leaves), leafPages, len(parents), len(log.ranges), log.pages(), late, lateParents)
		if len(parents) < 10 || len(leaves) < 20*len(parents) {
			t.Fatalf("%s: %d leaves under %d parents: the tree is too small for the test", w.name, len(leaves), len(parents))
		}
		// The first leaf of the walk and the leaf its first move enters.
		if late > 2 {
			t.Errorf("%s: %d leaves not asked for before the walk entered them, want at most 2", w.name, late)
		}
		// A parent whose grandparent is not the previous parent's is
		// entered unannounced; this tree has one grandparent (its root).
		if lateParents > 0 {
			t.Errorf("%s: %d parents not asked for before the walk entered them", w.name, lateParents)
		}
		// One hint per window of at least readaheadFirst bytes, about two
		// more per parent (its last, short window and the next parent).
		windows := int(leafPages*raPS/readaheadFirst) + 1
		if max := windows + 2*len(parents); len(log.ranges) > max {
			t.Errorf("%s: %d hints, want at most %d", w.name, len(log.ranges), max)
		}
		if len(log.ranges) >= len(leaves)/4 {
			t.Errorf("%s: %d hints for %d leaves: not one per window", w.name, len(log.ranges), len(leaves))
		}
		// Little more than the leaves (the tail estimates, the parents).
		if log.pages() > leafPages+leafPages/8+uint64(len(parents)) {
			t.Errorf("%s: asked for %d pages, the leaves have %d", w.name, log.pages(), leafPages)
		}
	}
}

// Point lookups and walks that stay inside a leaf ask for nothing.
func TestCursorReadaheadNotForPointReads(t *testing.T) {
	img, root, hwm, key := readaheadImage(t, 3000)
	log := &hintLog{}
	env := &Env{Data: img, PageSize: raPS, HWM: hwm, Txid: 1, Readahead: log}
	tr := Open(env, root)
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 1000; i++ {
		k := key(rng.Intn(3000))
		if _, _, found := tr.Get(k); !found {
			t.Fatalf("Get(%s): not found", k)
		}
		c := tr.Cursor()
		if got, _, _, ok := c.Seek(k); !ok || string(got) != string(k) {
			t.Fatalf("Seek(%s) = %s, %v", k, got, ok)
		}
		// Moves that stay in the leaf the Seek found.
		leaf := c.stack[len(c.stack)-1].page.ID()
		for c.stack[len(c.stack)-1].index+1 < c.stack[len(c.stack)-1].count() {
			c.Next()
		}
		for c.stack[len(c.stack)-1].index > 0 {
			c.Prev()
		}
		if id := c.stack[len(c.stack)-1].page.ID(); id != leaf {
			t.Fatalf("the cursor left leaf %d for %d", leaf, id)
		}
	}
	if env.Err != nil {
		t.Fatal(env.Err)
	}
	if len(log.ranges) != 0 {
		t.Fatalf("point reads gave %d read-ahead hints, want none", len(log.ranges))
	}
	// The first move to another leaf starts the windows.
	c := tr.Cursor()
	c.Seek(key(1500))
	for id := c.stack[len(c.stack)-1].page.ID(); c.stack[len(c.stack)-1].page.ID() == id; {
		if _, _, _, ok := c.Next(); !ok {
			t.Fatal("the walk ended in one leaf")
		}
	}
	if len(log.ranges) == 0 {
		t.Fatal("a move to the next leaf gave no hint")
	}
}

// A Walker with a Readahead asks for the children of each branch before it
// visits them: every run but the root's, in one hint per branch when the
// children lie one after another.
func TestWalkerReadahead(t *testing.T) {
	img, root, hwm, _ := readaheadImage(t, 6000)
	log := &hintLog{}
	type visit struct {
		id, pages uint64
		before    int
	}
	var visits []visit
	branches := 0
	w := Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			return img[id*raPS : (id+n)*raPS], nil
		},
		PageSize: raPS, HWM: hwm, All: true, VerifyChecksums: true, Readahead: log,
		Visit: func(id page.ID, n uint64, tp page.Type) error {
			visits = append(visits, visit{id, n, len(log.ranges)})
			if tp == page.TypeBranch {
				branches++
			}
			return nil
		},
	}
	if err := w.Walk(root); err != nil {
		t.Fatal(err)
	}
	partly := 0
	for _, v := range visits[1:] {
		if !log.covered(v.id, 1, v.before) {
			t.Fatalf("run %d+%d visited before it was asked for", v.id, v.pages)
		}
		if !log.covered(v.id, v.pages, v.before) {
			partly++
		}
	}
	// A branch names its children's first pages: the last child's length
	// is a guess.
	if partly > branches {
		t.Errorf("%d runs visited before all of them was asked for, want at most one per branch (%d)", partly, branches)
	}
	if len(log.ranges) != branches {
		t.Fatalf("%d hints for %d branches, want one each", len(log.ranges), branches)
	}
}

// checkedHints is a Readahead for walks over damaged trees: every hint
// must name pages of the state, whatever the branches say.
type checkedHints struct {
	t   *testing.T
	hwm uint64
}

func (h *checkedHints) WillNeed(id page.ID, n uint64) {
	if id < page.MinPages || n == 0 || id >= h.hwm || n > h.hwm-id {
		h.t.Fatalf("read-ahead hint for pages [%d, %d+%d), outside [%d, %d)", id, id, n, page.MinPages, h.hwm)
	}
}

func (h *checkedHints) Resident(id page.ID) bool {
	if id < page.MinPages || id >= h.hwm {
		h.t.Fatalf("residency asked of page %d, outside [%d, %d)", id, page.MinPages, h.hwm)
	}
	return id%2 == 0
}

// A walk over pages in memory asks whether they are, a couple of times per
// window, and asks for none of them; over a file half in memory it asks for
// the other half.
func TestCursorReadaheadSkipsResident(t *testing.T) {
	img, root, hwm, _ := readaheadImage(t, 6000)
	for _, resident := range []uint64{hwm, hwm / 2} {
		log := &hintLog{resident: resident}
		env := &Env{Data: img, PageSize: raPS, HWM: hwm, Txid: 1, Readahead: log}
		leaves := walkLeaves(Open(env, root).Cursor(), log, (*Cursor).First, (*Cursor).Next)
		if env.Err != nil {
			t.Fatal(env.Err)
		}
		var late, cold, below int
		for _, l := range leaves {
			if l.id+l.pages <= resident {
				continue
			}
			cold++
			if !log.covered(l.id, l.pages, l.before) {
				late++
			}
		}
		for _, r := range log.ranges {
			if r[0]+r[1] <= resident {
				below++
			}
		}
		t.Logf("pages below %d of %d in memory: %d hints (%d of them below), %d probes; %d of %d leaves not in memory were not asked for before entered",
			resident, hwm, len(log.ranges), below, log.probes, late, cold)
		if log.probes == 0 || log.probes > len(leaves)/8 {
			t.Errorf("%d residency probes for %d leaves, want some, not one per leaf", log.probes, len(leaves))
		}
		// The window that reaches the first page not in memory may still
		// be taken for in memory (its first child is).
		if below > 0 || late > 1+int(readaheadMax/raPS)/2 {
			t.Errorf("%d hints for pages in memory, %d leaves not in memory not asked for in time", below, late)
		}
		if cold > 0 && len(log.ranges) == 0 {
			t.Errorf("no hint for %d leaves not in memory", cold)
		}
	}
}

package boltfile

import (
	"bytes"
	"encoding/binary"

	"github.com/rivetkv/rivet/internal/page"
)

// Check verifies the file's structure at its meta, as bbolt's Tx.Check
// does, and calls report with every problem found (a *errors.CorruptError
// naming the page) until report returns false:
//
//   - every page below the HWM is exactly one of: a meta page, a page of
//     the freelist's run, listed free once, or reached once from the root
//     through branch elements and bucket values ("unreachable unfreed"
//     when the freelist is persisted);
//   - every branch and leaf page decodes, its elements lie inside it, its
//     keys ascend strictly and lie within the range its parent gives it;
//   - bucket values decode; inline buckets hold plain values in key order;
//   - trees are at most MaxDepth deep and buckets nest at most MaxNesting.
//
// A page reached a second time is reported and not entered again, so the
// walk visits each page at most once: its time is bounded by the file's
// pages and elements even when pages form cycles or share subtrees (bbolt's
// own check hung for half an hour on such a file, bbolt #877).
func (f *File) Check(report func(error) bool) {
	hwm := f.meta.HWM
	c := &checker{f: f, used: make([]uint64, (hwm+63)/64), free: make([]uint64, (hwm+63)/64), report: report}
	c.used[0] |= 3 // the meta pages
	if f.meta.Freelist != NoFreelist && !c.freelist() {
		return
	}
	if !c.tree(f.meta.Root, nil, nil, 0, 0) {
		return
	}
	if f.meta.Freelist == NoFreelist {
		// bbolt rebuilds the free set from the tree at Open: every page
		// the tree does not reach is free, and none is leaked.
		return
	}
	for p := uint64(2); p < hwm; p++ {
		if !c.isSet(c.used, p) && !c.isSet(c.free, p) {
			if !c.problem(p, "bbolt page neither reachable nor free (leaked)") {
				return
			}
		}
	}
}

type checker struct {
	f      *File
	used   []uint64 // bit p: page p is a meta, freelist or tree page
	free   []uint64 // bit p: the freelist lists page p
	report func(error) bool
	// stopped is set once report returned false.
	stopped bool
}

func (c *checker) isSet(bits []uint64, p uint64) bool { return bits[p/64]&(1<<(p%64)) != 0 }

// problem reports a corruption of page id and says whether to go on.
func (c *checker) problem(id uint64, format string, args ...any) bool {
	return c.fail(page.Corruptf(id, format, args...))
}

func (c *checker) fail(err error) bool {
	if c.stopped {
		return false
	}
	if !c.report(err) {
		c.stopped = true
	}
	return !c.stopped
}

// freelist marks the freelist's run used and the pages it lists free.
func (c *checker) freelist() bool {
	id := c.f.meta.Freelist
	ids, pages, err := c.f.Freelist(id)
	if err != nil {
		c.used[id/64] |= 1 << (id % 64)
		return c.fail(err)
	}
	for p := id; p < id+pages; p++ {
		c.used[p/64] |= 1 << (p % 64)
	}
	hwm := c.f.meta.HWM
	for i := 0; i+8 <= len(ids); i += 8 {
		p := binary.LittleEndian.Uint64(ids[i:])
		switch {
		case p < 2 || p >= hwm:
			if !c.problem(id, "bbolt freelist lists page %d, outside [2, %d)", p, hwm) {
				return false
			}
		case c.isSet(c.free, p):
			if !c.problem(p, "bbolt page listed free twice") {
				return false
			}
		case c.isSet(c.used, p):
			if !c.problem(p, "bbolt page listed free is the freelist's own") {
				return false
			}
		default:
			c.free[p/64] |= 1 << (p % 64)
		}
	}
	return true
}

// use marks a tree page's run; it reports and returns false if any of its
// pages was reached before (the walk then does not enter it again). A page
// also listed free is reported, and entered.
func (c *checker) use(id, pages uint64) (enter, goOn bool) {
	for p := id; p < id+pages; p++ {
		if c.isSet(c.used, p) {
			return false, c.problem(p, "bbolt page reachable twice (through page %d: a shared subtree or a cycle)", id)
		}
	}
	goOn = true
	for p := id; p < id+pages; p++ {
		c.used[p/64] |= 1 << (p % 64)
		if c.isSet(c.free, p) && goOn {
			goOn = c.problem(p, "bbolt page is both reachable and free")
		}
	}
	return goOn, goOn
}

// tree checks the subtree at page id, whose keys must lie in [lo, hi) (nil:
// unbounded). depth counts levels in this bucket's tree, nest the bucket's
// nesting. It returns false once the walk must stop.
func (c *checker) tree(id uint64, lo, hi []byte, depth, nest int) bool {
	if depth >= MaxDepth {
		return c.problem(id, "bbolt tree deeper than %d levels (a cycle?)", MaxDepth)
	}
	p, err := c.f.Node(id)
	if err != nil {
		if id >= 2 && id < c.f.meta.HWM && !c.isSet(c.used, id) {
			c.used[id/64] |= 1 << (id % 64)
		}
		return c.fail(err)
	}
	enter, goOn := c.use(id, p.pages)
	if !enter {
		return goOn
	}
	prev := lo
	for i := 0; i < p.Count(); i++ {
		var key []byte
		if p.IsLeaf() {
			bucket, k, v, err := p.LeafElem(i)
			if err != nil {
				return c.fail(err)
			}
			key = k
			if !c.keyInOrder(id, i, key, prev, hi) {
				return false
			}
			if bucket && !c.bucket(id, v, nest) {
				return false
			}
		} else {
			k, child, err := p.BranchElem(i)
			if err != nil {
				return c.fail(err)
			}
			key = k
			if !c.keyInOrder(id, i, key, prev, hi) {
				return false
			}
			next := hi
			if i+1 < p.Count() {
				if nk, _, err := p.BranchElem(i + 1); err == nil {
					next = nk
				}
			}
			if !c.tree(child, k, next, depth+1, nest) {
				return false
			}
		}
		prev = key
	}
	return true
}

// keyInOrder checks element i's key of page id against the previous key
// (or, for the first, the low bound lo) and the high bound hi.
func (c *checker) keyInOrder(id uint64, i int, key, prev, hi []byte) bool {
	if prev != nil {
		cmp := bytes.Compare(key, prev)
		if (i == 0 && cmp < 0) || (i > 0 && cmp <= 0) {
			if !c.problem(id, "bbolt key %d (%x) does not come after %x", i, trim(key), trim(prev)) {
				return false
			}
		}
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		return c.problem(id, "bbolt key %d (%x) is not below its parent's next key %x", i, trim(key), trim(hi))
	}
	return true
}

// bucket checks the bucket value v found in leaf page id, and the bucket's
// tree.
func (c *checker) bucket(id uint64, v []byte, nest int) bool {
	b, err := c.f.DecodeBucket(id, v)
	if err != nil {
		return c.fail(err)
	}
	if b.Root != 0 {
		if nest+1 >= MaxNesting {
			return c.problem(id, "bbolt buckets nested deeper than %d (a cycle?)", MaxNesting)
		}
		return c.tree(b.Root, nil, nil, 0, nest+1)
	}
	in := b.Inline
	var prev []byte
	for i := 0; i < in.Count(); i++ {
		_, k, _, _ := in.LeafElem(i) // DecodeBucket validated every element
		if !c.keyInOrder(id, i, k, prev, nil) {
			return false
		}
		prev = k
	}
	return true
}

// trim shortens a key for a message.
func trim(k []byte) []byte {
	if len(k) > 32 {
		return k[:32]
	}
	return k
}

package btree

import (
	"github.com/rivetkv/rivet/internal/page"
)

// How compaction packs leaves (docs/design.md §4.1, "Packing").
//
// A leaf occupies whole pages, so every leaf wastes the tail of its last
// page. Regular commits cut nodes at page-sized targets, which wastes
// little when elements are small against a page but a lot when they are
// not: values of one to two kilobytes leave a quarter of each page empty,
// and values of a few kilobytes make leaves of two elements over two or
// three pages, half a page of each leaf empty. Compaction, which rewrites
// the leaves anyway, picks each leaf's length instead: the fewest pages
// that the next elements fill to at least packFullNum/packFullDen, up to
// packLeafPages pages (leafCut). Small elements fill a single page that
// well, so their leaves stay one page; larger ones get leaves of several
// pages whose rounding is a small part of them.
//
// The format has always allowed it: a leaf run spans 1+overflow pages
// whatever its element count (docs/design.md §2.4).
const (
	// packLeafPages bounds the leaves compaction builds: the longest
	// leaf a single inline value makes (inlineValuePages), so no leaf is
	// larger than the format already had, and a later update of one of
	// its elements rewrites at most that.
	packLeafPages = inlineValuePages
	// A packed leaf is full enough when its elements fill at least
	// packFullNum/packFullDen of its pages.
	packFullNum, packFullDen = 15, 16
)

// leafCut returns how many of the elements whose encoded sizes are els (in
// key order) a leaf packed from them should hold: of the leaves of at
// most packLeafPages pages the elements can start, the one of the fewest
// pages that is full enough (the longest of those pages), or, if none is,
// the one that wastes the smallest share of its pages (the longest on a
// tie). At least one element, even if it alone is longer than the bound.
//
// Packing is stable: it keeps the elements in their order, so packing
// leaves it packed cuts them where they are, and a second Compact finds
// nothing to repack (packSavings).
func leafCut(els []int, pageSize int) int {
	cut, _ := cutLeaf(els, pageSize)
	return cut
}

// cutLeaf is leafCut; settled reports that no element appended to els
// would change the cut (a leaf of fewer pages was full enough, or els
// reach past the largest leaf), so a caller may stop reading elements.
func cutLeaf(els []int, pageSize int) (cut int, settled bool) {
	ps := pageSize
	size := page.HeaderSize
	best, bestWaste, bestPages := 1, -1, 1 // the least wasteful cut so far
	cutSize, cutPages := 0, 0              // cut: the longest cut of cutPages pages
	fullEnough := func() bool {
		return cut > 0 && (cutPages*ps-cutSize)*packFullDen <= cutPages*ps*(packFullDen-packFullNum)
	}
	for j, el := range els {
		size += el
		pages := (size + ps - 1) / ps
		if pages > packLeafPages {
			settled = true
			break
		}
		if pages != cutPages {
			if fullEnough() {
				return cut, true
			}
			cutPages = pages
		}
		cut, cutSize = j+1, size
		// Waste shares compare as fractions: w/p <= bw/bp.
		if waste := pages*ps - size; bestWaste < 0 || waste*bestPages <= bestWaste*pages {
			best, bestWaste, bestPages = j+1, waste, pages
		}
	}
	if fullEnough() {
		return cut, settled
	}
	return best, settled
}

// leafElemSize is the encoded size of leaf element i of n.
func (n *node) leafElemSize(i int) int {
	return page.LeafElemSize + len(n.inodes[i].key) + n.valueSize(i)
}

// pack makes leaf n, a child of a branch, a leaf as leafCut would pack it
// from its elements and those of its right siblings: it moves the first
// elements of the siblings into n, and a sibling it empties leaves the
// tree. Siblings are read to choose the cut and materialised only when
// elements move out of them, so only those are rewritten. A leaf that
// already holds more than the cut (made by a regular commit) is left as it
// is, for splitPacked. It reports whether n is its parent's last child.
//
// A sibling that keeps elements keeps its old key in the parent until
// Spill re-keys it (the parent element is found by the key it was
// materialised with, as after deletes): between Rebalance and Spill
// nothing searches the tree.
func (t *Tree) pack(n *node) (last bool, err error) {
	ps := t.env.PageSize
	parent := n.parent
	idx := parent.childIndex(n)
	els := make([]int, 0, len(n.inodes)+16)
	size := page.HeaderSize
	for i := range n.inodes {
		els = append(els, n.leafElemSize(i))
		size += els[i]
	}
	// The elements that follow, until they can no longer change the cut.
	want, settled := cutLeaf(els, ps)
	for s := idx + 1; !settled && s < len(parent.inodes); s++ {
		if els, size, err = t.appendSiblingSizes(els, size, parent.inodes[s].child); err != nil {
			return false, err
		}
		want, settled = cutLeaf(els, ps)
	}
	if want < len(n.inodes) {
		return idx+1 >= len(parent.inodes), nil
	}
	for len(n.inodes) < want {
		r, err := parent.childAt(idx + 1)
		if err != nil {
			return false, err
		}
		if !r.leaf {
			return false, t.mixedLevels(r.orig.ID)
		}
		moved := min(want-len(n.inodes), len(r.inodes))
		n.inodes = append(n.inodes, r.inodes[:moved]...)
		r.inodes = r.inodes[moved:]
		if len(r.inodes) > 0 {
			break
		}
		parent.del(r.key)
		parent.removeChild(r)
		r.removed = true
		t.forget(r)
		if err := r.free(); err != nil {
			return false, err
		}
	}
	return idx+1 >= len(parent.inodes), nil
}

// appendSiblingSizes appends the encoded sizes of the elements of the leaf
// ref names to els, stopping once size (the running encoded size) passes
// what the largest packed leaf could hold. A materialised sibling is
// measured in memory, any other read from the map.
func (t *Tree) appendSiblingSizes(els []int, size int, ref page.Ref) ([]int, int, error) {
	limit := packLeafPages * t.env.PageSize
	if m, ok := t.nodes[ref.ID]; ok {
		if !m.leaf {
			return nil, 0, t.mixedLevels(ref.ID)
		}
		for i := 0; i < len(m.inodes) && size <= limit; i++ {
			el := m.leafElemSize(i)
			els = append(els, el)
			size += el
		}
		return els, size, nil
	}
	p, err := t.env.readNode(ref)
	if err != nil {
		t.env.fail(err)
		return nil, 0, err
	}
	if !p.IsLeaf() {
		return nil, 0, t.mixedLevels(ref.ID)
	}
	for i := 0; i < p.Count() && size <= limit; i++ {
		_, k, v, err := p.LeafElem(i)
		if err != nil {
			t.env.fail(err)
			return nil, 0, err
		}
		el := page.LeafElemSize + len(k) + len(v)
		els = append(els, el)
		size += el
	}
	return els, size, nil
}

// mixedLevels records and returns the corruption of a leaf whose sibling
// id is a branch.
func (t *Tree) mixedLevels(id page.ID) error {
	err := page.Corruptf(id, "siblings at one level are leaf and branch")
	t.env.fail(err)
	return err
}

// mergeSaves reports whether leaves of encoded sizes a and b, merged into
// one, take fewer pages than apart, within the largest packed leaf: a
// repacked parent's last child then merges into its left sibling.
func mergeSaves(a, b, pageSize int) bool {
	merged := a + b - page.HeaderSize
	pages := func(s int) int { return (s + pageSize - 1) / pageSize }
	return merged <= packLeafPages*pageSize && pages(merged) < pages(a)+pages(b)
}

// splitPacked returns the parts into which Spill cuts leaf n of a
// compaction step (Repack): n whole if it fits the largest packed leaf —
// compaction grows leaves only by packing, and cutting a leaf never saves a
// page — else parts as leafCut chooses them.
func (t *Tree) splitPacked(n *node) [][]inode {
	ps := t.env.PageSize
	if n.sizeLessThan(packLeafPages*ps + 1) {
		return [][]inode{n.inodes}
	}
	els := make([]int, len(n.inodes))
	for i := range n.inodes {
		els[i] = n.leafElemSize(i)
	}
	var parts [][]inode
	for start := 0; start < len(els); {
		k := leafCut(els[start:], ps)
		parts = append(parts, n.inodes[start:start+k:start+k])
		start += k
	}
	return parts
}

// packSavings simulates Rebalance with Repack over leaves, a run of
// siblings in key order up to their parent's last child, every one of
// them touched: each leaf packed in turn (pack), one that holds more than
// its cut kept or cut by splitPacked, the last merged leftwards while that
// saves pages (mergeSaves). It returns the leaves and pages that leaves,
// and the pages the leaves take now.
func (t *Tree) packSavings(leaves []page.Node) (leavesAfter, pagesBefore, pagesAfter int, err error) {
	leavesAfter, pagesBefore, pagesAfter, _, err = t.packPlan(leaves, nil)
	return leavesAfter, pagesBefore, pagesAfter, err
}

// packCut chooses where a step that cannot take all of leaves (a group
// worth packing) stops: after the first k leaves, k in [j, maxJ], packing
// them must use up exactly their own elements, so that nothing moves into
// them from leaf k and the next step, resuming at leaf k's first key,
// packs on from there. Failing that within maxJ, it stops after j leaves
// and resumes at the first element packing them leaves over (some of leaf
// j's may move into them): the leaf that remains of leaf j is rewritten
// once more by the next step. resume is nil when nothing is left over.
func (t *Tree) packCut(leaves []page.Node, j, maxJ int) (k int, resume []byte, err error) {
	k, at, fallback := -1, -1, -1
	_, _, _, keys, err := t.packPlan(leaves, func(i, pos int, ends []int) bool {
		switch {
		case i < j:
			return false
		case i > maxJ:
			return true
		case pos == ends[i-1]:
			k, at = i, pos
			return true
		case i == j:
			fallback = pos
		}
		return false
	})
	if err != nil {
		return 0, nil, err
	}
	if k < 0 {
		k, at = j, fallback
	}
	if at >= 0 && at < len(keys) {
		resume = keys[at]
	}
	return k, resume, nil
}

// packPlan simulates packing leaves as Rebalance does with Repack set.
// With at set, it is called before each leaf i >= 1 is packed with the
// element position pos packing has reached and each leaf's end, and stops
// the simulation by returning true; keys then holds every element's key.
func (t *Tree) packPlan(leaves []page.Node, at func(i, pos int, ends []int) bool) (leavesAfter, pagesBefore, pagesAfter int, keys [][]byte, err error) {
	ps := t.env.PageSize
	var els []int
	ends := make([]int, len(leaves)) // ends[k]: one past leaf k's last element
	for k, c := range leaves {
		for i := 0; i < c.Count(); i++ {
			_, key, v, err := c.LeafElem(i)
			if err != nil {
				return 0, 0, 0, nil, err
			}
			els = append(els, page.LeafElemSize+len(key)+len(v))
			if at != nil {
				keys = append(keys, key)
			}
		}
		ends[k] = len(els)
		pagesBefore += int(c.Header().Pages())
	}
	var sizes []int // encoded sizes of the leaves packing makes
	leafSize := func(from, to int) int {
		s := page.HeaderSize
		for _, el := range els[from:to] {
			s += el
		}
		return s
	}
	pos := 0
	for k, end := range ends {
		if at != nil && k > 0 && at(k, pos, ends) {
			return 0, 0, 0, keys, nil
		}
		if pos >= end {
			continue // emptied into a leaf before it
		}
		own := end - pos
		if cut := leafCut(els[pos:], ps); cut >= own {
			sizes = append(sizes, leafSize(pos, pos+cut))
			pos += cut
			continue
		}
		if s := leafSize(pos, end); s <= packLeafPages*ps {
			sizes = append(sizes, s)
		} else {
			for from := pos; from < end; {
				k := leafCut(els[from:end], ps)
				sizes = append(sizes, leafSize(from, from+k))
				from += k
			}
		}
		pos = end
	}
	for len(sizes) >= 2 && mergeSaves(sizes[len(sizes)-2], sizes[len(sizes)-1], ps) {
		sizes[len(sizes)-2] += sizes[len(sizes)-1] - page.HeaderSize
		sizes = sizes[:len(sizes)-1]
	}
	for _, s := range sizes {
		pagesAfter += int(page.RunPages(s, ps))
	}
	if at != nil && at(len(ends), pos, ends) {
		return 0, 0, 0, keys, nil
	}
	return len(sizes), pagesBefore, pagesAfter, keys, nil
}

// worthRepacking reports whether packing a group of leaves, from leaves
// leaves of pagesBefore pages to leavesAfter of pagesAfter, is worth
// rewriting them: it must empty at least a third of the leaves (and at
// least one) and give back at least an eighth of the pages (and at least
// one). A third is the line between "deleted from" and "as full as random
// inserts leave a tree" (about 69 % of each page), so that a tree merely
// grown at random is not rewritten by every Compact. Where packing keeps
// leaves of one page, pages drop as leaves do and the third decides; the
// eighth matters where it builds leaves of several pages from leaves of a
// few elements each: there the leaves drop by far more than the pages,
// which are what a rewrite gives back.
func worthRepacking(leaves, leavesAfter, pagesBefore, pagesAfter int) bool {
	leafSaved, pageSaved := leaves-leavesAfter, pagesBefore-pagesAfter
	return leafSaved > 0 && 3*leafSaved >= leaves && pageSaved > 0 && 8*pageSaved >= pagesBefore
}

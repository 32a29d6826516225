package btree

import (
	"bytes"
	"errors"

	"github.com/rivetkv/rivet/internal/page"
)

// errBudget stops a walk once the budget is spent.
var errBudget = errors.New("btree: relocation budget spent")

// A walk of a compaction step (Above, Sparse) starts at a key and, when its
// budget ends it, reports the key to resume at, so that one pass over a
// tree costs O(its pages) however many steps it takes (docs/design.md §4.1).
// Keys are copies.

// Budget bounds one compaction step's walk: the pages it may mark for
// rewriting and the nodes it may read (so that a stretch of the tree with
// nothing to rewrite does not hold the writer lock for a whole pass).
type Budget struct {
	// Pages is what the step may still mark; a walk stops once the runs it
	// found reach it.
	Pages uint64
	// Visits counts the pages of the nodes read, across every call of one
	// step: in a valid file each page belongs to one tree, so more visits
	// than the HWM mean a page reachable twice — a corrupt file whose branches (or
	// bucket records) form a DAG with exponentially many paths — and the
	// walk stops with ErrCorrupt instead of following them.
	Visits uint64
	// MaxVisits, if not 0, stops a walk once Visits reaches it, provided
	// the walk got past its starting key (so every step makes progress).
	MaxVisits uint64
}

// Spent reports whether a step has nothing left to spend: no pages, or
// its node reads.
func (b *Budget) Spent() bool { return b.spent(0, true) }

// spent reports whether a walk that found pages should stop before its
// next child; progressed: it finished something after its starting key.
func (b *Budget) spent(pages uint64, progressed bool) bool {
	return pages >= b.Pages || (progressed && b.MaxVisits > 0 && b.Visits >= b.MaxVisits)
}

// Above finds what a relocation step must rewrite so that no run of the
// tree's committed state lies at or above limit (docs/design.md §4.1): for
// every node run at or above it, the smallest key of its subtree (Touch
// with that key materialises the node and its path, and Spill writes them
// anew, below the limit if the allocator is limited), and the keys of blob
// values with an extent at or above it (to be put again), in key order per
// kind. Node runs longer than maxRun pages (0: no bound) are left where
// they are. It looks at keys from from on (nil: all) and stops when b is
// spent; then next is the key to resume at. Nested buckets are the
// caller's: their records are plain values here. An inline or empty tree
// has nothing to move.
func (t *Tree) Above(limit page.ID, maxRun uint64, from []byte, b *Budget) (nodes, blobs [][]byte, pages uint64, next []byte, err error) {
	if t.root.IsZero() {
		return nil, nil, 0, nil, nil
	}
	progressed := false
	var walk func(ref page.Ref, depth int) error
	walk = func(ref page.Ref, depth int) error {
		n, err := t.walkNode(ref, depth, &b.Visits)
		if err != nil {
			return err
		}
		if run := n.Header().Pages(); ref.ID+run > limit && (maxRun == 0 || run <= maxRun) {
			key, err := firstKey(n)
			if err != nil {
				return err
			}
			nodes = append(nodes, bytes.Clone(key))
			pages += n.Header().Pages()
		}
		for i := 0; i < n.Count(); i++ {
			if !n.IsLeaf() {
				if skip, err := branchBefore(n, i, from); err != nil || skip {
					if err != nil {
						return err
					}
					continue
				}
				if b.spent(pages, progressed) {
					return stopAt(&next, n, i)
				}
				if err := walk(n.BranchChild(i), depth+1); err != nil {
					return err
				}
				progressed = true
				continue
			}
			flags, k, v, err := n.LeafElem(i)
			if err != nil {
				return err
			}
			if flags != page.FlagBlob || bytes.Compare(k, from) < 0 {
				continue
			}
			if b.spent(pages, progressed) {
				next = bytes.Clone(k)
				return errBudget
			}
			progressed = true
			ref, err := page.DecodeBlobRef(n.ID(), v)
			if err != nil {
				return err
			}
			high, extentPages := false, uint64(0)
			if err := t.extents(ref, func(x page.ExtentRef, _ page.BlobExtent) error {
				high = high || x.ID+uint64(x.Pages) > limit
				extentPages += uint64(x.Pages)
				return nil
			}); err != nil {
				return err
			}
			if high {
				blobs = append(blobs, bytes.Clone(k))
				pages += extentPages
			}
		}
		return nil
	}
	if err := t.finishWalk(walk(t.root, 0)); err != nil {
		return nil, nil, 0, nil, err
	}
	return nodes, blobs, pages, next, nil
}

// Sparse finds leaves a repacking step should rewrite (docs/design.md
// §4.1): per branch whose children are leaves, if packing them as
// Rebalance does with Repack set (leftwards, each leaf cut by leafCut)
// would be worth it (worthRepacking), the smallest key of every one of
// them; Touch with each, then Rebalance packs them. Like Above it starts
// at from and stops when b is spent, with next the key to resume at, but
// a group (one branch's leaves from from on) is taken as far as the
// step's pages go, at least one leaf, and the next step resumes at the
// first leaf it did not take. A tree whose root is a leaf has nothing to
// pack.
func (t *Tree) Sparse(from []byte, b *Budget) (leaves [][]byte, pages uint64, next []byte, err error) {
	if t.root.IsZero() {
		return nil, 0, nil, nil
	}
	progressed := false
	var walk func(n page.Node, depth int) error
	walk = func(n page.Node, depth int) error {
		if n.IsLeaf() {
			return nil
		}
		var group []page.Node // the leaf children from from on
		for i := 0; i < n.Count(); i++ {
			if skip, err := branchBefore(n, i, from); err != nil || skip {
				if err != nil {
					return err
				}
				continue
			}
			if len(group) == 0 && b.spent(pages, progressed) {
				return stopAt(&next, n, i)
			}
			c, err := t.walkNode(n.BranchChild(i), depth+1, &b.Visits)
			if err != nil {
				return err
			}
			if !c.IsLeaf() {
				if err := walk(c, depth+1); err != nil {
					return err
				}
				progressed = true
				continue
			}
			group = append(group, c)
		}
		progressed = true
		leavesAfter, pagesBefore, pagesAfter, err := t.packSavings(group)
		if err != nil || !worthRepacking(len(group), leavesAfter, pagesBefore, pagesAfter) {
			return err
		}
		for j, c := range group {
			key, err := firstKey(c)
			if err != nil {
				return err
			}
			if j > 0 && pages >= b.Pages {
				// The step's pages end inside the group: take a few more
				// leaves, if that lets it end where packing stops at a
				// leaf's end (packCut), and resume there.
				k, resume, err := t.packCut(group, j, min(len(group), 2*j))
				if err != nil {
					return err
				}
				for _, c := range group[j:k] {
					key, err := firstKey(c)
					if err != nil {
						return err
					}
					leaves = append(leaves, bytes.Clone(key))
					pages += c.Header().Pages()
				}
				if resume == nil {
					return nil
				}
				next = bytes.Clone(resume)
				return errBudget
			}
			leaves = append(leaves, bytes.Clone(key))
			pages += c.Header().Pages()
		}
		return nil
	}
	root, err := t.walkNode(t.root, 0, &b.Visits)
	if err == nil {
		err = walk(root, 0)
	}
	if err := t.finishWalk(err); err != nil {
		return nil, 0, nil, err
	}
	return leaves, pages, next, nil
}

// walkNode reads a node of a compaction walk, counting the visit.
func (t *Tree) walkNode(ref page.Ref, depth int, visits *uint64) (page.Node, error) {
	if depth >= MaxDepth {
		return page.Node{}, t.depthErr()
	}
	if *visits++; *visits > t.env.HWM {
		return page.Node{}, page.Corruptf(ref.ID, "more tree pages than pages below the high-water mark %d (a page reachable twice)", t.env.HWM)
	}
	n, err := t.env.readNode(ref)
	if err == nil {
		// Visits count pages read, so that a step's reads are bounded in
		// bytes whatever its nodes' lengths.
		*visits += n.Header().Pages() - 1
	}
	return n, err
}

// branchBefore reports whether child i of branch n holds only keys below
// from (the next child's key is at most from), and checks the child's txid.
func branchBefore(n page.Node, i int, from []byte) (bool, error) {
	if child := n.BranchChild(i); child.Txid > n.Txid() {
		return false, childTxidErr(n, child)
	}
	if from == nil || i+1 >= n.Count() {
		return false, nil
	}
	k, err := n.BranchKey(i + 1)
	if err != nil {
		return false, err
	}
	return bytes.Compare(k, from) <= 0, nil
}

// stopAt ends a walk before child i of branch n: the walk resumes at its
// key (or at from itself for the first child, which holds from).
func stopAt(next *[]byte, n page.Node, i int) error {
	k, err := n.BranchKey(i)
	if err != nil {
		return err
	}
	*next = bytes.Clone(k)
	return errBudget
}

// finishWalk turns a walk's end into its error: none when the budget ended
// it, the error (latched) otherwise.
func (t *Tree) finishWalk(err error) error {
	switch {
	case err == nil, err == errBudget:
		return nil
	default:
		t.env.fail(err)
		return err
	}
}

func firstKey(n page.Node) ([]byte, error) {
	if n.IsLeaf() {
		return n.LeafKey(0)
	}
	return n.BranchKey(0)
}

// Touch materialises the path to the leaf where key is or would be, so that
// Spill rewrites every node on it (the way a relocation moves a node: copy
// on write to wherever the allocator now puts it). With Repack set the leaf
// is marked for packing by Rebalance.
func (t *Tree) Touch(key []byte) error {
	c := t.scratchCursor()
	c.search(key)
	if err := t.env.Err; err != nil {
		return err
	}
	n, err := c.node()
	if err == nil && t.Repack {
		n.unbalanced = true
	}
	return err
}

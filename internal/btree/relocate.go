package btree

import (
	"bytes"
	"errors"

	"github.com/rivetkv/rivet/internal/page"
)

// errBudget stops a walk once the budget is spent.
var errBudget = errors.New("btree: relocation budget spent")

// Above finds what a relocation step must rewrite so that no run of the
// tree's committed state lies at or above limit (docs/design.md §4.1): for
// every node run at or above it, the smallest key of its subtree (Touch
// with that key materialises the node and its path, and Spill writes them
// anew, below the limit if the allocator is limited), and the keys of blob
// values with an extent at or above it (to be put again). Keys are copies,
// in key order per kind. It stops once the runs found reach budget pages
// and then reports more. Nested buckets are the caller's: their records are
// plain values here. An inline or empty tree has nothing to move.
//
// visits counts the nodes read, across every call of one relocation step:
// in a valid file each page belongs to one tree, so more visits than the
// HWM mean a page reachable twice — a corrupt file whose branches (or
// bucket records) form a DAG with exponentially many paths — and the walk
// stops with ErrCorrupt instead of following them.
func (t *Tree) Above(limit page.ID, budget uint64, visits *uint64) (nodes, blobs [][]byte, pages uint64, more bool, err error) {
	if t.root.IsZero() {
		return nil, nil, 0, false, nil
	}
	var walk func(ref page.Ref, depth int) error
	walk = func(ref page.Ref, depth int) error {
		if depth >= MaxDepth {
			return t.depthErr()
		}
		if *visits++; *visits > t.env.HWM {
			return page.Corruptf(ref.ID, "more tree nodes than pages below the high-water mark %d (a page reachable twice)", t.env.HWM)
		}
		n, err := t.env.readNode(ref)
		if err != nil {
			return err
		}
		if ref.ID+n.Header().Pages() > limit {
			var key []byte
			if n.IsLeaf() {
				key, err = n.LeafKey(0)
			} else {
				key, err = n.BranchKey(0)
			}
			if err != nil {
				return err
			}
			nodes = append(nodes, bytes.Clone(key))
			pages += n.Header().Pages()
		}
		for i := 0; i < n.Count(); i++ {
			if pages >= budget {
				return errBudget
			}
			if !n.IsLeaf() {
				child := n.BranchChild(i)
				if child.Txid > n.Txid() {
					return childTxidErr(n, child)
				}
				if err := walk(child, depth+1); err != nil {
					return err
				}
				continue
			}
			flags, k, v, err := n.LeafElem(i)
			if err != nil {
				return err
			}
			if flags != page.FlagBlob {
				continue
			}
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
	switch err := walk(t.root, 0); {
	case err == errBudget:
		return nodes, blobs, pages, true, nil
	case err != nil:
		t.env.fail(err)
		return nil, nil, 0, false, err
	}
	return nodes, blobs, pages, false, nil
}

// Touch materialises the path to the leaf where key is or would be, so that
// Spill rewrites every node on it (the way a relocation moves a node: copy
// on write to wherever the allocator now puts it).
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

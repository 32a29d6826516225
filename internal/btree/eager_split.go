package btree

import (
	"bytes"
	"slices"

	"github.com/rivetkv/rivet/internal/page"
)

// eagerSplitElems bounds the elements of a node in memory. Spill cuts every
// node into page-sized parts anyway; splitting a node in memory as soon as
// it passes this bound only keeps each insert cheap. An insert copies the
// elements after it, so without the bound one transaction that puts n keys
// in random order into a tree copies O(n²) elements (1M keys: ~10^11
// element moves, tens of minutes; bbolt has the same cost). With it an
// insert copies at most this many.
const eagerSplitElems = 512

// tempIDBase is the first id of a node that an eager split made and that has
// no page yet. Its parent's element points at it with that id, which t.nodes
// resolves; no page can have it, since page ids are below the HWM and the
// HWM is below 2^38 (docs/design.md §7). Spill replaces the element's
// reference with the node's real one, as it does for every node it writes.
const tempIDBase page.ID = 1 << 63

// splitEager splits n, and then each ancestor that the new element makes
// too long, into halves while it holds more than eagerSplitElems elements.
// The caller has just put into n (Put materialised the path, so every
// ancestor is a node).
//
// Invariant kept: every element of a materialised branch resolves to its
// child through t.nodes or the memory map, and the child's key field is the
// exact key of that element (what Spill and Rebalance find it by).
func (t *Tree) splitEager(n *node) {
	for n != nil && len(n.inodes) > eagerSplitElems {
		t.env.Stats.Split++
		mid := len(n.inodes) / 2
		// A copy, not a reslice: n keeps appending into its own array.
		right := &node{tree: t, leaf: n.leaf, inodes: slices.Clone(n.inodes[mid:]), appended: n.appended, midInsert: n.midInsert}
		clear(n.inodes[mid:])
		n.inodes = n.inodes[:mid]
		right.key = right.inodes[0].key
		if !n.leaf {
			kept := n.children[:0]
			for _, c := range n.children {
				if bytes.Compare(c.key, right.key) >= 0 {
					c.parent = right
					right.children = append(right.children, c)
				} else {
					kept = append(kept, c)
				}
			}
			clear(n.children[len(kept):])
			n.children = kept
		}
		parent := n.parent
		if parent == nil {
			// n was the root: a new root branch takes both halves.
			parent = &node{tree: t}
			n.key = n.inodes[0].key
			parent.inodes = []inode{{key: n.key, child: t.nodeRef(n)}}
			parent.children = []*node{n}
			n.parent = parent
			t.rootNode = parent
		}
		if len(n.inodes) > 0 && bytes.Compare(n.inodes[0].key, n.key) < 0 {
			// n is its parent's first child, which takes every key below
			// the parent's separators, so its separator can be above its
			// smallest key; right's separator could then sort before it
			// and the parent would send keys between them to the wrong
			// half (found by TestLargeRandomTxn, seed
			// 1795558552680983900: a Get missed a key it had put). Lower
			// the separator to n's first key first, as spill does.
			if i, exact := parent.search(n.key); exact {
				parent.inodes[i].key = n.inodes[0].key
				n.key = n.inodes[0].key
			}
		}
		right.parent = parent
		parent.put(right.key, right.key, inode{child: t.nodeRef(right)})
		parent.children = append(parent.children, right)
		n = parent
	}
}

// nodeRef returns the reference a parent's element holds for n: the run it
// was read from, or, for a node with no page yet, a fresh temporary id
// registered in t.nodes.
func (t *Tree) nodeRef(n *node) page.Ref {
	if n.orig.ID != 0 {
		return n.orig
	}
	if t.nodes == nil {
		t.nodes = t.env.Pool.nodesMap()
	}
	t.tempSeq++
	id := tempIDBase + t.tempSeq
	n.tempID = id
	t.nodes[id] = n
	return page.Ref{ID: id}
}

// forget removes n from t.nodes (it was merged away or emptied).
func (t *Tree) forget(n *node) {
	if n.tempID != 0 {
		delete(t.nodes, n.tempID)
	}
	delete(t.nodes, n.orig.ID)
}

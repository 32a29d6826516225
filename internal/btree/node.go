package btree

import (
	"bytes"
	"math/bits"

	"github.com/rivetkv/rivet/internal/page"
)

// flagPendingBlob marks, in memory only, a leaf value longer than the inline
// limit that has not been written as a blob yet. Spill replaces it with
// page.FlagBlob and the encoded reference. It never reaches the disk.
const flagPendingBlob uint32 = 1 << 31

// inode is one element of a materialised node.
type inode struct {
	flags uint32
	key   []byte
	value []byte   // leaf: plain value, bucket record, blob ref, or pending blob bytes
	child page.Ref // branch: the child
}

// node is a materialised (writable) node. Its keys and values may alias the
// memory map; that is safe because the map stays valid for the transaction
// and committed pages are never rewritten (docs/design.md §6, invariant 1).
type node struct {
	tree       *Tree
	leaf       bool
	orig       page.Ref // the run it was read from; zero for a new node
	origPages  uint64
	parent     *node
	children   []*node // materialised children, spilled before the node
	key        []byte  // the key the parent knows this node by
	inodes     []inode
	unbalanced bool
	spilled    bool
	fresh      bool // a root created by splitting the old root
	removed    bool // merged away or emptied: no longer in the tree
	// appended is set when an element was inserted after every other one,
	// midInsert when one was inserted before the last: a node that only
	// grew at its end is split into full pages (Tree.split).
	appended, midInsert bool
	// tempID is the id t.nodes knows a node by that an eager split gave a
	// parent element before it had a page (tempIDBase and up); 0 otherwise.
	tempID page.ID
	// loaded is the element array load took from the pool, which the tree
	// gives back when it drops its nodes after spilling (Tree.reset).
	loaded []inode
}

// NodePool keeps the element arrays of materialised nodes from one write
// transaction to the next: a one-key commit materialises a leaf and its
// branches, and allocating their arrays (a branch of 300 children: 24 KiB)
// was most of its garbage. Only the writer uses it; it needs no lock.
type NodePool struct {
	// free[c] holds arrays whose capacity is in [2^c, 2^(c+1)).
	free  [32][][]inode
	elems int // capacity of the arrays kept
	// maps holds emptied node maps (Tree.nodes) of small transactions,
	// and nodes the emptied nodes of trees that spilled.
	maps  []map[page.ID]*node
	nodes []*node
}

// nodePoolNodes bounds the nodes a NodePool keeps: the paths of a few
// small commits.
const nodePoolNodes = 64

// node returns a zero node.
func (p *NodePool) node() *node {
	if p != nil {
		if n, ok := popLast(&p.nodes); ok {
			return n
		}
	}
	return new(node)
}

// popLast removes the last element of *s and returns it, clearing its
// slot so that the slice's array no longer refers to it.
func popLast[T any](s *[]T) (v T, ok bool) {
	k := len(*s)
	if k == 0 {
		return v, false
	}
	v = (*s)[k-1]
	var zero T
	(*s)[k-1] = zero
	*s = (*s)[:k-1]
	return v, true
}

// putNode takes back a node nothing refers to any more. A node taken
// back already (its tree is nil) is not taken twice: a tree may know one
// node by two ids.
func (p *NodePool) putNode(n *node) {
	if p == nil || n.tree == nil || len(p.nodes) >= nodePoolNodes {
		return
	}
	*n = node{}
	p.nodes = append(p.nodes, n)
}

// nodePoolMaps bounds the maps a NodePool keeps, and nodePoolMapNodes
// the nodes a map may have held to be kept (a cleared map keeps its
// room).
const (
	nodePoolMaps     = 8
	nodePoolMapNodes = 256
)

// nodesMap returns an empty map for a tree's nodes.
func (p *NodePool) nodesMap() map[page.ID]*node {
	if p != nil {
		if m, ok := popLast(&p.maps); ok {
			return m
		}
	}
	return make(map[page.ID]*node)
}

// putNodesMap takes back a map no tree uses any more.
func (p *NodePool) putNodesMap(m map[page.ID]*node) {
	if p == nil || m == nil || len(m) > nodePoolMapNodes || len(p.maps) >= nodePoolMaps {
		return
	}
	clear(m)
	p.maps = append(p.maps, m)
}

// nodePoolElems bounds the elements of the arrays kept (about 5 MiB): the
// nodes of a commit of a few hundred random updates (update-locality's
// 200 leaves and 190 branches), nothing a bulk load could inflate.
const nodePoolElems = 1 << 16

// get returns an array of n elements with room for a few more (a put into
// a loaded node then does not grow it), reused when one is large enough.
func (p *NodePool) get(n int) []inode {
	want := n + 2
	if p != nil {
		// Arrays of class c have capacity >= 2^c: from the class above
		// want's, every one fits; in want's own class, the top may.
		for c := bits.Len(uint(want)) - 1; c < len(p.free); c++ {
			list := p.free[c]
			if k := len(list); k > 0 && cap(list[k-1]) >= want {
				s := list[k-1]
				list[k-1] = nil
				p.free[c] = list[:k-1]
				p.elems -= cap(s)
				return s[:n]
			}
		}
	}
	return make([]inode, n, want+n/8)
}

// put takes back an array no node uses any more, cleared so that it holds
// no reference to the map or to values.
func (p *NodePool) put(s []inode) {
	if p == nil || cap(s) == 0 || p.elems+cap(s) > nodePoolElems {
		return
	}
	s = s[:cap(s)]
	clear(s)
	c := bits.Len(uint(cap(s))) - 1
	p.free[c] = append(p.free[c], s[:0])
	p.elems += cap(s)
}

func (n *node) minKeys() int {
	if n.leaf {
		return 1
	}
	return 2
}

func (n *node) size() int {
	es := page.LeafElemSize
	if !n.leaf {
		es = page.BranchElemSize
	}
	sz := page.HeaderSize + len(n.inodes)*es
	for i := range n.inodes {
		sz += len(n.inodes[i].key) + n.valueSize(i)
	}
	return sz
}

func (n *node) valueSize(i int) int {
	if !n.leaf {
		return 0
	}
	if n.inodes[i].flags&flagPendingBlob != 0 {
		return page.RecordSize
	}
	return len(n.inodes[i].value)
}

// sizeLessThan reports whether size() < v, stopping early.
func (n *node) sizeLessThan(v int) bool {
	es := page.LeafElemSize
	if !n.leaf {
		es = page.BranchElemSize
	}
	sz := page.HeaderSize + len(n.inodes)*es
	for i := range n.inodes {
		sz += len(n.inodes[i].key) + n.valueSize(i)
		if sz >= v {
			return false
		}
	}
	return true
}

// search returns the index of the first element whose key is >= key, and
// whether it is equal.
func (n *node) search(key []byte) (int, bool) {
	lo, hi := 0, len(n.inodes)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bytes.Compare(n.inodes[mid].key, key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(n.inodes) && bytes.Equal(n.inodes[lo].key, key)
}

// childAt materialises the child at index i of a branch.
func (n *node) childAt(i int) (*node, error) {
	return n.tree.materialize(n.inodes[i].child, n, n.inodes[i].key)
}

func (n *node) childIndex(c *node) int {
	i, _ := n.search(c.key)
	return i
}

// put inserts or replaces the element with key oldKey.
func (n *node) put(oldKey, newKey []byte, in inode) {
	i, exact := n.search(oldKey)
	in.key = newKey
	if !exact {
		if i == len(n.inodes) {
			n.appended = true
		} else {
			n.midInsert = true
		}
		n.inodes = append(n.inodes, inode{})
		copy(n.inodes[i+1:], n.inodes[i:])
	}
	n.inodes[i] = in
}

// del removes the element with key, if present, and reports whether it did.
func (n *node) del(key []byte) bool {
	i, exact := n.search(key)
	if !exact {
		return false
	}
	n.inodes = append(n.inodes[:i], n.inodes[i+1:]...)
	n.unbalanced = true
	return true
}

func (n *node) removeChild(c *node) {
	for i, x := range n.children {
		if x == c {
			n.children = append(n.children[:i], n.children[i+1:]...)
			return
		}
	}
}

// load fills a node from its validated page.
func (n *node) load(p page.Node) error {
	n.leaf = p.IsLeaf()
	n.inodes = n.tree.env.Pool.get(p.Count())
	n.loaded = n.inodes
	for i := range n.inodes {
		in := &n.inodes[i]
		if n.leaf {
			flags, k, v, err := p.LeafElem(i)
			if err != nil {
				return err
			}
			in.flags, in.key, in.value = flags, k, v
		} else {
			k, err := p.BranchKey(i)
			if err != nil {
				return err
			}
			in.key = k
			in.child = p.BranchChild(i)
		}
	}
	if len(n.inodes) > 0 {
		n.key = n.inodes[0].key
	}
	return nil
}

// free releases the node's original run, once.
func (n *node) free() error {
	if n.orig.ID == 0 {
		return nil
	}
	id, pages, born := n.orig.ID, n.origPages, n.orig.Txid
	n.orig = page.Ref{}
	return n.tree.env.Alloc.Free(id, pages, born)
}

// siblingSize returns the encoded size of the sibling rebalance would merge
// c with (the right one for the first child, else the left one), or -1
// when it cannot tell: only materialised siblings and leaves read from the
// map are measured.
func (n *node) siblingSize(c *node) int {
	idx := n.childIndex(c)
	if len(n.inodes) < 2 {
		return -1
	}
	j := idx - 1
	if idx == 0 {
		j = 1
	}
	ref := n.inodes[j].child
	if m, ok := n.tree.nodes[ref.ID]; ok {
		return m.size()
	}
	p, err := n.tree.env.readNode(ref)
	if err != nil || !p.IsLeaf() {
		return -1
	}
	size := page.HeaderSize + p.Count()*page.LeafElemSize
	for i := 0; i < p.Count(); i++ {
		_, k, v, err := p.LeafElem(i)
		if err != nil {
			return -1
		}
		size += len(k) + len(v)
	}
	return size
}

package btree

import (
	"bytes"
	"sort"

	"github.com/rivetkv/rivet/internal/page"
)

// elemRef is one level of a cursor's path: a node read from the map or a
// materialised node, and the index of the element the path goes through.
type elemRef struct {
	page  page.Node
	node  *node
	index int
}

func (r *elemRef) isLeaf() bool {
	if r.node != nil {
		return r.node.leaf
	}
	return r.page.IsLeaf()
}

func (r *elemRef) count() int {
	if r.node != nil {
		return len(r.node.inodes)
	}
	return r.page.Count()
}

// inlineDepth is how many levels a cursor holds without a separate
// allocation: a tree of 4 KiB pages with 16-byte keys is 3 levels deep at
// 100k keys and 5 at about 100M. Deeper trees grow the stack on the heap.
const inlineDepth = 5

// Cursor walks a tree in key order. It survives changes to the tree made
// while it is positioned: the next move re-seeks to the key it was on.
//
// Corrupt files: every node is validated when pushed, descent depth is
// capped at MaxDepth, and each move to another leaf checks that the leaves'
// edge keys keep moving in the walk's direction (see crossed), so that a
// walk over branch pages that point to one subtree many times ends instead
// of visiting exponentially many paths.
type Cursor struct {
	t     *Tree
	stack []elemRef
	mods  uint64 // t.mods when the stack was built
	key   []byte // the key the cursor is on, for re-seeking (only if track)
	// edge is the key the walk's last move to another leaf landed on (see
	// edgeDir).
	edge []byte
	// track is set for a writable tree: only a write transaction changes
	// t.mods, so only its cursors need the key they are on to re-seek.
	// A read cursor skips the store (and its write barrier) on every move.
	track bool
	// edgeDir is the direction (1 forward, -1 back) of the walk's last
	// move to another leaf, 0 if there was none since the walk started
	// (search, First, Last). edge is the key that move landed on: the new
	// leaf's first key going forward, its last going back.
	edgeDir int8
	// deleted is set when the element the cursor was on is gone — deleted
	// through it, or found missing by Current — and the cursor sits
	// before its successor, whose position is the top's index (past the
	// leaf's end if the successor is in a later leaf). Next returns that
	// element without re-seeking from the root, Prev the one before it,
	// Current nothing. Any move that rebuilds the stack clears it.
	// Invariant: while deleted, key is the gone key, so if a later change
	// to the tree makes mods stale, the re-seek to key gives the same
	// answers.
	deleted bool
	// Read-ahead (readahead.go): raDir is the direction of the windows
	// asked for in the current leaf parent, 0 if none since the walk
	// started; raNext the parent's index where the next window starts,
	// raMark the index whose leaf asks for it; raShift doubles the window;
	// raAhead says what is asked for of the next parent; raCold is set
	// once a window was not in memory.
	raDir          int8
	raShift        uint8
	raAhead        uint8
	raCold         bool
	raNext, raMark int32
}

// CursorStack is the storage of one cursor's path from the root: enough
// for a tree inlineDepth levels deep (deeper trees grow it on the heap).
type CursorStack [inlineDepth]elemRef

// Cursor returns a new cursor on the tree.
func (t *Tree) Cursor() *Cursor {
	c := &Cursor{}
	t.InitCursor(c)
	return c
}

// InitCursor makes c a fresh cursor on the tree, so callers can embed a
// Cursor in their own structs instead of allocating one.
func (t *Tree) InitCursor(c *Cursor) {
	t.env.Stats.CursorCount++
	c.t = t
	c.stack = t.env.cursorStack()
	c.mods = 0
	c.key = nil
	c.deleted = false
	c.track = t.env.Writable()
}

// scratchCursor returns the tree's internal cursor for Put and Delete (and
// Get on a changed tree), saving an allocation per call. Those methods do
// not call each other while they hold it, and a tree belongs to one
// transaction, which is not used by several goroutines at once.
func (t *Tree) scratchCursor() *Cursor {
	if t.scratch == nil {
		// The cursor and its stack in one allocation.
		s := &struct {
			c     Cursor
			stack CursorStack
		}{c: Cursor{t: t, track: t.env.Writable()}}
		s.c.stack = s.stack[:0]
		t.scratch = &s.c
	}
	c := t.scratch
	c.stack = c.stack[:0]
	c.key = nil
	c.deleted = false
	return c
}

func (c *Cursor) fail(err error) {
	c.t.env.fail(err)
	c.stack = c.stack[:0]
	c.key = nil
	c.deleted = false
}

func (c *Cursor) pushRoot() bool {
	c.key = nil
	c.deleted = false
	c.edge, c.edgeDir = nil, 0
	c.raDir, c.raShift, c.raCold = 0, 0, false
	c.stack = c.stack[:0]
	c.mods = c.t.mods
	if c.t.rootNode != nil {
		c.stack = append(c.stack, elemRef{node: c.t.rootNode})
		return true
	}
	p, ok := c.t.rootPage()
	if !ok {
		c.stack = c.stack[:0]
		c.key = nil
		return false
	}
	c.stack = append(c.stack, elemRef{page: p})
	return true
}

// pushChild descends into child i of the top branch.
func (c *Cursor) pushChild(i int) bool {
	if len(c.stack) >= MaxDepth {
		c.fail(page.Corruptf(c.t.root.ID, "tree deeper than %d levels (cycle?)", MaxDepth))
		return false
	}
	top := &c.stack[len(c.stack)-1]
	var ref page.Ref
	if top.node != nil {
		ref = top.node.inodes[i].child
	} else {
		ref = top.page.BranchChild(i)
		if ref.Txid > top.page.Txid() {
			c.fail(childTxidErr(top.page, ref))
			return false
		}
	}
	// Only a changed tree has materialised nodes (t.nodes is nil until
	// the first materialize): a read walk skips the map lookup.
	if c.t.nodes != nil {
		if n, ok := c.t.nodes[ref.ID]; ok {
			c.stack = append(c.stack, elemRef{node: n, index: 0})
			return true
		}
	}
	p, err := c.t.env.readNode(ref)
	if err != nil {
		c.fail(err)
		return false
	}
	c.stack = append(c.stack, elemRef{page: p})
	return true
}

// childTxidErr reports a child newer than its parent: pages are written
// bottom-up in one transaction, so a parent is never older than a child.
//
//go:noinline
func childTxidErr(parent page.Node, ref page.Ref) error {
	return page.Corruptf(parent.ID(), "child %d written by txn %d, after its parent's txn %d", ref.ID, ref.Txid, parent.Txid())
}

//go:noinline
func (t *Tree) depthErr() error {
	return page.Corruptf(t.root.ID, "tree deeper than %d levels (cycle?)", MaxDepth)
}

// descend follows the top's current element down to a leaf, choosing the
// first (last=false) or last element at each new level.
func (c *Cursor) descend(last bool) bool {
	for {
		top := &c.stack[len(c.stack)-1]
		if top.isLeaf() {
			return true
		}
		if top.count() == 0 {
			c.fail(page.Corruptf(c.t.root.ID, "empty branch node"))
			return false
		}
		if !c.pushChild(top.index) {
			return false
		}
		if last {
			nt := &c.stack[len(c.stack)-1]
			nt.index = nt.count() - 1
		}
	}
}

// current returns the element under the cursor.
func (c *Cursor) current() (key, value []byte, flags uint32, ok bool) {
	if len(c.stack) == 0 {
		return nil, nil, 0, false
	}
	top := &c.stack[len(c.stack)-1]
	if top.node == nil {
		if uint(top.index) >= uint(top.page.Count()) {
			return nil, nil, 0, false
		}
		f, k, v, err := top.page.LeafElem(top.index)
		if err != nil {
			c.fail(err)
			return nil, nil, 0, false
		}
		if c.track {
			c.key = k
		}
		return k, v, f, true
	}
	if uint(top.index) >= uint(len(top.node.inodes)) {
		return nil, nil, 0, false
	}
	in := &top.node.inodes[top.index]
	if c.track {
		c.key = in.key
	}
	return in.key, in.value, in.flags, true
}

// First moves to the first element.
func (c *Cursor) First() (key, value []byte, flags uint32, ok bool) {
	if !c.pushRoot() || !c.descend(false) {
		return nil, nil, 0, false
	}
	if c.stack[len(c.stack)-1].count() == 0 {
		return c.next()
	}
	return c.current()
}

// Last moves to the last element.
func (c *Cursor) Last() (key, value []byte, flags uint32, ok bool) {
	if !c.pushRoot() {
		return nil, nil, 0, false
	}
	c.stack[0].index = c.stack[0].count() - 1
	if !c.descend(true) {
		return nil, nil, 0, false
	}
	if c.stack[len(c.stack)-1].count() == 0 {
		return c.prev()
	}
	return c.current()
}

// Next moves to the next element.
func (c *Cursor) Next() (key, value []byte, flags uint32, ok bool) {
	if len(c.stack) == 0 {
		return nil, nil, 0, false
	}
	if c.mods == c.t.mods {
		if c.deleted {
			// The successor of the deleted element is at the index.
			c.deleted = false
			if top := &c.stack[len(c.stack)-1]; top.index < top.count() {
				return c.current()
			}
			return c.nextLeaf()
		}
		// The common step, within a leaf read from the map, without
		// the calls through next and current.
		top := &c.stack[len(c.stack)-1]
		if i := top.index + 1; top.node == nil && i >= 0 && i < top.page.Count() {
			f, k, v, err := top.page.LeafElem(i)
			if err != nil {
				c.fail(err)
				return nil, nil, 0, false
			}
			top.index = i
			if c.track {
				c.key = k
			}
			return k, v, f, true
		}
	} else if c.key != nil {
		was := c.key
		k, v, f, ok := c.Seek(was)
		if !ok || !bytes.Equal(k, was) {
			// The key we were on is gone: its successor is next.
			return k, v, f, ok
		}
	}
	return c.next()
}

// Prev moves to the previous element.
func (c *Cursor) Prev() (key, value []byte, flags uint32, ok bool) {
	if len(c.stack) == 0 {
		return nil, nil, 0, false
	}
	if c.mods == c.t.mods {
		if c.deleted {
			c.deleted = false
			return c.prev()
		}
		// The common step, as in Next.
		top := &c.stack[len(c.stack)-1]
		if i := top.index - 1; top.node == nil && i >= 0 && i < top.page.Count() {
			f, k, v, err := top.page.LeafElem(i)
			if err != nil {
				c.fail(err)
				return nil, nil, 0, false
			}
			top.index = i
			if c.track {
				c.key = k
			}
			return k, v, f, true
		}
	} else if c.key != nil {
		c.search(c.key)
		if len(c.stack) == 0 {
			return nil, nil, 0, false
		}
	}
	return c.prev()
}

// next moves one element forward. Within a leaf that is an index
// increment; moving to another leaf is nextLeaf's.
func (c *Cursor) next() (key, value []byte, flags uint32, ok bool) {
	top := &c.stack[len(c.stack)-1]
	if i := top.index + 1; i >= 0 && i < top.count() {
		top.index = i
		return c.current()
	}
	return c.nextLeaf()
}

func (c *Cursor) nextLeaf() (key, value []byte, flags uint32, ok bool) {
	newParent := false
	for {
		i := len(c.stack) - 1
		for ; i >= 0; i-- {
			e := &c.stack[i]
			if e.index < e.count()-1 {
				e.index++
				break
			}
		}
		if i < 0 {
			// Nothing after: the cursor stays where it was, as bbolt's
			// does (etcd-io/bbolt#733). From the last element that is the
			// last element, so a following Prev returns the one before
			// it; after a Seek past every key it is one beyond the last
			// element, so Prev returns the last.
			return nil, nil, 0, false
		}
		newParent = newParent || i < len(c.stack)-2
		c.stack = c.stack[:i+1]
		if !c.descend(false) {
			return nil, nil, 0, false
		}
		if c.stack[len(c.stack)-1].count() == 0 {
			continue
		}
		c.readahead(1, newParent)
		return c.crossed(1)
	}
}

// crossed returns the element under the cursor after a move to another
// leaf in direction dir (1 forward, -1 back). The cursor is on the new
// leaf's edge key: its first going forward, its last going back. If the
// previous move to another leaf went the same way, that edge key must have
// moved past the previous one. Edge keys of one directional walk are then
// strictly monotonic, so the walk enters no leaf twice (apart from the leaf
// the walk started on, which the first move does not check): on a corrupt
// file whose branches point to one subtree many times (no cycle, so the
// depth cap does not fire) a walk could otherwise visit exponentially many
// paths. Within a leaf a move is an index step, checked only by the
// element's bounds: a leaf's elements are finite. Keeping the last edge
// key, rather than reading the old leaf's, costs one compare per leaf and
// no extra memory reads.
func (c *Cursor) crossed(dir int8) (key, value []byte, flags uint32, ok bool) {
	k, v, f, ok := c.current()
	if !ok {
		return nil, nil, 0, false
	}
	if c.edgeDir == dir && bytes.Compare(k, c.edge)*int(dir) <= 0 {
		c.fail(page.Corruptf(c.t.root.ID, "key %q does not move past %q (keys out of order or a page reachable twice)", trim(k), trim(c.edge)))
		return nil, nil, 0, false
	}
	c.edge, c.edgeDir = k, dir
	return k, v, f, ok
}

// prev moves one element back (see next).
func (c *Cursor) prev() (key, value []byte, flags uint32, ok bool) {
	top := &c.stack[len(c.stack)-1]
	if n := top.count(); top.index > n {
		// A materialised leaf shrank under the cursor: step back from its end.
		top.index = n
	}
	if i := top.index - 1; i >= 0 && i < top.count() {
		top.index = i
		return c.current()
	}
	return c.prevLeaf()
}

func (c *Cursor) prevLeaf() (key, value []byte, flags uint32, ok bool) {
	newParent := false
	for {
		i := len(c.stack) - 1
		for ; i >= 0; i-- {
			e := &c.stack[i]
			if e.index > e.count() {
				e.index = e.count()
			}
			if e.index > 0 {
				e.index--
				break
			}
		}
		if i < 0 {
			// Nothing before: stay on the first element, so a following
			// Next returns the second (bbolt's semantics, as above).
			return nil, nil, 0, false
		}
		newParent = newParent || i < len(c.stack)-2
		c.stack = c.stack[:i+1]
		if !c.descend(true) {
			return nil, nil, 0, false
		}
		if c.stack[len(c.stack)-1].count() == 0 {
			continue
		}
		c.readahead(-1, newParent)
		return c.crossed(-1)
	}
}

// search positions the path at the leaf where key is or would be inserted.
// It starts a fresh walk: the key-order check of next and prev does not
// reach back across it.
func (c *Cursor) search(key []byte) {
	if c.t.rootNode == nil {
		// Nothing materialised: the whole tree is in the map.
		c.key = nil
		c.deleted = false
		c.edge, c.edgeDir = nil, 0
		c.raDir, c.raShift, c.raCold = 0, 0, false
		c.stack = c.stack[:0]
		c.mods = c.t.mods
		c.t.searchPages(key, c)
		return
	}
	if !c.pushRoot() {
		return
	}
	for {
		top := &c.stack[len(c.stack)-1]
		n := top.count()
		if top.isLeaf() {
			top.index = c.searchLeaf(top, key, n)
			return
		}
		if n == 0 {
			c.fail(page.Corruptf(c.t.root.ID, "empty branch node"))
			return
		}
		// The last element whose key is <= key.
		var idx int
		if top.node != nil {
			idx = sort.Search(n, func(i int) bool { return bytes.Compare(top.node.inodes[i].key, key) > 0 })
			if idx > 0 {
				idx--
			}
		} else {
			var err error
			if idx, err = top.page.BranchSearch(key); err != nil {
				c.fail(err)
				return
			}
		}
		top.index = idx
		if !c.pushChild(idx) {
			return
		}
	}
}

func (c *Cursor) searchLeaf(top *elemRef, key []byte, n int) int {
	if top.node != nil {
		i, _ := top.node.search(key)
		return i
	}
	i, _, err := top.page.LeafSearch(key)
	if err != nil {
		c.t.env.fail(err)
		return n
	}
	return i
}

// searchPages descends from the committed root to the leaf where key is or
// would be, for a tree with nothing materialised (every read transaction).
// It returns the leaf, the index of the first element >= key and whether
// that element's key equals key; ok is false for an empty tree or on
// corruption (recorded in Env.Err). If c is not nil, the path is pushed
// onto c's stack, which must be empty. Without a cursor (Get) the descent
// keeps only the current node.
func (t *Tree) searchPages(key []byte, c *Cursor) (leaf page.Node, index int, exact bool, ok bool) {
	var p page.Node
	var err error
	switch {
	case !t.root.IsZero():
		p, err = t.env.readNode(t.root)
	case t.inline.Count() > 0:
		p = t.inline // a leaf (page.InlineLeaf)
	default:
		return page.Node{}, 0, false, false
	}
	for depth := 1; err == nil; depth++ {
		if p.IsLeaf() {
			if index, exact, err = p.LeafSearch(key); err != nil {
				break
			}
			if c != nil {
				c.stack = append(c.stack, elemRef{page: p, index: index})
			}
			return p, index, exact, true
		}
		var i int
		if i, err = p.BranchSearch(key); err != nil {
			break
		}
		if c != nil {
			c.stack = append(c.stack, elemRef{page: p, index: i})
		}
		if depth >= MaxDepth {
			err = t.depthErr()
			break
		}
		ref := p.BranchChild(i)
		if ref.Txid > p.Txid() {
			err = childTxidErr(p, ref)
			break
		}
		p, err = t.env.readNode(ref)
	}
	t.env.fail(err)
	if c != nil {
		c.stack = c.stack[:0]
	}
	return page.Node{}, 0, false, false
}

// Seek moves to the first element whose key is >= key.
func (c *Cursor) Seek(key []byte) (k, value []byte, flags uint32, ok bool) {
	c.search(key)
	if len(c.stack) == 0 {
		return nil, nil, 0, false
	}
	top := &c.stack[len(c.stack)-1]
	if top.index >= top.count() {
		return c.next()
	}
	return c.current()
}

// node materialises the path to the cursor's leaf and returns the leaf.
func (c *Cursor) node() (*node, error) {
	if len(c.stack) == 0 {
		return c.t.rootForWrite()
	}
	if top := c.stack[len(c.stack)-1]; top.node != nil && top.node.leaf {
		return top.node, nil
	}
	n, err := c.t.rootForWrite()
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(c.stack)-1; i++ {
		if n.leaf {
			err := page.Corruptf(c.t.root.ID, "leaf above the bottom of the tree")
			c.t.env.fail(err)
			return nil, err
		}
		if n, err = n.childAt(c.stack[i].index); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Delete removes the element under the cursor. A following Next returns the
// element after it.
func (c *Cursor) Delete() error {
	_, err := c.DeleteUnless(0)
	return err
}

// DeleteUnless is Delete, except that an element with any of the flags in
// refuse is left in place and reported (refused true): the caller's check
// of the element's kind and the delete share one look at the element.
func (c *Cursor) DeleteUnless(refuse uint32) (refused bool, err error) {
	_, v, flags, ok := c.Current()
	if !ok {
		return false, nil
	}
	if flags&refuse != 0 {
		return true, nil
	}
	return false, c.deleteCurrent(v, flags)
}

func (c *Cursor) deleteCurrent(value []byte, flags uint32) error {
	key := c.key
	n, err := c.node()
	if err != nil {
		return err
	}
	i, exact := n.search(key)
	if !exact {
		return nil
	}
	if flags&page.FlagBlob != 0 && flags&flagPendingBlob == 0 {
		c.t.deferFreeBlob(value)
	}
	n.inodes = append(n.inodes[:i], n.inodes[i+1:]...)
	n.unbalanced = true
	c.t.mods++
	// The stack still describes the tree: removing an element from a
	// leaf changes no branch (rebalancing waits for Spill), and the path
	// above the leaf is the one node() just materialised — the stack may
	// hold those branches as the pages they were read from, whose
	// children pushChild maps to the materialised nodes. So the cursor
	// stays where it is, before the successor (see deleted), and a
	// delete-while-iterating loop costs no seek from the root per key.
	top := &c.stack[len(c.stack)-1]
	top.node, top.index = n, i
	c.mods = c.t.mods
	c.deleted = true
	return nil
}

// Current returns the element under the cursor without moving.
func (c *Cursor) Current() (key, value []byte, flags uint32, ok bool) {
	if c.mods != c.t.mods && c.key != nil {
		was := c.key
		k, v, f, ok := c.Seek(was)
		if !ok || !bytes.Equal(k, was) {
			// The key is gone and the cursor is now before its
			// successor: as after a Delete, Next returns the successor
			// (not the one after it) and Prev the element before.
			c.key, c.deleted = was, len(c.stack) > 0
			return nil, nil, 0, false
		}
		return k, v, f, ok
	}
	if c.deleted {
		return nil, nil, 0, false
	}
	return c.current()
}

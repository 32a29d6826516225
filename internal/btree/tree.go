package btree

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rivetkv/rivet/internal/page"
)

// DefaultFillPercent is how full spill packs split nodes (bbolt's default).
const DefaultFillPercent = 0.5

// Tree is one bucket's B+tree inside a transaction.
type Tree struct {
	env  *Env
	root page.Ref // the committed root (zero: empty, or inline)
	// inline is the content of an inline bucket (docs/design.md §2.4): a
	// leaf held in the parent's leaf, with no page of its own. Zero Node
	// (Count 0) when the tree has pages or is empty.
	//
	// Invariant: at most one of root and inline is set.
	inline page.Node
	// rootNode is the materialised root, once anything changed. Nodes are
	// materialised root first (children through their parent), so while
	// it is nil nothing is materialised and reads descend the map directly
	// (searchPages).
	rootNode *node
	nodes    map[page.ID]*node
	// tempSeq numbers the temporary ids of eagerly split nodes (nodeRef).
	tempSeq uint64
	// mods counts structural changes, so cursors know to re-seek.
	mods uint64
	// deferred frees of committed runs that this transaction unlinked:
	// overwritten and deleted blobs. They run at Spill, not when unlinked,
	// so that a tree discarded later (its bucket deleted) does not free
	// them a second time through FreeOwn.
	deferred []func() error
	scratch  *Cursor

	// FillPercent is the fill threshold used when splitting nodes.
	FillPercent float64
	// Repack makes Rebalance pack every touched leaf from its right
	// siblings, and Spill keep or cut leaves as compaction packs them
	// (pack.go); compaction's steps set it.
	Repack bool
}

// Open returns the tree rooted at root.
func Open(env *Env, root page.Ref) *Tree {
	t := &Tree{}
	t.Init(env, root)
	return t
}

// Init makes t the tree rooted at root, so callers can embed a Tree in their
// own structs instead of allocating one.
func (t *Tree) Init(env *Env, root page.Ref) {
	*t = Tree{env: env, root: root, FillPercent: DefaultFillPercent}
}

// InitInline makes t the tree whose whole content is the inline bucket
// record's leaf (as page.InlineLeaf returned it).
func (t *Tree) InitInline(env *Env, leaf page.Node) {
	*t = Tree{env: env, inline: leaf, FillPercent: DefaultFillPercent}
}

// Inline returns the tree's inline bucket record (page.InlineLeaf): the
// committed one, or after SpillInline the new one (with sequence 0); nil if
// the tree is not inline.
func (t *Tree) Inline() []byte {
	if t.inline.Count() == 0 {
		return nil
	}
	return t.inline.Bytes()
}

// rootPage returns the committed root node: the inline leaf, or the page
// root names; ok is false for an empty tree or on corruption (recorded).
func (t *Tree) rootPage() (p page.Node, ok bool) {
	if t.inline.Count() > 0 {
		return t.inline, true
	}
	if t.root.IsZero() {
		return page.Node{}, false
	}
	p, err := t.env.readNode(t.root)
	if err != nil {
		t.env.fail(err)
		return page.Node{}, false
	}
	return p, true
}

// Env returns the transaction environment.
func (t *Tree) Env() *Env { return t.env }

// Root returns the tree's root reference: the committed one, or after Spill
// the new one.
func (t *Tree) Root() page.Ref { return t.root }

// Dirty reports whether the tree was changed in this transaction.
func (t *Tree) Dirty() bool { return t.rootNode != nil || len(t.deferred) > 0 }

// deferFreeBlob frees the committed blob referenced by raw at Spill.
func (t *Tree) deferFreeBlob(raw []byte) {
	t.deferred = append(t.deferred, func() error { return t.freeBlob(raw) })
}

// materialize returns the writable node for ref, reading it if needed.
func (t *Tree) materialize(ref page.Ref, parent *node, key []byte) (*node, error) {
	if n, ok := t.nodes[ref.ID]; ok {
		return n, nil
	}
	p, err := t.env.readNode(ref)
	if err != nil {
		t.env.fail(err)
		return nil, err
	}
	n := t.env.Pool.node()
	n.tree, n.parent, n.orig, n.origPages = t, parent, ref, p.Header().Pages()
	if err := n.load(p); err != nil {
		t.env.fail(err)
		return nil, err
	}
	if parent != nil {
		// The parent knows the node by the parent's key, which after deletes
		// in this txn may differ from the node's current first key.
		n.key = key
	}
	if t.nodes == nil {
		t.nodes = t.env.Pool.nodesMap()
	}
	t.nodes[ref.ID] = n
	if parent == nil {
		t.rootNode = n
	} else {
		parent.children = append(parent.children, n)
	}
	t.env.Stats.NodeCount++
	return n, nil
}

// rootForWrite returns the materialised root, creating an empty leaf for an
// empty tree.
func (t *Tree) rootForWrite() (*node, error) {
	if t.rootNode != nil {
		return t.rootNode, nil
	}
	if t.inline.Count() > 0 {
		// The inline leaf becomes the root node; it has no page to free.
		n := &node{tree: t}
		if err := n.load(t.inline); err != nil {
			t.env.fail(err)
			return nil, err
		}
		t.rootNode = n
		t.env.Stats.NodeCount++
		return n, nil
	}
	if t.root.IsZero() {
		t.rootNode = &node{tree: t, leaf: true}
		return t.rootNode, nil
	}
	return t.materialize(t.root, nil, nil)
}

// Get returns the flags and raw value stored under key.
func (t *Tree) Get(key []byte) (value []byte, flags uint32, found bool) {
	if t.rootNode == nil {
		// Nothing materialised (every read transaction): descend the map
		// without a cursor stack.
		leaf, i, exact, ok := t.searchPages(key, nil)
		if !ok || !exact {
			return nil, 0, false
		}
		f, _, v, err := leaf.LeafElem(i)
		if err != nil {
			t.env.fail(err)
			return nil, 0, false
		}
		return v, f, true
	}
	c := t.scratchCursor()
	c.search(key)
	k, v, f, ok := c.current()
	if !ok || !bytes.Equal(k, key) {
		return nil, 0, false
	}
	return v, f, true
}

// ErrGuarded is returned by Put and Delete when the existing element's flags
// intersect the guard mask; nothing is changed.
var ErrGuarded = errors.New("btree: existing element is guarded")

// Put stores value under key with flags (0, page.FlagBucket). Values longer
// than the inline limit become blobs at spill. The key is copied; the value
// must stay valid for the transaction (bbolt's contract). If an element with
// the key exists and its flags intersect guard, Put returns ErrGuarded and
// changes nothing (one search instead of a Get and a Put).
func (t *Tree) Put(key, value []byte, flags, guard uint32) error {
	if !t.env.Writable() {
		return errors.New("btree: put in a read transaction")
	}
	// search, not Seek: Seek moves past the end of a leaf to the next one,
	// but a key that sorts after a leaf's last key belongs in that leaf.
	c := t.scratchCursor()
	c.search(key)
	if t.env.Err != nil {
		return t.env.Err
	}
	n, err := c.node()
	if err != nil {
		return err
	}
	i, exact := n.search(key)
	if exact && n.inodes[i].flags&guard != 0 {
		return ErrGuarded
	}
	if exact && n.inodes[i].flags&page.FlagBlob != 0 && n.inodes[i].flags&flagPendingBlob == 0 {
		t.deferFreeBlob(n.inodes[i].value)
	}
	if flags == 0 && len(value) > t.env.MaxInlineValue() {
		flags = flagPendingBlob
	}
	// The tree keeps its own copy of the key: the caller may reuse its slice.
	var nk []byte
	if exact {
		nk = n.inodes[i].key
	} else {
		nk = bytes.Clone(key)
	}
	n.put(key, nk, inode{flags: flags, value: value})
	if len(n.inodes) > eagerSplitElems {
		t.splitEager(n)
	}
	t.mods++
	return nil
}

// Delete removes key; it reports whether the key existed. If the element's
// flags intersect guard, it returns ErrGuarded and changes nothing.
func (t *Tree) Delete(key []byte, guard uint32) (bool, error) {
	if !t.env.Writable() {
		return false, errors.New("btree: delete in a read transaction")
	}
	c := t.scratchCursor()
	c.search(key)
	k, v, flags, ok := c.current()
	if t.env.Err != nil {
		return false, t.env.Err
	}
	if !ok || !bytes.Equal(k, key) {
		return false, nil
	}
	if flags&guard != 0 {
		return true, ErrGuarded
	}
	return true, c.deleteCurrent(v, flags)
}

// Rebalance merges underfilled nodes. Call once after all changes, before Spill.
func (t *Tree) Rebalance() error {
	if t.rootNode == nil {
		return nil
	}
	start := time.Now()
	defer func() { t.env.Stats.RebalanceTime += int64(time.Since(start)) }()
	// rebalance leaves a node that is not unbalanced as it is, and
	// changes nothing else then: with none unbalanced, nothing changes.
	need := t.rootNode.unbalanced && !t.rootNode.removed
	for _, n := range t.nodes {
		if need {
			break
		}
		need = n.unbalanced && !n.removed
	}
	if !need {
		return t.env.Err
	}
	// Collect first: rebalancing removes entries from t.nodes.
	var ns []*node
	for _, n := range t.nodes {
		ns = append(ns, n)
	}
	if t.rootNode.orig.ID == 0 {
		ns = append(ns, t.rootNode)
	}
	// Deepest first, then in key order: map order made the shape a tree
	// was left in after mass deletes differ from run to run (one level
	// more or less, so a later one-key commit wrote 4 or 5 pages), and a
	// seed could not replay a run exactly. Leaves first also lets their
	// merges empty a branch before the branch itself is looked at.
	depth := func(n *node) int {
		d := 0
		for p := n.parent; p != nil; p = p.parent {
			d++
		}
		return d
	}
	type keyed struct {
		n     *node
		depth int
		key   []byte
	}
	order := make([]keyed, len(ns))
	for i, n := range ns {
		order[i] = keyed{n: n, depth: depth(n), key: n.key}
		if len(n.inodes) > 0 {
			order[i].key = n.inodes[0].key
		}
	}
	slices.SortFunc(order, func(a, b keyed) int {
		if a.depth != b.depth {
			return b.depth - a.depth
		}
		return bytes.Compare(a.key, b.key)
	})
	for i := range order {
		ns[i] = order[i].n
	}
	for _, n := range ns {
		if err := t.rebalance(n); err != nil {
			return err
		}
	}
	return t.env.Err
}

func (t *Tree) rebalance(n *node) error {
	if !n.unbalanced || n.removed {
		return nil
	}
	n.unbalanced = false
	t.env.Stats.Rebalance++
	threshold := t.env.PageSize / 4
	if t.Repack && n.leaf && n.parent != nil {
		// A compaction step rewriting this leaf anyway: pack it from its
		// right siblings, so moved and repacked leaves are written full
		// rather than copied half empty (docs/design.md §4.1); the last
		// child merges into its left sibling if that saves a page.
		if last, err := t.pack(n); err != nil || !last {
			return err
		}
		if sib := n.parent.siblingSize(n); sib < 0 || !mergeSaves(sib, n.size(), t.env.PageSize) {
			return nil
		}
	} else if !n.sizeLessThan(threshold+1) && len(n.inodes) > n.minKeys() {
		return nil
	}
	if n.parent == nil {
		// A branch root with one child collapses into that child.
		if !n.leaf && len(n.inodes) == 1 {
			child, err := n.childAt(0)
			if err != nil {
				return err
			}
			n.leaf = child.leaf
			n.inodes = child.inodes
			n.children = child.children
			for _, in := range n.inodes {
				if gc, ok := t.nodes[in.child.ID]; ok && !n.leaf {
					gc.parent = n
				}
			}
			for _, gc := range n.children {
				gc.parent = n
			}
			child.parent = nil
			child.removed = true
			t.forget(child)
			if err := child.free(); err != nil {
				return err
			}
		}
		return nil
	}
	parent := n.parent
	if len(n.inodes) == 0 {
		parent.del(n.key)
		parent.removeChild(n)
		n.removed = true
		t.forget(n)
		if err := n.free(); err != nil {
			return err
		}
		return t.rebalance(parent)
	}
	if len(parent.inodes) < 2 {
		return t.rebalance(parent)
	}
	// Merge with a sibling: the right one, or the left one for the last child.
	idx := parent.childIndex(n)
	var target, source *node
	var err error
	if idx == 0 {
		target = n
		source, err = parent.childAt(1)
	} else {
		source = n
		target, err = parent.childAt(idx - 1)
	}
	if err != nil {
		return err
	}
	if source.leaf != target.leaf {
		err := page.Corruptf(source.orig.ID, "siblings at one level are leaf and branch")
		t.env.fail(err)
		return err
	}
	for _, in := range source.inodes {
		if gc, ok := t.nodes[in.child.ID]; ok && !source.leaf {
			gc.parent.removeChild(gc)
			gc.parent = target
			target.children = append(target.children, gc)
		}
	}
	target.inodes = append(target.inodes, source.inodes...)
	parent.del(source.key)
	parent.removeChild(source)
	source.removed = true
	t.forget(source)
	if err := source.free(); err != nil {
		return err
	}
	target.unbalanced = true
	if err := t.rebalance(target); err != nil {
		return err
	}
	return t.rebalance(parent)
}

// Spill writes every changed node into new runs (appended to Env.Runs) and
// updates the tree's root reference.
func (t *Tree) Spill() error {
	for _, free := range t.deferred {
		if err := free(); err != nil {
			return err
		}
	}
	t.deferred = nil
	if t.rootNode == nil {
		return nil
	}
	start := time.Now()
	defer func() { t.env.Stats.SpillTime += int64(time.Since(start)) }()
	// The tree is written to pages (or emptied): it is no longer inline.
	t.inline = page.Node{}
	root := t.rootNode
	if len(root.inodes) == 0 {
		// An empty tree has no pages.
		if err := root.free(); err != nil {
			return err
		}
		t.root = page.Ref{}
		t.reset()
		return nil
	}
	if err := t.spill(root); err != nil {
		return err
	}
	t.reset()
	return t.env.Err
}

// SpillInline is Spill for a nested bucket's tree: if, after the changes,
// the tree is one leaf of plain values (no nested bucket, no blob) whose
// inline image is at most maxSize bytes, the tree becomes inline — Inline
// returns the image, Root is zero — and the pages it had are freed. Any
// other tree is spilled to pages as by Spill.
func (t *Tree) SpillInline(maxSize int) error {
	n := t.rootNode
	if n == nil || !n.leaf || len(n.inodes) == 0 || n.parent != nil || len(t.nodes) > 1 || !n.sizeLessThan(maxSize+1) {
		return t.Spill()
	}
	for i := range n.inodes {
		if n.inodes[i].flags != 0 {
			return t.Spill()
		}
	}
	for _, free := range t.deferred {
		if err := free(); err != nil {
			return err
		}
	}
	t.deferred = nil
	img := page.EncodeInlineRecord(len(n.inodes), func(i int) (uint32, []byte, []byte) {
		in := &n.inodes[i]
		return in.flags, in.key, in.value
	})
	leaf, err := page.InlineLeaf(0, img)
	if err != nil {
		t.env.fail(err)
		return err
	}
	if err := n.free(); err != nil {
		return err
	}
	t.root = page.Ref{}
	t.inline = leaf
	t.reset()
	return t.env.Err
}

// reset drops the materialised nodes after a spill.
func (t *Tree) reset() {
	// The nodes are written (or emptied) and dropped: their arrays go
	// back to the pool. Invariant: nothing refers to a node of t after a
	// spill — its transaction is committing, and split parts, the only
	// other users of a loaded array, are among the nodes dropped here.
	if pool := t.env.Pool; pool != nil {
		for _, n := range t.nodes {
			if n.loaded != nil {
				pool.put(n.loaded)
				n.loaded, n.inodes = nil, nil
			}
			pool.putNode(n)
		}
		if n := t.rootNode; n != nil {
			if n.loaded != nil {
				pool.put(n.loaded)
				n.loaded, n.inodes = nil, nil
			}
			pool.putNode(n)
		}
		pool.putNodesMap(t.nodes)
	}
	t.rootNode = nil
	t.nodes = nil
	t.tempSeq = 0
	t.mods++
}

// spill writes the materialised nodes under root level by level, deepest
// first and in key order within a level, so that every node is written
// after its children (and records their final references) and all of a
// commit's leaves are allocated before any branch: with the allocator's
// lowest-run-first policy they then land together, and the branches —
// rewritten by nearly every commit of random updates — in a group the next
// commit frees whole. Spilled depth-first, the two alternated (docs/design.md
// §4.2).
func (t *Tree) spill(root *node) error {
	buf := spillLevelsPool.Get().(*[][]*node)
	levels := collectLevels((*buf)[:0], root, 0)
	defer func() {
		for i := range levels {
			clear(levels[i])
			levels[i] = levels[i][:0]
		}
		*buf = levels[:0]
		spillLevelsPool.Put(buf)
	}()
	for d := len(levels) - 1; d >= 0; d-- {
		level := levels[d]
		if len(level) > 1 {
			slices.SortFunc(level, compareFirstKeys)
		}
		for _, n := range level {
			if err := t.spillNode(n); err != nil {
				return err
			}
		}
	}
	// A root that split got a fresh branch parent, whose own split may
	// give it another: write them now, after their children.
	for r := t.rootNode; r != nil && r.fresh && !r.spilled; r = t.rootNode {
		if err := t.spillNode(r); err != nil {
			return err
		}
	}
	return nil
}

// spillLevelsPool holds spill's per-depth lists between commits, so that
// a small commit allocates none.
var spillLevelsPool = sync.Pool{New: func() any { return new([][]*node) }}

// collectLevels appends n and every unspilled node below it to levels,
// by depth, and returns levels. The per-depth lists keep their capacity
// from earlier use.
func collectLevels(levels [][]*node, n *node, depth int) [][]*node {
	if n.spilled {
		return levels
	}
	for len(levels) <= depth {
		if len(levels) < cap(levels) {
			levels = levels[:len(levels)+1]
		} else {
			levels = append(levels, nil)
		}
	}
	levels[depth] = append(levels[depth], n)
	for _, c := range n.children {
		levels = collectLevels(levels, c, depth+1)
	}
	return levels
}

// compareFirstKeys orders nodes by their first key (an empty node first).
func compareFirstKeys(a, b *node) int {
	if len(a.inodes) == 0 || len(b.inodes) == 0 {
		return len(a.inodes) - len(b.inodes)
	}
	return bytes.Compare(a.inodes[0].key, b.inodes[0].key)
}

// spillNode writes n, whose children are written: its blobs, then n split
// into parts of at most a page (or one run), each recorded in n's parent.
func (t *Tree) spillNode(n *node) error {
	if n.spilled {
		return nil
	}
	n.children = nil
	if n.leaf {
		if err := t.writeBlobs(n); err != nil {
			return err
		}
	}
	var one [1]*node
	parts := t.split(n, one[:0])
	if err := n.free(); err != nil {
		return err
	}
	for _, p := range parts {
		ref, err := t.write(p)
		if err != nil {
			return err
		}
		p.spilled = true
		if p.parent != nil {
			key := p.key
			if key == nil {
				key = p.inodes[0].key
			}
			p.parent.put(key, p.inodes[0].key, inode{child: ref})
			p.key = p.inodes[0].key
		} else {
			t.root = ref
		}
	}
	t.env.Stats.Spill++
	return nil
}

// minKeysPerPart is the fewest elements split leaves in a part, as bbolt
// does: with one, a leaf of values just under half the threshold held one
// value per page (100,000 values of 1,000 bytes in key order made a file of
// 400 MiB, bbolt's 202 MiB).
const minKeysPerPart = 2

// split appends to parts the parts into which it cuts n when n does not
// fit one page (a leaf of a compaction step as splitPacked chooses, any
// other node as splitRegular does), or n alone, and returns parts. Parts
// after the first share n's parent; a root that splits gets a new branch
// parent.
func (t *Tree) split(n *node, parts []*node) []*node {
	var cuts [][]inode
	if t.Repack && n.leaf {
		cuts = t.splitPacked(n)
	} else {
		cuts = t.splitRegular(n)
	}
	if len(cuts) <= 1 {
		return append(parts, n)
	}
	t.env.Stats.Split++
	// The first part keeps n's identity (its key in the parent).
	n.inodes = cuts[0]
	parts = append(parts, n)
	if n.parent == nil {
		root := &node{tree: t, leaf: false, fresh: true}
		n.parent = root
		root.children = []*node{n}
		t.rootNode = root
	}
	for _, c := range cuts[1:] {
		parts = append(parts, &node{tree: t, leaf: n.leaf, inodes: c, parent: n.parent})
	}
	return parts
}

// splitRegular returns the parts of about FillPercent of a page each into
// which a commit cuts n, or nil when n fits one page.
func (t *Tree) splitRegular(n *node) [][]inode {
	ps := t.env.PageSize
	if len(n.inodes) < 2*minKeysPerPart || n.sizeLessThan(ps+1) {
		return nil
	}
	fill := t.FillPercent
	if fill < 0.1 {
		fill = 0.1
	} else if fill > 1 {
		fill = 1
	}
	// minLast is the fewest elements the last part takes.
	minLast := minKeysPerPart
	if n.appended && !n.midInsert {
		// Every insert landed after the node's last element: keys arrive
		// in order here (a sequence, a log, a time series, a bulk load in
		// key order), so nothing will be inserted into the parts but the
		// last, and room left in them would stay empty — bbolt's 50% makes
		// such files twice their data. Pack them full, and let the last
		// part, where the next appends go, start with one element: a leaf
		// that holds three values and takes a fourth by one commit would
		// otherwise be cut two and two, and every leaf of a log appended
		// one entry per commit would stay two-thirds full.
		fill = 1
		minLast = 1
	}
	if n.leaf && n.origPages > 1 && !n.appended && !n.midInsert {
		// A leaf of several pages that this commit updated or deleted
		// from, nothing inserted: one compaction packed (splitPacked), or
		// one of values near a page. Cut at FillPercent, a packed leaf of
		// mid-size values would come back as half-empty pages, more pages
		// than before compaction; full pages are what compaction made of
		// such values before it built leaves of several pages.
		fill = 1
	}
	threshold := int(float64(ps) * fill)
	es := page.LeafElemSize
	if !n.leaf {
		es = page.BranchElemSize
	}
	var parts [][]inode
	all := n.inodes
	start := 0
	size := page.HeaderSize
	// rest is the encoded size of a node holding all[start:]. A part is
	// cut off only while that does not fit one page: once the remainder
	// fits, it stays whole. Cutting at the threshold regardless left a
	// node of 1.05 pages as three (half, half and a sliver), which made
	// random inserts write and keep 1.76x bbolt's pages (bench bulk-load,
	// 1M random keys in 1,000-key txns: 369 MiB against 209 MiB).
	//
	// With full parts of a node not appended to, a part that takes the
	// next-to-last element when
	// the last one does not fit after it cannot be cut again (a part of
	// one element is not cut off) and overflows into a second page: such
	// a part ends before the last two elements instead, which then make
	// the last part.
	rest := n.size()
	for i := range all {
		el := es + len(all[i].key) + n.valueSize(i)
		remaining := len(all) - i
		full := size+el > threshold
		if fill == 1 && minLast == minKeysPerPart && remaining == minKeysPerPart {
			full = size+el+es+len(all[i+1].key)+n.valueSize(i+1) > threshold
		}
		if rest > ps && i-start >= minKeysPerPart && remaining >= minLast && full {
			parts = append(parts, all[start:i:i])
			start = i
			rest -= size - page.HeaderSize
			size = page.HeaderSize
		}
		size += el
	}
	return append(parts, all[start:])
}

// write allocates a run for n, encodes it and queues it.
func (t *Tree) write(n *node) (page.Ref, error) {
	ps := t.env.PageSize
	size := n.size()
	pages := page.RunPages(size, ps)
	id, err := t.env.allocateNode(pages, n.leaf)
	if err != nil {
		return page.Ref{}, err
	}
	buf := t.env.Spares.Get(pages, ps)
	if buf == nil {
		buf = make([]byte, pages*uint64(ps))
	}
	if n.leaf {
		page.EncodeLeafFunc(buf, ps, id, t.env.Txid, len(n.inodes), func(i int) (uint32, []byte, []byte) {
			in := &n.inodes[i]
			return in.flags, in.key, in.value
		})
	} else {
		page.EncodeBranchFunc(buf, ps, id, t.env.Txid, len(n.inodes), func(i int) ([]byte, page.Ref) {
			return n.inodes[i].key, n.inodes[i].child
		})
	}
	t.env.Runs = append(t.env.Runs, page.Run{ID: id, Data: buf})
	if err := t.env.writeEarly(len(buf)); err != nil {
		return page.Ref{}, err
	}
	t.env.Stats.PageCount += int64(pages)
	t.env.Stats.PageAlloc += int64(len(buf))
	t.env.Stats.Write++
	return page.Ref{ID: id, Txid: t.env.Txid, Checksum: page.Checksum(buf)}, nil
}

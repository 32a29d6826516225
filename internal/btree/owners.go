package btree

import (
	"slices"

	"github.com/rivetkv/rivet/internal/page"
)

// RunOwner is one run an Owners descent meets: a node or blob extent that
// a parent points to, and where it sits in the trees.
type RunOwner struct {
	// ID is the run's first page; Parent is the page holding the
	// reference to it (0 for the root bucket's root, which the meta names).
	ID, Parent page.ID
	// Pages is the run's length: the blob reference's for an extent, the
	// header's for a node when the header names the page itself and stays
	// inside the HWM, else 1.
	Pages uint64
	// Type and Txid are what the run's header says (zero when the page
	// could not be read).
	Type page.Type
	Txid uint64
	// Bucket is the path of the bucket whose tree holds the run: empty for
	// the root bucket's tree (the top-level bucket records). It is valid
	// only during the call.
	Bucket [][]byte
	// Depth is the run's level in its bucket's tree, 0 at the root; a blob
	// extent has the depth of the leaf whose value it stores.
	Depth int
	// Key is, for a blob extent, the key whose value the blob is (valid
	// only during the call); nil for nodes.
	Key []byte
	// Accepted reports that the walk accepted the run (the accepted
	// function said so); the descent continues below accepted runs only.
	// A run not accepted was reached from an accepted parent: it is the
	// damaged page, or one the walk did not get to.
	Accepted bool
	// Summed reports, for a run not accepted, that its pages could be read
	// and their CRC-32C computed; ChecksumOK then says whether it equals
	// the parent's record. Accepted runs are not summed again (the walk
	// that accepted them verified them).
	Summed, ChecksumOK bool
}

// Owners descends the trees under root a second time, after a Walk that
// recorded the runs it accepted (accepted reports whether a run starting
// at a page was one of them), and calls fn once for every run reached:
// each accepted run with the bucket path and depth it sits at, and each
// run an accepted parent points to that the walk did not accept (it failed
// validation, or its parent failed a check that stopped the walk there),
// so a tool can say whose page is damaged. A reference outside [2, HWM) is
// reported too, with Pages 0, so the caller can blame its Parent.
//
// It descends only through accepted runs and reports each run once (the
// first reference to it, in the walk's order), so it ends on any input and
// reads each page at most once more; the pages were validated by the walk,
// and decoding still goes through the page package's checks. Memory is one
// bit per page below the HWM. It uses the Walker's Fetch, PageSize and
// HWM.
func (w *Walker) Owners(root page.Ref, accepted func(page.ID) bool, fn func(RunOwner)) {
	if root.IsZero() {
		return
	}
	o := &owners{w: w, accepted: accepted, fn: fn, done: make([]uint64, (w.HWM+63)/64)}
	o.node(root, 0, nil, 0, 0)
}

type owners struct {
	w        *Walker
	accepted func(page.ID) bool
	fn       func(RunOwner)
	done     []uint64 // bit p: a run starting at p was reported
}

// first reports whether id is inside the HWM and not reported yet, and
// marks it; a reference outside the HWM is reported here, to its parent.
func (o *owners) first(id, parent page.ID, path [][]byte, depth int, key []byte) bool {
	if id < page.MinPages || id >= o.w.HWM {
		o.fn(RunOwner{ID: id, Parent: parent, Bucket: path, Depth: depth, Key: key})
		return false
	}
	if o.done[id/64]&(1<<(id%64)) != 0 {
		return false
	}
	o.done[id/64] |= 1 << (id % 64)
	return true
}

// node reports the node run ref points to and descends into it.
func (o *owners) node(ref page.Ref, parent page.ID, path [][]byte, depth, nest int) {
	if !o.first(ref.ID, parent, path, depth, nil) {
		return
	}
	if !o.accepted(ref.ID) || depth >= MaxDepth || nest > MaxNesting {
		o.rejected(ref, 0, parent, path, depth, nil)
		return
	}
	run, h, err := o.w.fetchRun(ref.ID, page.TypeLeaf, false)
	if err != nil {
		o.rejected(ref, 0, parent, path, depth, nil)
		return
	}
	n, err := page.NodeFromBuffer(run, o.w.PageSize, ref.ID, ref.Txid, o.w.HWM)
	if err != nil {
		o.rejected(ref, 0, parent, path, depth, nil)
		return
	}
	o.fn(RunOwner{ID: ref.ID, Parent: parent, Pages: h.Pages(), Type: h.Type, Txid: h.Txid, Bucket: path, Depth: depth, Accepted: true})
	for i := 0; i < n.Count(); i++ {
		if !n.IsLeaf() {
			// The walk stops at a branch key it cannot read; so does
			// this descent, so both reach the same children.
			if _, err := n.BranchKey(i); err != nil {
				return
			}
			o.node(n.BranchChild(i), ref.ID, path, depth+1, nest)
			continue
		}
		flags, key, v, err := n.LeafElem(i)
		if err != nil {
			return
		}
		switch flags {
		case page.FlagBucket:
			rec, err := page.DecodeBucketRecord(ref.ID, v)
			if err != nil || rec.Inline != nil || rec.Root.IsZero() {
				continue
			}
			// A fresh slice per bucket: the caller may look at
			// paths of sibling buckets after this one returns.
			sub := append(slices.Clip(path), key)
			o.node(rec.Root, ref.ID, sub, 0, nest+1)
		case page.FlagBlob:
			b, err := page.DecodeBlobRef(ref.ID, v)
			if err != nil {
				continue
			}
			o.blob(b, ref.ID, path, depth, key)
		}
	}
}

// blob reports the extents of the blob b, stored under key in leaf
// parent, until the chain ends or reaches an extent not accepted.
func (o *owners) blob(b page.BlobRef, parent page.ID, path [][]byte, depth int, key []byte) {
	cur := b.First
	// Invariant: each extent is reported at most once (first), so the
	// chain is followed at most once per page even if it loops.
	for cur.ID != 0 {
		if !o.first(cur.ID, parent, path, depth, key) {
			return
		}
		if !o.accepted(cur.ID) || uint64(cur.Pages) > o.w.HWM-cur.ID {
			o.rejected(cur.Ref, uint64(cur.Pages), parent, path, depth, key)
			return
		}
		run, err := o.w.Fetch(cur.ID, uint64(cur.Pages))
		if err != nil {
			o.rejected(cur.Ref, uint64(cur.Pages), parent, path, depth, key)
			return
		}
		ext, err := page.ReadBlobExtent(run, cur.ID, o.w.PageSize, cur, o.w.HWM)
		if err != nil {
			o.rejected(cur.Ref, uint64(cur.Pages), parent, path, depth, key)
			return
		}
		h, _ := page.ReadHeader(cur.ID, run)
		o.fn(RunOwner{ID: cur.ID, Parent: parent, Pages: uint64(cur.Pages), Type: page.TypeBlob, Txid: h.Txid, Bucket: path, Depth: depth, Key: key, Accepted: true})
		parent, cur = cur.ID, ext.Next
	}
}

// rejected reports a run inside the HWM that the walk did not accept:
// what its header says, and whether its bytes still match the parent's
// checksum. pages is the reference's length (blob extents), 0 if the
// reference does not say (nodes).
func (o *owners) rejected(ref page.Ref, pages uint64, parent page.ID, path [][]byte, depth int, key []byte) {
	r := RunOwner{ID: ref.ID, Parent: parent, Pages: 1, Bucket: path, Depth: depth, Key: key}
	limit := o.w.HWM - ref.ID // >= 1: first checked the id
	if head, err := o.w.Fetch(ref.ID, 1); err == nil {
		if h, err := page.ReadHeader(ref.ID, head); err == nil {
			r.Type, r.Txid = h.Type, h.Txid
			if pages == 0 && h.ID == ref.ID && h.Pages() <= limit {
				pages = h.Pages()
			}
		}
	}
	if pages == 0 || pages > limit {
		pages = 1
	}
	r.Pages = pages
	if run, err := o.w.Fetch(ref.ID, pages); err == nil {
		r.Summed, r.ChecksumOK = true, page.Checksum(run) == ref.Checksum
	}
	o.fn(r)
}

package btree

import (
	"bytes"

	"github.com/rivetkv/rivet/internal/page"
)

// Walker visits the runs of committed trees, validating as it goes. Check
// uses it over the whole file; recovery uses it to verify only what the last
// sync point wrote (docs/design.md §3.4).
//
// Invariant: a walk reads each page below the HWM at most twice (once as the
// first page of a run, for its header, and once inside the whole run), so
// its work is bounded by the file's size whatever the shape of its trees. A
// reference to a page the walk has already reached, as the start of a run
// or inside one, is reported as a page reachable twice and not read again:
// in a valid file every page is reachable at most once, so on a damaged
// file whose pages are shared (a DAG: many references to one subtree,
// whose unfolding is exponential in its depth) or form cycles, the walk
// still ends after reading each page once or twice.
type Walker struct {
	// Fetch returns the bytes of pages pages starting at id.
	Fetch    func(id page.ID, pages uint64) ([]byte, error)
	PageSize int
	HWM      uint64
	// All visits every run; otherwise only children whose recorded txid is
	// greater than MinTxid are visited (their parents are, too).
	All     bool
	MinTxid uint64
	// VerifyChecksums compares each run's CRC-32C with its parent's record.
	VerifyChecksums bool
	// Visit, if set, is called once for every run reached; an error it
	// returns is reported like any other problem.
	Visit func(id page.ID, pages uint64, t page.Type) error
	// Report receives each problem found; returning false stops the walk.
	// If nil, the walk stops at the first problem.
	Report func(err error) bool
	// Readahead, if set, is asked for the children of every branch the
	// walk enters, before it visits them (readahead.go).
	Readahead Readahead
	// Workers, if above 1, lets the walk split the children of the first
	// branch it enters between itself and a second walker running in
	// another goroutine (split). Fetch, Visit and Report must then be safe
	// to call from two goroutines at once.
	Workers int

	stopped bool
	first   error
	// cold is set once a branch's children were not in memory (hintBranch).
	cold bool
	// reached holds every page the walk has read or is about to read.
	reached pageSet
}

// Walk visits the tree rooted at root (the root bucket's tree, say) and every
// nested bucket tree and blob below it. It returns the first problem found.
func (w *Walker) Walk(root page.Ref) error {
	if !root.IsZero() && w.want(root.Txid) {
		w.node(root, 0, 0, nil, nil)
	}
	return w.first
}

func (w *Walker) want(txid uint64) bool { return w.All || txid > w.MinTxid }

func (w *Walker) report(err error) {
	if w.first == nil {
		w.first = err
	}
	if w.Report == nil || !w.Report(err) {
		w.stopped = true
	}
}

// reach marks the pages [id, id+n) as read by the walk, or returns an error
// naming the first of them it had reached before. Pages at or above the HWM
// are not tracked: the read that follows refuses them.
func (w *Walker) reach(id page.ID, n uint64) error {
	if w.reached.empty() {
		w.reached = newPageSet(w.HWM, w.All)
	}
	if p, ok := w.reached.addRun(id, n); !ok {
		return page.Corruptf(p, "page reachable twice (run at %d)", id)
	}
	return nil
}

// fetchRun reads the run starting at id, of the length its header says.
// With once, its pages are reached first (see reach), so a run is never
// read twice by one walk; Owners, which reads only runs a walk accepted,
// passes false.
func (w *Walker) fetchRun(id page.ID, t page.Type, once bool) ([]byte, page.Header, error) {
	if id < 2 || id >= w.HWM {
		return nil, page.Header{}, page.Corruptf(id, "%v page id outside [2, %d)", t, w.HWM)
	}
	if once {
		if err := w.reach(id, 1); err != nil {
			return nil, page.Header{}, err
		}
	}
	first, err := w.Fetch(id, 1)
	if err != nil {
		return nil, page.Header{}, err
	}
	h, err := page.ReadHeader(id, first)
	if err != nil {
		return nil, h, err
	}
	if h.Pages() > w.HWM-id {
		return nil, h, page.Corruptf(id, "run of %d pages passes the high-water mark %d", h.Pages(), w.HWM)
	}
	if h.Pages() == 1 {
		return first, h, nil
	}
	if once {
		if err := w.reach(id+1, h.Pages()-1); err != nil {
			return nil, h, err
		}
	}
	run, err := w.Fetch(id, h.Pages())
	return run, h, err
}

// node visits the run ref points to: depth counts levels inside one bucket's
// tree, nest counts bucket nesting; both are capped, so a walk over a file
// whose pages form cycles ends.
func (w *Walker) node(ref page.Ref, depth, nest int, lo, hi []byte) {
	if w.stopped {
		return
	}
	if depth >= MaxDepth {
		w.report(page.Corruptf(ref.ID, "tree deeper than %d levels (cycle?)", MaxDepth))
		return
	}
	if nest > MaxNesting {
		w.report(page.Corruptf(ref.ID, "buckets nested deeper than %d (cycle?)", MaxNesting))
		return
	}
	run, _, err := w.fetchRun(ref.ID, page.TypeLeaf, true)
	if err != nil {
		w.report(err)
		return
	}
	n, err := page.NodeFromBuffer(run, w.PageSize, ref.ID, ref.Txid, w.HWM)
	if err != nil {
		w.report(err)
		return
	}
	if w.VerifyChecksums {
		if got := page.Checksum(n.Bytes()); got != ref.Checksum {
			w.report(page.Corruptf(ref.ID, "checksum %08x, parent recorded %08x", got, ref.Checksum))
			return
		}
	}
	h := n.Header()
	if w.Visit != nil {
		if err := w.Visit(ref.ID, h.Pages(), h.Type); err != nil {
			w.report(err)
			return
		}
	}
	if w.Readahead != nil && !n.IsLeaf() {
		w.hintBranch(n)
	}
	if w.Workers > 1 && !n.IsLeaf() && n.Count() >= 2 {
		w.split(n, ref, h, depth, nest, lo, hi)
		return
	}
	w.elems(n, ref, h, depth, nest, lo, hi, 0, n.Count())
}

// split walks the children of branch n in two halves at once: the second
// half on a walker of its own in another goroutine. That walker does not
// split again, and neither does w once it has split. Each keeps its own
// set of reached pages, so a page both halves reach is read by both: the
// walk's work stays within twice its bound.
func (w *Walker) split(n page.Node, ref page.Ref, h page.Header, depth, nest int, lo, hi []byte) {
	w.Workers = 1
	other := &Walker{
		Fetch: w.Fetch, PageSize: w.PageSize, HWM: w.HWM, All: w.All, MinTxid: w.MinTxid,
		VerifyChecksums: w.VerifyChecksums, Visit: w.Visit, Report: w.Report,
	}
	mid := n.Count() / 2
	done := make(chan struct{})
	go func() {
		defer close(done)
		other.elems(n, ref, h, depth, nest, lo, hi, mid, n.Count())
	}()
	w.elems(n, ref, h, depth, nest, lo, hi, 0, mid)
	<-done
	if other.first != nil && w.first == nil {
		w.first = other.first
	}
	w.stopped = w.stopped || other.stopped
}

// elems checks the elements [from, to) of node n, read from ref, and walks
// on into what they reach.
func (w *Walker) elems(n page.Node, ref page.Ref, h page.Header, depth, nest int, lo, hi []byte, from, to int) {
	var prev []byte
	if from > 0 {
		var err error
		if n.IsLeaf() {
			prev, err = n.LeafKey(from - 1)
		} else {
			prev, err = n.BranchKey(from - 1)
		}
		if err != nil {
			w.report(err)
			return
		}
	}
	var err error
	for i := from; i < to && !w.stopped; i++ {
		var key []byte
		if n.IsLeaf() {
			key, err = n.LeafKey(i)
		} else {
			key, err = n.BranchKey(i)
		}
		if err != nil {
			w.report(err)
			return
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			w.report(page.Corruptf(ref.ID, "key %d (%q) not after key %d (%q)", i, trim(key), i-1, trim(prev)))
		}
		if lo != nil && bytes.Compare(key, lo) < 0 {
			w.report(page.Corruptf(ref.ID, "key %d (%q) below its parent's separator %q", i, trim(key), trim(lo)))
		}
		if hi != nil && bytes.Compare(key, hi) >= 0 {
			w.report(page.Corruptf(ref.ID, "key %d (%q) not below the next separator %q", i, trim(key), trim(hi)))
		}
		prev = key
		if !n.IsLeaf() {
			child := n.BranchChild(i)
			if child.Txid > h.Txid {
				w.report(page.Corruptf(ref.ID, "child %d written by txn %d, after its parent's txn %d", child.ID, child.Txid, h.Txid))
				continue
			}
			if !w.want(child.Txid) {
				continue
			}
			var next []byte
			if i+1 < n.Count() {
				if next, err = n.BranchKey(i + 1); err != nil {
					w.report(err)
					return
				}
			} else {
				next = hi
			}
			w.node(child, depth+1, nest, key, next)
			continue
		}
		flags, _, v, err := n.LeafElem(i)
		if err != nil {
			w.report(err)
			return
		}
		switch flags {
		case page.FlagBucket:
			rec, err := page.DecodeBucketRecord(ref.ID, v)
			if err != nil {
				w.report(err)
				continue
			}
			if rec.Inline != nil {
				w.inline(ref.ID, rec.Inline)
				continue
			}
			if rec.Root.Txid > h.Txid {
				w.report(page.Corruptf(ref.ID, "bucket root %d written by txn %d, after its parent's txn %d", rec.Root.ID, rec.Root.Txid, h.Txid))
				continue
			}
			if !rec.Root.IsZero() && w.want(rec.Root.Txid) {
				w.node(rec.Root, 0, nest+1, nil, nil)
			}
		case page.FlagBlob:
			b, err := page.DecodeBlobRef(ref.ID, v)
			if err != nil {
				w.report(err)
				continue
			}
			if b.First.Txid > h.Txid {
				w.report(page.Corruptf(ref.ID, "blob %d written by txn %d, after its leaf's txn %d", b.First.ID, b.First.Txid, h.Txid))
				continue
			}
			if w.want(b.First.Txid) {
				w.blob(b)
			}
		}
	}
}

// inline checks the inline bucket record rec found in a leaf of page id:
// DecodeBucketRecord validated its shape and that it holds plain values
// only (so it reaches no page, and the parent's checksum covers all of it);
// here its keys must ascend.
func (w *Walker) inline(id page.ID, rec []byte) {
	n, err := page.InlineLeaf(id, rec)
	if err != nil {
		w.report(err)
		return
	}
	var prev []byte
	for i := 0; i < n.Count() && !w.stopped; i++ {
		key, err := n.LeafKey(i)
		if err != nil {
			w.report(err)
			return
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			w.report(page.Corruptf(id, "inline bucket key %d (%q) not after key %d (%q)", i, trim(key), i-1, trim(prev)))
		}
		prev = key
	}
}

func (w *Walker) blob(b page.BlobRef) {
	if b.Length > MaxValueSize || b.Length > w.HWM*uint64(w.PageSize) {
		w.report(page.Corruptf(b.First.ID, "blob length %d is impossible", b.Length))
		return
	}
	cur := b.First
	var total uint64
	// Invariant: each extent adds at least one byte and a chain has at most
	// one extent per page of the file, so the loop ends even on a cycle.
	for extents := uint64(0); cur.ID != 0 && !w.stopped; extents++ {
		if extents >= w.HWM {
			w.report(page.Corruptf(b.First.ID, "blob chain longer than the file (cycle?)"))
			return
		}
		if uint64(cur.Pages) > w.HWM || cur.ID >= w.HWM {
			w.report(page.Corruptf(cur.ID, "blob extent of %d pages outside the file", cur.Pages))
			return
		}
		if err := w.reach(cur.ID, uint64(cur.Pages)); err != nil {
			w.report(err)
			return
		}
		run, err := w.Fetch(cur.ID, uint64(cur.Pages))
		if err != nil {
			w.report(err)
			return
		}
		ext, err := page.ReadBlobExtent(run, cur.ID, w.PageSize, cur, w.HWM)
		if err != nil {
			w.report(err)
			return
		}
		if w.VerifyChecksums {
			if got := page.Checksum(ext.Run); got != cur.Checksum {
				w.report(page.Corruptf(cur.ID, "blob checksum %08x, parent recorded %08x", got, cur.Checksum))
				return
			}
		}
		if w.Visit != nil {
			if err := w.Visit(cur.ID, uint64(cur.Pages), page.TypeBlob); err != nil {
				w.report(err)
				return
			}
		}
		total += uint64(len(ext.Payload))
		if len(ext.Payload) == 0 || total > b.Length {
			w.report(page.Corruptf(cur.ID, "blob chain does not add up to %d bytes", b.Length))
			return
		}
		cur = ext.Next
	}
	if total != b.Length && !w.stopped {
		w.report(page.Corruptf(b.First.ID, "blob chain holds %d bytes, reference says %d", total, b.Length))
	}
}

func trim(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

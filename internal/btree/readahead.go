package btree

import "github.com/rivetkv/rivet/internal/page"

// Readahead is told which pages a walk in key order will read next, so
// that they can be read in together and in the background (the DB's
// memory map: pager.View). The map is read with random-access advice,
// which suits point lookups: without hints a walk over a file not in
// memory faults its pages in one at a time.
type Readahead interface {
	// WillNeed asks for pages [id, id+n) to be read in. It is a hint: it
	// does not wait for the reads and cannot fail.
	WillNeed(id page.ID, n uint64)
	// Resident reports whether page id is in memory; false if unknown.
	Resident(id page.ID) bool
}

// A cursor that moves from leaf to leaf asks for the leaves ahead in
// windows: the runs of the next children its leaf's parent names, about
// readaheadFirst bytes for the first window of a walk, twice as much for
// each next one up to readaheadMax. It asks for the next window when it
// reaches the middle of the last one, so the reads overlap its work, and,
// once the windows reach the parent's end, for the parent's next sibling.
// A point lookup, and a walk that stays inside one leaf, ask for nothing.
// A walk asks once per window or branch, not per move. Until it meets a
// window not in memory it first asks whether the window's first and last
// children are: if they are, it asks for nothing, so a walk over pages
// already in memory costs two look-ups per window (a system call each) and
// no read-ahead, whose cost is a look at every page of the window and, for
// scattered leaves, a call per leaf. Once a window was not in memory the
// walk asks for every window without looking: a page in memory there may
// be one an earlier window asked for (a leaf moved into a hole it spanned)
// rather than a sign that the rest is.
const (
	readaheadFirst = 128 << 10
	readaheadMax   = 1 << 20
	// readaheadGap is the widest gap between two children's pages that a
	// hint spans rather than ending one run and starting another: reading
	// a few unneeded pages costs less than another request.
	readaheadGap = 64 << 10
)

// readaheadMaxShift is the doubling that takes readaheadFirst to
// readaheadMax.
const readaheadMaxShift = 3

// Read-ahead states of a cursor's next parent (Cursor.raAhead).
const (
	raAheadNone   = iota
	raAheadPage   // the next parent's page is asked for
	raAheadWindow // so is its first window: raNext and raMark are its
)

// readahead gives the hints of a cursor that moved to another leaf in
// direction dir (1 forward, -1 back); newParent reports that the move
// went through a branch above the leaf's parent. Only page-backed parents
// are looked at: a materialised one belongs to a write transaction's
// changes, whose leaves are in memory or scattered by the changes.
func (c *Cursor) readahead(dir int8, newParent bool) {
	ra := c.t.env.Readahead
	if ra == nil || len(c.stack) < 2 {
		return
	}
	parent := &c.stack[len(c.stack)-2]
	if parent.node != nil {
		return
	}
	k := int32(parent.index)
	switch {
	case c.raDir != dir || (newParent && c.raAhead != raAheadWindow):
		// A new walk, one that turned, or a parent whose first window was
		// not asked for: its windows start at the leaf the cursor is on
		// (whose first page is read; the rest of a multi-page leaf is
		// not).
		c.raDir, c.raNext, c.raMark, c.raAhead = dir, k, k, raAheadNone
	case newParent:
		// The parent that was asked for ahead: go on with its windows.
		c.raAhead = raAheadNone
	case c.raAhead == raAheadWindow:
		// Still in the old parent; raNext and raMark are the next one's.
		return
	}
	if (dir > 0 && k < c.raMark) || (dir < 0 && k > c.raMark) {
		return
	}
	if c.raAhead == raAheadPage {
		c.nextParentWindow(ra, dir)
		return
	}
	from, end := c.raNext, c.raNext
	n := int32(parent.page.Count())
	if inside := func(i int32) bool { return i >= 0 && i < n }; inside(from) {
		// A window after the first in this parent starts again at the
		// last child of the one before: that child's length was a guess,
		// and the range from its first page to the next child's covers
		// it exactly.
		var again page.ID
		if from != k {
			again = parent.page.BranchChild(int(from - int32(dir))).ID
		}
		end = c.window(ra, parent.page, from, dir, again)
		if inside(end) {
			c.raNext, c.raMark = end, from+(end-from)/2
			return
		}
	}
	// The parent's last children are asked for: the next window is in its
	// next sibling, which the walk enters next. Ask for that branch's page
	// now (unless the walk found its windows in memory so far) and,
	// halfway to the parent's end, read it and ask for its first window.
	c.raNext, c.raMark = end, end
	if ref, ok := c.nextParent(dir); ok {
		if c.raCold {
			ra.WillNeed(ref.ID, 1)
		}
		c.raAhead, c.raMark = raAheadPage, k+(end-k)/2
	}
}

// window asks for the window of parent p's children from index from on in
// direction dir (and for page again first, if not 0, see hintChildren),
// unless its first and last children are in memory, and doubles the next
// window, up to readaheadMax. It returns the index after the window.
// from must be a child of p: a window holds at least one.
func (c *Cursor) window(ra Readahead, p page.Node, from int32, dir int8, again page.ID) int32 {
	if from < 0 || int(from) >= p.Count() {
		return from
	}
	env := c.t.env
	window := max(uint64(readaheadFirst<<c.raShift)/uint64(env.PageSize), 1)
	if c.raShift < readaheadMaxShift {
		c.raShift++
	}
	end := hintChildren(nil, p, int(from), int(dir), again, window, env.PageSize, env.HWM)
	last := end - int(dir)
	if c.raCold || !resident(ra, p.BranchChild(int(from)).ID, env.HWM) || (last != int(from) && !resident(ra, p.BranchChild(last).ID, env.HWM)) {
		c.raCold = true
		hintChildren(ra, p, int(from), int(dir), again, window, env.PageSize, env.HWM)
	}
	return int32(end)
}

// nextParent returns the reference to the branch after the leaf's parent in
// direction dir, if the grandparent names one and it is read from the map.
func (c *Cursor) nextParent(dir int8) (page.Ref, bool) {
	if len(c.stack) < 3 {
		return page.Ref{}, false
	}
	gp := &c.stack[len(c.stack)-3]
	if gp.node != nil {
		return page.Ref{}, false
	}
	j := gp.index + int(dir)
	if j < 0 || j >= gp.page.Count() {
		// The next parent has another grandparent: the walk finds it
		// unannounced, once per grandparent.
		return page.Ref{}, false
	}
	ref := gp.page.BranchChild(j)
	if ref.ID < page.MinPages || ref.ID >= c.t.env.HWM || ref.Txid > gp.page.Txid() {
		return page.Ref{}, false
	}
	if c.t.nodes != nil {
		if _, ok := c.t.nodes[ref.ID]; ok {
			return page.Ref{}, false
		}
	}
	return ref, true
}

// nextParentWindow reads the branch after the leaf's parent, asked for a
// while ago, and asks for its first window: when the walk enters it, those
// leaves are on their way. A branch that does not read is left for the
// walk to find (and report).
func (c *Cursor) nextParentWindow(ra Readahead, dir int8) {
	c.raAhead = raAheadNone
	ref, ok := c.nextParent(dir)
	if !ok {
		return
	}
	p, err := c.t.env.readNode(ref)
	if err != nil || p.IsLeaf() {
		return
	}
	from := int32(0)
	if dir < 0 {
		from = int32(p.Count()) - 1
	}
	// The window starts again at the leaf parent's child nearest to the
	// next parent's (its last going forward, its first going back), whose
	// end was a guess: if the two lie side by side, the range covers it.
	parent := c.stack[len(c.stack)-2].page
	near := 0
	if dir > 0 {
		near = parent.Count() - 1
	}
	end := c.window(ra, p, from, dir, parent.BranchChild(near).ID)
	c.raAhead, c.raNext, c.raMark = raAheadWindow, end, from+(end-from)/2
}

// resident asks ra whether page id is in memory, if it is a page of the
// state (a damaged branch may name any number).
func resident(ra Readahead, id page.ID, hwm uint64) bool {
	return id >= page.MinPages && id < hwm && ra.Resident(id)
}

// hintChildren asks ra for the runs of branch p's children from index
// from on, in direction dir, until about window pages are asked for or the
// branch ends, and returns the index after the last child asked for (-1
// or p.Count() at the branch's end); if again is not 0, that page is added
// first (a node asked for before whose length was a guess). Children whose
// pages lie within readaheadGap of each other are asked for as one range
// (see hintRuns). With a nil ra it only finds the window's end.
func hintChildren(ra Readahead, p page.Node, from, dir int, again page.ID, window uint64, pageSize int, hwm uint64) int {
	h := hintRuns{ra: ra, gap: max(uint64(readaheadGap/pageSize), 1), hwm: hwm}
	if again != 0 {
		h.add(again)
	}
	i := from
	for ; i >= 0 && i < p.Count() && h.pages() < window; i += dir {
		h.add(p.BranchChild(i).ID)
	}
	h.flush()
	return i
}

// hintRuns gathers the first pages of nodes a walk will read, in the order
// it reads them, into ranges it passes to a Readahead: a page within gap
// pages of the open range (either side: a walk goes either way) extends
// it, any other page flushes it and starts the next. A branch names its
// children's first pages only, so the last child of a range is counted as
// long as the longest distance between two children read one after the
// other (a node and the gap after it), one page if there was none.
type hintRuns struct {
	ra  Readahead
	gap uint64
	hwm uint64
	// lo, hi: the open range [lo, hi), of count first pages, the last
	// one added at last.
	lo, hi, last uint64
	count        uint64
	// asked: pages asked for; span: the longest distance between two
	// children added one after the other into a range.
	asked, span uint64
}

// pages returns the pages asked for and in the open range.
func (h *hintRuns) pages() uint64 { return h.asked + h.hi - h.lo }

func (h *hintRuns) add(id page.ID) {
	if id < page.MinPages || id >= h.hwm {
		// Not a page of the state (a damaged branch): the walk reports
		// it when it gets there.
		return
	}
	switch {
	case h.count == 0:
		h.lo, h.hi = id, id+1
	case id >= h.hi && id-h.hi <= h.gap:
		h.hi = id + 1
		h.span = max(h.span, id-h.last)
	case id < h.lo && h.lo-id-1 <= h.gap:
		h.lo = id
		h.span = max(h.span, h.last-id)
	case id >= h.lo && id < h.hi:
		// Inside the range already (a child asked for again, or a
		// damaged branch naming a page twice).
	default:
		h.flush()
		h.lo, h.hi = id, id+1
	}
	h.last = id
	h.count++
}

// flush asks for the open range with its last child's estimated tail.
func (h *hintRuns) flush() {
	if h.count == 0 {
		return
	}
	tail := max(h.span, 1) - 1
	hi := min(h.hi+tail, h.hwm)
	if h.ra != nil {
		h.ra.WillNeed(h.lo, hi-h.lo)
	}
	h.asked += hi - h.lo
	h.lo, h.hi, h.count = 0, 0, 0
}

// hintBranch asks for the children of branch n that the walk will visit
// (want), all at once: a walker visits every child of a branch it enters.
// If the first and last of them are in memory it asks for nothing, until
// it met a branch whose children were not (as a cursor does).
func (w *Walker) hintBranch(n page.Node) {
	first, last := -1, -1
	for i := 0; i < n.Count(); i++ {
		if w.want(n.BranchChild(i).Txid) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	ra := w.Readahead
	if first < 0 || (!w.cold && resident(ra, n.BranchChild(first).ID, w.HWM) && (first == last || resident(ra, n.BranchChild(last).ID, w.HWM))) {
		return
	}
	w.cold = true
	h := hintRuns{ra: ra, gap: max(uint64(readaheadGap/w.PageSize), 1), hwm: w.HWM}
	for i := first; i <= last; i++ {
		if child := n.BranchChild(i); w.want(child.Txid) {
			h.add(child.ID)
		}
	}
	h.flush()
}

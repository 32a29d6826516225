package image

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// A copy of a file that another process holds for writing (CloneFile's
// "live" path, docs/design.md §3.5).
//
// The writer's lock keeps this process from opening the file as a DB, and
// nothing tells the writer that a copy is being taken: it goes on
// committing and, once a sync point has made a page's freeing durable,
// reuses the page. A copy read page by page over a while is therefore not
// a state the file ever held, nor a crash image (a crash leaves every
// flushed write; a slow copy may have read a page before a write that was
// flushed long before it read the meta). So the copy does not trust time,
// only checksums. It reads a meta and walks that state's tree from the
// root, reading each run with pread and accepting it only if it matches
// the txid and CRC-32C its parent recorded; a run that does not match was
// overwritten since the meta was read, and the walk notes it and goes on
// with the rest. Every accepted run is written to the new file at its own
// page. If anything was missed, the next pass starts from the newest meta
// and walks again, but a subtree whose root record (page, txid, checksum)
// it already copied whole is not entered again: the checksums chain down
// the tree (Merkle), so an unchanged record means an unchanged subtree.
// Each pass after the first thus reads only what the writer changed during
// the previous one, and passes shrink until one finds nothing missing.
//
// Then the new file holds every run of that state, each verified against
// its parent up to the meta, which is self-checksummed: the state is one
// the writer committed. A last walk over the new file verifies it again
// end to end (nothing in it relies on the reasoning above about what a
// skipped subtree holds) and gives the set of reachable pages, from which
// the region maps and two metas are built as Tx.WriteTo builds them; pages
// of older states left from earlier passes become zeros. The result is the
// file Tx.WriteTo writes for that state.
//
// The copy never maps the source (the writer may truncate it, and a mapped
// page past the end faults); a short read is a page that is gone, like a
// mismatch. It gives up after maxLivePasses passes, and reports damage when
// the newest state, with the metas unchanged, keeps failing its checksums.

// maxLivePasses bounds the passes of a live copy. Each pass re-reads what
// the writer changed during the previous one, so a writer that rewrites
// less than the copy reads per pass (always, short of a writer rewriting
// most of its file between two reads) lets it finish in a few.
const maxLivePasses = 100

// runRecord is what a parent records of a run besides its page: the txid
// in its header and the CRC-32C of all its bytes.
type runRecord struct {
	txid uint64
	sum  uint32
}

// liveCopy is one live copy in progress.
type liveCopy struct {
	src, dst vfs.File
	ps       int
	hwm      uint64 // HWM of the state the current pass copies
	dstPages uint64 // the new file's length in pages
	// whole maps the first page of each run whose entire subtree the new
	// file holds, verified, to that run's record.
	whole map[page.ID]runRecord
	// written has bit p set when the new file's page p was written: it
	// may hold a page of an older state, so the finish zeroes it unless
	// it is reachable.
	written []uint64
	bufs    [][]byte // one buffer per recursion level
	missed  int      // runs this pass found changed or gone in src
	passNo  int

	copied   int64 // bytes written to the new file
	total    int64 // progress total: the live pages of the first state
	progress func(written, total int64) error
	opts     *LiveOptions
}

// LiveOptions is what a live copy needs besides the two paths: the
// caller's options, and what only an open database knows.
type LiveOptions struct {
	// Mode is the new file's permission.
	Mode os.FileMode
	// Copy writes a copy even where the file system could clone.
	Copy bool
	// Progress, if set, is called as the copy is written with the bytes
	// written so far and an estimate of the total; its error stops the
	// copy.
	Progress func(written, total int64) error
	// Recover opens a clone of the live file once for writing, so that
	// recovery picks its newest complete sync point (a clone taken while
	// the writer works is a crash image) and Close leaves a clean meta; it
	// returns the txid the clone then holds.
	Recover func(path string) (txid uint64, err error)
	// AfterRead, if set, runs after every run the copy reads from the
	// source, with the pass number: a test commits from it to make the
	// writer reuse pages under the copy at a moment of its choosing.
	AfterRead func(pass int)
}

// LiveResult describes a live copy that CopyLive made.
type LiveResult struct {
	// Reflinked is set when the file system cloned the file, Call naming
	// the call; otherwise Fallback says why it was copied instead.
	Reflinked      bool
	Call, Fallback string
	// Txid is the transaction whose state the new file holds, Size its
	// length, Written the bytes written to make it (0 for a clone).
	Txid    uint64
	Size    int64
	Written int64
	// Passes counts the walks of the source a copy took.
	Passes int
}

// CopyLive copies src, which another process holds for writing, to dst,
// which must not exist: a clone where the file system can (recovered with
// opts.Recover), else the page-by-page copy described above. On error
// nothing is left at dst.
func CopyLive(src, dst string, opts *LiveOptions) (*LiveResult, error) {
	f, err := vfs.OS().OpenFile(src, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := &LiveResult{Fallback: "a copy was asked for"}
	if !opts.Copy {
		call, fallback, err := Reflink(f, dst, opts.Mode)
		if err != nil {
			return nil, err
		}
		if fallback == "" {
			if err := recoverClone(dst, opts, res); err != nil {
				_ = os.Remove(dst)
				return nil, fmt.Errorf("the clone of %s (taken while another process writes it) does not open: %w", src, err)
			}
			res.Reflinked, res.Call, res.Fallback = true, call, ""
			return res, nil
		}
		res.Fallback = fallback
	}
	out, err := vfs.OS().OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, opts.Mode)
	if err != nil {
		return nil, err
	}
	c := &liveCopy{src: f, dst: out, whole: map[page.ID]runRecord{}, progress: opts.Progress, opts: opts}
	err = c.run(res)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst)
		return nil, err
	}
	vfs.SyncParentDir(vfs.OS(), dst)
	return res, nil
}

// recoverClone recovers a clone of a live file (LiveOptions.Recover) and
// records the state and size it then has.
func recoverClone(path string, opts *LiveOptions, res *LiveResult) error {
	txid, err := opts.Recover(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	res.Txid, res.Size = txid, fi.Size()
	return nil
}

// run makes passes until one copies a whole state, then finishes the file.
func (c *liveCopy) run(res *LiveResult) error {
	var last []*page.Meta // the metas of the previous pass that missed
	unchanged := 0        // passes in a row that missed with the metas unchanged
	var lastTxid uint64
	for pass := 1; pass <= maxLivePasses; pass++ {
		metas, err := c.readMetas()
		if err != nil {
			return err
		}
		if sameMetas(metas, last) {
			unchanged++
		} else {
			unchanged = 0
		}
		m := metas[0]
		if unchanged >= 2 {
			// The newest state keeps failing while nothing commits: its
			// sync point is incomplete (a failed write), and Open would
			// fall back to the steady state, the other meta.
			if len(metas) < 2 || metas[1].Txid != m.Steady || unchanged >= 4 {
				return fmt.Errorf("%w: %s: the newest state (txn %d) does not match its checksums and no commit changes it (run rivet check)", rerrors.ErrCorrupt, c.src.Name(), m.Txid)
			}
			m = metas[1]
		}
		if m.Txid < lastTxid {
			// The writer went back to an older state (it reopened the file
			// after a crash): what was copied whole may be a newer state's.
			clear(c.whole)
		}
		lastTxid = m.Txid
		res.Passes, c.passNo = pass, pass
		whole, err := c.pass(m)
		if err != nil {
			return err
		}
		if !whole {
			last = metas
			continue
		}
		verified, err := c.finish(m)
		if err != nil {
			return err
		}
		if !verified {
			// Cannot happen by the reasoning above; if it does, start
			// over without shortcuts rather than trust it.
			clear(c.whole)
			last = nil
			continue
		}
		res.Txid = m.Txid
		res.Size = int64(m.HWM) * int64(c.ps)
		res.Written = c.copied
		return nil
	}
	return fmt.Errorf("rivet: gave up copying %s after %d passes: the writer kept reusing pages faster than the copy could read them", c.src.Name(), maxLivePasses)
}

// sameMetas reports whether two readings of the metas found the same
// states.
func sameMetas(a, b []*page.Meta) bool {
	return len(a) == len(b) && slices.EqualFunc(a, b, func(x, y *page.Meta) bool {
		return x.Txid == y.Txid && x.Root == y.Root && x.HWM == y.HWM
	})
}

// readMetas returns the source's valid metas, newest first. A meta being
// written as it is read fails its checksum and is left out; at least one is
// always whole, since a sync point writes only the slot the steady meta is
// not in.
func (c *liveCopy) readMetas() ([]*page.Meta, error) {
	size, err := c.src.Size()
	if err != nil {
		return nil, err
	}
	metas, errs := page.ReadMetas(c.src, size, boltfile.IsMetaPage)
	var valid []*page.Meta
	for _, m := range metas {
		if m != nil {
			valid = append(valid, m)
		}
	}
	if len(valid) == 0 {
		return nil, fmt.Errorf("%w: %s: no valid meta page (meta 0: %v; meta 1: %v)", rerrors.ErrInvalid, c.src.Name(), errs[0], errs[1])
	}
	if len(valid) == 2 && valid[1].Txid > valid[0].Txid {
		valid[0], valid[1] = valid[1], valid[0]
	}
	if c.ps == 0 {
		c.ps = valid[0].PageSize
	} else if valid[0].PageSize != c.ps {
		return nil, fmt.Errorf("%w: %s: page size changed from %d to %d during the copy", rerrors.ErrInvalid, c.src.Name(), c.ps, valid[0].PageSize)
	}
	return valid, nil
}

// pass copies what the new file lacks of state m and reports whether it
// now holds all of it.
func (c *liveCopy) pass(m *page.Meta) (bool, error) {
	c.hwm = m.HWM
	c.missed = 0
	if c.total == 0 {
		c.total = int64(m.HWM-min(m.HWM, m.FreePages)) * int64(c.ps)
	}
	if c.dstPages < m.HWM {
		if err := c.dst.Truncate(int64(m.HWM) * int64(c.ps)); err != nil {
			return false, err
		}
		c.dstPages = m.HWM
	}
	if words := (m.HWM + 63) / 64; uint64(len(c.written)) < words {
		c.written = append(c.written, make([]uint64, words-uint64(len(c.written)))...)
	}
	if m.Root.IsZero() {
		return true, nil
	}
	whole, err := c.node(m.Root, 0, 0, 0)
	return whole && c.missed == 0, err
}

// node copies the subtree of the node run ref names; it reports whether the
// new file now holds all of it. level counts recursion (one buffer each),
// depth and nest bound the walk as btree.Walker does.
func (c *liveCopy) node(ref page.Ref, level, depth, nest int) (bool, error) {
	if r, ok := c.whole[ref.ID]; ok && r == (runRecord{ref.Txid, ref.Checksum}) {
		return true, nil
	}
	if depth >= btree.MaxDepth || nest > btree.MaxNesting {
		return false, page.Corruptf(ref.ID, "tree deeper than %d levels or buckets nested deeper than %d (cycle?)", btree.MaxDepth, btree.MaxNesting)
	}
	run, ok, err := c.fetch(level, ref, 0)
	if err != nil || !ok {
		return false, err
	}
	// The run matched its parent's checksum: a malformed node is damage
	// the writer committed, not a page it reused.
	n, err := page.NodeFromBuffer(run, c.ps, ref.ID, ref.Txid, c.hwm)
	if err != nil {
		return false, err
	}
	whole := true
	for i := 0; i < n.Count(); i++ {
		var ok bool
		if !n.IsLeaf() {
			ok, err = c.node(n.BranchChild(i), level+1, depth+1, nest)
		} else {
			var flags uint32
			var v []byte
			flags, _, v, err = n.LeafElem(i)
			if err != nil {
				return false, err
			}
			switch flags {
			case page.FlagBucket:
				var rec page.BucketRecord
				if rec, err = page.DecodeBucketRecord(ref.ID, v); err != nil {
					return false, err
				}
				ok = true
				if rec.Inline == nil && !rec.Root.IsZero() {
					ok, err = c.node(rec.Root, level+1, 0, nest+1)
				}
			case page.FlagBlob:
				var b page.BlobRef
				if b, err = page.DecodeBlobRef(ref.ID, v); err != nil {
					return false, err
				}
				ok, err = c.blob(b, level+1)
			default:
				ok = true
			}
		}
		if err != nil {
			return false, err
		}
		whole = whole && ok
	}
	if whole {
		c.whole[ref.ID] = runRecord{ref.Txid, ref.Checksum}
	}
	return whole, nil
}

// blob copies the chain of extents of a blob value.
func (c *liveCopy) blob(b page.BlobRef, level int) (bool, error) {
	first := b.First
	if r, ok := c.whole[first.ID]; ok && r == (runRecord{first.Txid, first.Checksum}) {
		return true, nil
	}
	cur := first
	for extents := uint64(0); cur.ID != 0; extents++ {
		if extents >= c.hwm {
			return false, page.Corruptf(first.ID, "blob chain longer than the file (cycle?)")
		}
		run, ok, err := c.fetch(level, cur.Ref, uint64(cur.Pages))
		if err != nil || !ok {
			return false, err
		}
		ext, err := page.ReadBlobExtent(run, cur.ID, c.ps, cur, c.hwm)
		if err != nil {
			return false, err
		}
		cur = ext.Next
	}
	c.whole[first.ID] = runRecord{first.Txid, first.Checksum}
	return true, nil
}

// fetch returns the run ref names — pages long, or for a node (pages 0) as
// long as its header says — as its parent recorded it: from the new file
// if that already holds it, else read from the source and written to the
// new file. ok is false when the source does not hold it either: the page
// was reused or cut off since the meta was read (or is damaged, which the
// caller tells apart by the metas staying the same).
func (c *liveCopy) fetch(level int, ref page.Ref, pages uint64) (run []byte, ok bool, err error) {
	if ref.ID < 2 || ref.ID >= c.hwm || pages > c.hwm-ref.ID {
		c.missed++
		return nil, false, nil
	}
	if c.written[ref.ID/64]&(1<<(ref.ID%64)) != 0 {
		if run, err = c.read(c.dst, level, ref.ID, pages); err != nil {
			return nil, false, err
		}
		if run != nil && c.matches(run, ref) {
			return run, true, nil
		}
	}
	run, err = c.read(c.src, level, ref.ID, pages)
	if c.opts.AfterRead != nil {
		c.opts.AfterRead(c.passNo)
	}
	if err != nil {
		return nil, false, err
	}
	if run == nil || !c.matches(run, ref) {
		c.missed++
		return nil, false, nil
	}
	if _, err := c.dst.WriteAt(run, int64(ref.ID)*int64(c.ps)); err != nil {
		return nil, false, err
	}
	for p := ref.ID; p < ref.ID+uint64(len(run)/c.ps); p++ {
		c.written[p/64] |= 1 << (p % 64)
	}
	c.copied += int64(len(run))
	if c.progress != nil {
		c.total = max(c.total, c.copied)
		if err := c.progress(c.copied, c.total); err != nil {
			return nil, false, err
		}
	}
	return run, true, nil
}

// matches reports whether run is the run its parent's record describes:
// its header names its own page and the recorded txid, its length is what
// the header says, and its bytes have the recorded checksum.
func (c *liveCopy) matches(run []byte, ref page.Ref) bool {
	h, err := page.ReadHeader(ref.ID, run)
	return err == nil && h.ID == ref.ID && h.Txid == ref.Txid &&
		uint64(len(run)) == h.Pages()*uint64(c.ps) && page.Checksum(run) == ref.Checksum
}

// read reads the run at page id from f into level's buffer: pages pages,
// or for pages 0 as many as the header of its first page says. It returns
// nil (no error) when the run does not fit the state or the file ends
// first.
func (c *liveCopy) read(f vfs.File, level int, id page.ID, pages uint64) ([]byte, error) {
	ps := uint64(c.ps)
	if pages == 0 {
		first, err := c.readAt(f, level, id, 1)
		if first == nil || err != nil {
			return nil, err
		}
		h, _ := page.ReadHeader(id, first)
		if pages = h.Pages(); pages > c.hwm-id {
			return nil, nil
		}
		if pages == 1 {
			return first, nil
		}
	}
	if pages*ps > maxRunBytes {
		return nil, nil
	}
	return c.readAt(f, level, id, pages)
}

// maxRunBytes bounds a run read at once: a run lies inside one region
// (docs/design.md §2.6), so no valid run is longer.
const maxRunBytes = 1 << 31

func (c *liveCopy) readAt(f vfs.File, level int, id page.ID, pages uint64) ([]byte, error) {
	for len(c.bufs) <= level {
		c.bufs = append(c.bufs, nil)
	}
	size := int(pages) * c.ps
	if cap(c.bufs[level]) < size {
		c.bufs[level] = make([]byte, size)
	}
	buf := c.bufs[level][:size]
	n, err := f.ReadAt(buf, int64(id)*int64(c.ps))
	if n < size {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, nil // the file was cut under the copy
		}
		return nil, err
	}
	return buf, nil
}

// finish verifies the new file as state m from its own bytes and, if it
// holds that state whole, writes its region maps and metas (the file
// Tx.WriteTo writes for m). It reports false, writing nothing, if the
// verification walk found a problem.
func (c *liveCopy) finish(m *page.Meta) (bool, error) {
	ps := c.ps
	hwm := m.HWM
	if c.dstPages != hwm {
		if err := c.dst.Truncate(int64(hwm) * int64(ps)); err != nil {
			return false, err
		}
		c.dstPages = hwm
	}
	// The new file is this process's own, so mapping it is safe: nothing
	// else truncates it.
	mp, err := c.dst.Map(int64(hwm) * int64(ps))
	if err != nil {
		return false, err
	}
	defer mp.Close()
	data := mp.Bytes()
	live, err := LivePages(data, ps, hwm, m.Root)
	if err != nil {
		return false, nil
	}
	img, err := standalone(ps, m, live, true)
	if err != nil {
		return false, err
	}
	err = img.writeFile(c.dst, func() error {
		zero := make([]byte, ps)
		mapBuf := make([]byte, ps)
		words := make([]uint64, page.RegionMapWords(ps))
		for p := uint64(2); p < hwm; p++ {
			buf, reachable := img.pageAt(p, mapBuf, words)
			if reachable {
				continue // copied by the passes, and verified above
			}
			if buf == nil {
				if c.written[p/64]&(1<<(p%64)) == 0 {
					continue // never written: zeros already
				}
				buf = zero // a page of an older state
			}
			if _, err := c.dst.WriteAt(buf, int64(p)*int64(ps)); err != nil {
				return err
			}
			c.copied += int64(ps)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	c.copied += 2 * int64(ps)
	return true, nil
}

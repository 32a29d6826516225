// Package salvage reads what it still can from a damaged rivet or bbolt
// file (the library's Salvage, the tool's salvage command): every page is
// verified, a page that fails loses only its subtree, and each loss is
// reported as the bucket and key range it held.
//
// It reads rivet pages through internal/page and internal/btree only, and
// bbolt pages through internal/boltfile only; the library re-exports
// Visitor, Loss and Report as SalvageVisitor, SalvageLoss and
// SalvageReport.
package salvage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// Visitor receives what Salvage can still read from a damaged file.
// The slices it is given are valid only during the call; a visitor that
// keeps them must copy them. An error it returns stops Salvage and is
// returned.
type Visitor interface {
	// Bucket is called for every nested bucket whose record could be read,
	// before anything inside it: path is the bucket's full path (its own
	// name last) and seq its sequence number. The bucket may turn out empty
	// if its pages are lost (a Loss then says so).
	Bucket(path [][]byte, seq uint64) error
	// Put is called for every key that could be read, with its value, in
	// the bucket at path.
	Put(path [][]byte, key, value []byte) error
}

// Loss is one part of a file that Salvage could not read.
//
// Either a key range of a bucket: keys in [From, To) of the bucket at
// Bucket may have been lost (From nil: from the bucket's first key; To nil:
// to its end; both nil: the whole bucket). The range comes from the
// separator keys of the last branch page that validated, so it is exactly
// the part of the key space the damaged subtree held; keys outside it were
// all read.
//
// Or, when Key is set, one entry: the value of Key (stored out of line, in
// a blob) or the nested bucket Key (its record) in the bucket at Bucket.
type Loss struct {
	Bucket [][]byte
	From   []byte
	To     []byte
	Key    []byte
	// Page is the page that failed validation and Err says why (a
	// *errors.CorruptError, or the read error).
	Page uint64
	Err  error
}

// String describes the loss in one line, keys quoted with %q.
func (l Loss) String() string {
	var b strings.Builder
	b.WriteString("bucket ")
	b.WriteString(FormatPath(l.Bucket))
	switch {
	case l.Key != nil:
		fmt.Fprintf(&b, " key %q", l.Key)
	case l.From == nil && l.To == nil:
		b.WriteString(" all keys")
	default:
		b.WriteString(" keys [")
		if l.From == nil {
			b.WriteString("first")
		} else {
			fmt.Fprintf(&b, "%q", l.From)
		}
		b.WriteString(", ")
		if l.To == nil {
			b.WriteString("end")
		} else {
			fmt.Fprintf(&b, "%q", l.To)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " (page %d: %s)", l.Page, l.Reason())
	return b.String()
}

// Reason says why the loss's part could not be read: Err's text without
// the "rivet: corrupt page N: " prefix that Page already carries, or
// "unreadable" when Err is nil.
func (l Loss) Reason() string { return reason(l.Err) }

// reason is Loss.Reason for any error.
func reason(err error) string {
	var ce *rerrors.CorruptError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	if err == nil {
		return "unreadable"
	}
	return err.Error()
}

// pageReason is "N: reason" for a CorruptError, err's text otherwise.
func pageReason(err error) string {
	var ce *rerrors.CorruptError
	if errors.As(err, &ce) {
		return strconv.FormatUint(ce.Page, 10) + ": " + ce.Reason
	}
	return reason(err)
}

// FormatPath writes a bucket path as Loss.String does: names joined by
// "/", each quoted with %q unless it is printable ASCII without '/' or
// '"'; "(root)" for the root bucket.
func FormatPath(path [][]byte) string {
	if len(path) == 0 {
		return "(root)"
	}
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = string(p)
		if !isPrintable(p) {
			parts[i] = strconv.Quote(string(p))
		}
	}
	return strings.Join(parts, "/")
}

func isPrintable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '/' || c == '"' {
			return false
		}
	}
	return len(b) > 0
}

// Report is what Salvage read and what it could not.
type Report struct {
	// PageSize is the file's page size.
	PageSize int
	// Meta is the meta slot (0 or 1) whose state was salvaged, and Txid
	// that state's transaction id.
	Meta int
	Txid uint64
	// Notes say how the state was chosen when it is not simply the newest
	// meta's: a damaged meta, a last commit that did not verify, a fallback
	// to a meta that fails its own checksum but whose root page validates.
	Notes []string
	// Buckets and Keys count what was handed to the visitor; Bytes is the
	// total length of their names, keys and values.
	Buckets, Keys, Bytes int64
	// Lost lists every part of the state that could not be read, in the
	// order the walk met them.
	Lost []Loss
}

// File reads every key it still can from the rivet or bbolt file at path,
// which may be damaged, and hands buckets and keys to v. Unlike a View walk
// it does not stop at the first page that fails validation: it verifies
// every page (type, own page id, the txid and CRC-32C its parent recorded,
// element bounds), skips each subtree whose page fails, and reports the
// bucket and key range it held. Pages reached twice (cycles, shared
// subtrees) are skipped the second time, so the walk reads each page at
// most once and ends on any input; memory is bounded by the file's size.
//
// The state salvaged is the one Open would use when it verifies; when no
// meta does, the newest meta whose root page validates, and when both metas
// fail their checksum, the meta fields that name a root page that validates
// (Report.Notes says which). The file is opened read-only with a
// shared lock: a file another process has open for writing is refused with
// an error matching errors.ErrTimeout.
//
// A file is read as bbolt's format when no place a rivet meta page may
// start carries rivet's magic and some place a bbolt meta page may start
// carries bbolt's, in either byte order. bbolt pages carry no checksums:
// damage is found where it breaks the page structure (a wrong page id or
// type, offsets outside the page, keys out of order or outside the range
// of the branch above, cycles); a changed byte inside a value cannot be
// seen. Of bbolt's metas, the newest valid one whose root page is a tree
// page is salvaged, else a damaged one's fields if its root page is.
//
// The error is nil when the walk ran, however much was lost (see
// Report.Lost); it is set when the file cannot be read at all, no
// state in it can be found, or v returned an error.
func File(path string, v Visitor) (*Report, error) {
	f, err := vfs.OS().OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.TryLock(false); err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%s is open for writing in another process: %w", path, rerrors.ErrTimeout)
		}
		return nil, err
	}
	defer f.Unlock()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	return Read(f, size, v)
}

// walk is what a salvage of either format keeps while it walks: the
// visitor, the report, the bucket path it is in and the pages it has
// walked.
type walk struct {
	seen []uint64
	v    Visitor
	rep  *Report
	path [][]byte
}

// salvager walks a possibly damaged rivet file.
//
// Invariant: every page id it reads is below limit (the state's HWM or the
// file's page count, whichever is smaller), and every page it accepts is
// marked in seen first, so no page is walked twice and the buffers held on
// the recursion stack are distinct runs of the file: memory is bounded by
// the file's size.
type salvager struct {
	walk
	r     io.ReaderAt
	ps    int
	pages uint64 // whole pages in the file
	limit uint64
}

// Read is File for the size bytes r holds, read without a lock.
func Read(r io.ReaderAt, size int64, v Visitor) (*Report, error) {
	isBbolt, err := looksBbolt(r, size)
	if err != nil {
		return nil, err
	}
	if isBbolt {
		return readBbolt(r, size, v)
	}
	s := &salvager{r: r, walk: walk{v: v, rep: &Report{}}}
	m, slot, err := s.chooseState(size)
	if err != nil {
		return nil, err
	}
	s.rep.Meta, s.rep.Txid, s.rep.PageSize = slot, m.Txid, m.PageSize
	s.ps, s.pages = m.PageSize, uint64(size)/uint64(m.PageSize)
	s.limit = min(m.HWM, s.pages)
	s.seen = make([]uint64, (s.limit+63)/64)
	if s.limit < m.HWM {
		s.note("the file ends at page %d, before the state's high-water mark %d: it was cut short", s.pages, m.HWM)
	}
	if m.Root.IsZero() {
		return s.rep, nil
	}
	if err := s.tree(m.Root, nil, nil, 0); err != nil {
		return nil, err
	}
	return s.rep, nil
}

func (s *walk) note(format string, args ...any) {
	s.rep.Notes = append(s.rep.Notes, fmt.Sprintf(format, args...))
}

// lose records l in the current bucket.
func (s *walk) lose(l Loss) {
	l.Bucket = cloneBytesList(s.path)
	l.From, l.To, l.Key = bytes.Clone(l.From), bytes.Clone(l.To), bytes.Clone(l.Key)
	if ce := (*rerrors.CorruptError)(nil); errors.As(l.Err, &ce) && l.Page == 0 {
		l.Page = ce.Page
	}
	s.rep.Lost = append(s.rep.Lost, l)
}

func cloneBytesList(list [][]byte) [][]byte {
	out := make([][]byte, len(list))
	for i, b := range list {
		out[i] = bytes.Clone(b)
	}
	return out
}

// readAt reads n bytes at page id, failing with a CorruptError past the
// usable pages.
func (s *salvager) readAt(id page.ID, pages uint64, limit uint64) ([]byte, error) {
	if id < page.MinPages || id >= limit || pages == 0 || pages > limit-id {
		return nil, page.Corruptf(id, "run of %d pages outside the file's pages [%d, %d)", pages, page.MinPages, limit)
	}
	buf := make([]byte, pages*uint64(s.ps))
	if _, err := s.r.ReadAt(buf, int64(id)*int64(s.ps)); err != nil {
		return nil, page.Corruptf(id, "read: %v", err)
	}
	return buf, nil
}

// readNode reads and validates the node run ref points to, against limit
// (no page is marked seen).
func (s *salvager) readNode(ref page.Ref, limit uint64) (page.Node, error) {
	first, err := s.readAt(ref.ID, 1, limit)
	if err != nil {
		return page.Node{}, err
	}
	h, err := page.ReadHeader(ref.ID, first)
	if err != nil {
		return page.Node{}, err
	}
	run := first
	if h.Pages() > 1 {
		if h.Pages() > limit-ref.ID {
			return page.Node{}, page.Corruptf(ref.ID, "run of %d pages passes the end of the state (page %d)", h.Pages(), limit)
		}
		if run, err = s.readAt(ref.ID, h.Pages(), limit); err != nil {
			return page.Node{}, err
		}
	}
	n, err := page.NodeFromBuffer(run, s.ps, ref.ID, ref.Txid, limit)
	if err != nil {
		return page.Node{}, err
	}
	if got := page.Checksum(n.Bytes()); got != ref.Checksum {
		return page.Node{}, page.Corruptf(ref.ID, "checksum %08x, parent recorded %08x", got, ref.Checksum)
	}
	return n, nil
}

// mark records pages [id, id+n) as walked, failing if any already was.
func (s *walk) mark(id page.ID, n uint64) error {
	for p := id; p < id+n; p++ {
		if s.seen[p/64]&(1<<(p%64)) != 0 {
			return page.Corruptf(id, "page %d reached a second time (a cycle, or a subtree shared by two parents)", p)
		}
	}
	for p := id; p < id+n; p++ {
		s.seen[p/64] |= 1 << (p % 64)
	}
	return nil
}

// tree salvages the subtree ref points to, which holds keys in [lo, hi) of
// the current bucket (nil: unbounded). depth counts levels inside the
// bucket's tree. Only the visitor's errors are returned; damage is
// reported as losses.
func (s *salvager) tree(ref page.Ref, lo, hi []byte, depth int) error {
	if depth >= btree.MaxDepth {
		s.lose(Loss{From: lo, To: hi, Page: ref.ID, Err: page.Corruptf(ref.ID, "tree deeper than %d levels (a cycle?)", btree.MaxDepth)})
		return nil
	}
	n, err := s.readNode(ref, s.limit)
	if err == nil {
		err = s.mark(ref.ID, uint64(len(n.Bytes())/s.ps))
	}
	if err == nil {
		err = validateElems(n)
	}
	if err != nil {
		s.lose(Loss{From: lo, To: hi, Page: ref.ID, Err: err})
		return nil
	}
	if !n.IsLeaf() {
		for i := 0; i < n.Count(); i++ {
			from, to := lo, hi
			if i > 0 {
				from, _ = n.BranchKey(i)
			}
			if i+1 < n.Count() {
				to, _ = n.BranchKey(i + 1)
			}
			if err := s.tree(n.BranchChild(i), from, to, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 0; i < n.Count(); i++ {
		flags, k, v, _ := n.LeafElem(i)
		if err := s.element(ref.ID, flags, k, v); err != nil {
			return err
		}
	}
	return nil
}

// validateElems checks every element's bounds before any is used, so a
// node is salvaged whole or lost whole.
func validateElems(n page.Node) error {
	for i := 0; i < n.Count(); i++ {
		var err error
		if n.IsLeaf() {
			_, _, _, err = n.LeafElem(i)
		} else {
			_, err = n.BranchKey(i)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// element salvages one leaf element of page id in the current bucket.
func (s *salvager) element(id page.ID, flags uint32, k, v []byte) error {
	switch flags {
	case page.FlagBlob:
		val, err := s.blob(id, v)
		if err != nil {
			s.lose(Loss{Key: k, Err: err})
			return nil
		}
		return s.put(k, val)
	case page.FlagBucket:
		rec, err := page.DecodeBucketRecord(id, v)
		if err != nil {
			s.lose(Loss{Key: k, Page: id, Err: err})
			return nil
		}
		if len(s.path) >= btree.MaxNesting {
			s.lose(Loss{Key: k, Page: id, Err: page.Corruptf(id, "buckets nested deeper than %d (a cycle?)", btree.MaxNesting)})
			return nil
		}
		s.path = append(s.path, k)
		defer func() { s.path = s.path[:len(s.path)-1] }()
		s.rep.Buckets++
		s.rep.Bytes += int64(len(k))
		if err := s.v.Bucket(s.path, rec.Sequence); err != nil {
			return err
		}
		if rec.Inline != nil {
			n, err := page.InlineLeaf(id, rec.Inline)
			if err != nil {
				s.lose(Loss{Page: id, Err: err})
				return nil
			}
			for i := 0; i < n.Count(); i++ {
				_, ik, iv, _ := n.LeafElem(i) // InlineLeaf checked every element
				if err := s.put(ik, iv); err != nil {
					return err
				}
			}
			return nil
		}
		if rec.Root.IsZero() {
			return nil
		}
		return s.tree(rec.Root, nil, nil, 0)
	default:
		return s.put(k, v)
	}
}

func (s *salvager) put(k, v []byte) error {
	if len(s.path) == 0 {
		// The root bucket holds only bucket records; a plain value there
		// has no bucket to go to (rivet's API cannot write one).
		s.lose(Loss{Key: k, Err: fmt.Errorf("a plain value in the root bucket, where only buckets belong")})
		return nil
	}
	s.rep.Keys++
	s.rep.Bytes += int64(len(k) + len(v))
	return s.v.Put(s.path, k, v)
}

// blob reads the out-of-line value whose reference v was found in leaf id,
// verifying every extent's header and checksum.
func (s *salvager) blob(id page.ID, v []byte) ([]byte, error) {
	ref, err := page.DecodeBlobRef(id, v)
	if err != nil {
		return nil, err
	}
	if ref.Length > btree.MaxValueSize || ref.Length > s.limit*uint64(s.ps) {
		return nil, page.Corruptf(ref.First.ID, "blob length %d is impossible", ref.Length)
	}
	out := make([]byte, 0, ref.Length)
	cur := ref.First
	// Every extent is marked seen and adds at least one byte, so the chain
	// ends within the file's pages even if it forms a cycle.
	for cur.ID != 0 {
		run, err := s.readAt(cur.ID, uint64(cur.Pages), s.limit)
		if err != nil {
			return nil, err
		}
		ext, err := page.ReadBlobExtent(run, cur.ID, s.ps, cur, s.limit)
		if err != nil {
			return nil, err
		}
		if got := page.Checksum(ext.Run); got != cur.Checksum {
			return nil, page.Corruptf(cur.ID, "blob checksum %08x, parent recorded %08x", got, cur.Checksum)
		}
		if err := s.mark(cur.ID, uint64(cur.Pages)); err != nil {
			return nil, err
		}
		if len(ext.Payload) == 0 || uint64(len(out)+len(ext.Payload)) > ref.Length {
			return nil, page.Corruptf(cur.ID, "blob chain does not add up to %d bytes", ref.Length)
		}
		out = append(out, ext.Payload...)
		cur = ext.Next
	}
	if uint64(len(out)) != ref.Length {
		return nil, page.Corruptf(ref.First.ID, "blob chain holds %d bytes, reference says %d", len(out), ref.Length)
	}
	return out, nil
}

// metaCandidate is a meta page salvage may build on.
type metaCandidate struct {
	m     *page.Meta
	slot  int
	valid bool // passed DecodeMeta; otherwise read field by field
}

// chooseState picks the state to salvage: the newest meta that decodes and
// whose last sync point verifies (what Open picks), else the newest whose
// root page validates, else a damaged meta's root fields if the root page
// they name validates.
func (s *salvager) chooseState(size int64) (*page.Meta, int, error) {
	if size < int64(page.MinPages*page.MinPageSize) {
		return nil, 0, fmt.Errorf("%w: %d bytes is too short for a rivet file", rerrors.ErrInvalid, size)
	}
	head := make([]byte, min(size, 2*page.MaxPageSize))
	if _, err := s.r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	valid, damaged := readMetas(head)
	if len(valid) == 2 && valid[1].m.Txid > valid[0].m.Txid {
		valid[0], valid[1] = valid[1], valid[0]
	}
	s.rep.Notes = append(s.rep.Notes, damaged...)
	// As Open: the newest meta whose last sync point verifies.
	var firstErr error
	for i, c := range valid {
		err := s.verifyState(c.m, size)
		if err == nil {
			if i > 0 {
				s.note("meta %d (txid %d) was not used: page %s; salvaged meta %d (txid %d), as Open would", valid[0].slot, valid[0].m.Txid, pageReason(firstErr), c.slot, c.m.Txid)
			}
			return c.m, c.slot, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	// None verifies whole: the newest whose root page validates; the walk
	// reports what else is lost.
	for _, c := range valid {
		if err := s.rootOK(c.m, size); err == nil {
			s.note("no meta's last commit verifies (meta %d: page %s): salvaging meta %d (txid %d), whose root page validates", valid[0].slot, pageReason(firstErr), c.slot, c.m.Txid)
			return c.m, c.slot, nil
		}
	}
	// Both metas fail: read their fields one by one, for every page size,
	// and take the newest whose root reference names a page that matches
	// it (type, own id, txid and checksum: chance cannot forge that).
	var best *metaCandidate
	for _, ps := range []int{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10} {
		for slot := range 2 {
			if int64((slot+1)*ps) > int64(len(head)) {
				continue
			}
			m := page.LooseMeta(head[slot*ps:(slot+1)*ps], ps, size)
			if m == nil || (best != nil && m.Txid <= best.m.Txid) {
				continue
			}
			if err := s.rootOK(m, size); err == nil {
				best = &metaCandidate{m: m, slot: slot}
			}
		}
	}
	if best != nil {
		s.note("no meta page is valid; salvaging the state meta %d names (txid %d, %d-byte pages), whose root page validates", best.slot, best.m.Txid, best.m.PageSize)
		return best.m, best.slot, nil
	}
	return nil, 0, fmt.Errorf("%w: no meta page names a root page that validates (%s): nothing can be salvaged",
		rerrors.ErrCorrupt, strings.Join(s.rep.Notes, "; "))
}

// readMetas decodes the metas of head (the file's first bytes): the valid
// ones in slot order, and a note for each that is not.
func readMetas(head []byte) (valid []metaCandidate, damaged []string) {
	for slot := range 2 {
		ps, ok := page.ProbeMeta(head, slot)
		if !ok {
			damaged = append(damaged, fmt.Sprintf("meta %d is not a rivet meta page", slot))
			continue
		}
		m, err := page.DecodeMeta(page.ID(slot), head[slot*ps:(slot+1)*ps])
		if err != nil {
			damaged = append(damaged, fmt.Sprintf("meta %d: %s", slot, reason(err)))
			continue
		}
		valid = append(valid, metaCandidate{m: m, slot: slot, valid: true})
	}
	return valid, damaged
}

// rootOK validates m's root page (an empty tree is fine).
func (s *salvager) rootOK(m *page.Meta, size int64) error {
	if m.Root.IsZero() {
		return nil
	}
	t := s.withState(m, size)
	_, err := t.readNode(m.Root, t.limit)
	return err
}

// withState returns a salvager reading the file at m's page size and HWM
// bounds, for trial reads while the state is chosen.
func (s *salvager) withState(m *page.Meta, size int64) *salvager {
	pages := uint64(size) / uint64(m.PageSize)
	return &salvager{r: s.r, ps: m.PageSize, pages: pages, limit: min(m.HWM, pages)}
}

// verifyState checks what Open's recovery checks: the root, and every page
// m's last sync point wrote (txid after its steady txid), with checksums.
func (s *salvager) verifyState(m *page.Meta, size int64) error {
	if err := s.rootOK(m, size); err != nil {
		return err
	}
	if m.Txid == m.Steady || m.Root.IsZero() {
		return nil
	}
	t := s.withState(m, size)
	t.seen = make([]uint64, (t.limit+63)/64)
	w := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			return t.readAt(id, n, t.limit)
		},
		PageSize:        t.ps,
		HWM:             t.limit,
		MinTxid:         m.Steady,
		VerifyChecksums: true,
		Visit:           func(id page.ID, n uint64, _ page.Type) error { return t.mark(id, n) },
	}
	return w.Walk(m.Root)
}

// looksBbolt reports whether the file r holds is a bbolt file: no place a
// rivet meta may start carries rivet's magic, and some place a bbolt meta
// may start carries bbolt's (in either byte order). Only magics count, so
// a file whose metas are otherwise damaged is still read as what it was.
func looksBbolt(r io.ReaderAt, size int64) (bool, error) {
	head := make([]byte, max(0, min(size, bboltHeadSize)))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if page.HasMagic(head) {
		return false, nil
	}
	for ps := page.MinPageSize; ps <= page.MaxPageSize && ps < len(head); ps *= 2 {
		if page.HasMagic(head[ps:]) {
			return false, nil
		}
	}
	return boltfile.HasMetaMagic(head), nil
}

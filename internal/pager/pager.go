// Package pager owns the data file's I/O for the layers above it: counted
// page reads for recovery and region-map loads, memory maps for readers,
// coalesced page writes, file growth and the flush (docs/design.md §3, §5).
//
// Concurrency: any number of goroutines may call Acquire and View.Release at
// any time. The writer-side calls (EnsureMapped, Grow, WriteRuns, Sync) are
// meant for the single writer; they are serialised by a mutex, so concurrent
// misuse is safe but not parallel. ReadPages and Stats may be called from any
// goroutine.
//
// Why an old mapping is safe to read: a read transaction pins the mapping
// that was current when it began and reads only pages of its snapshot.
// Copy-on-write guarantees those pages are never rewritten while a snapshot
// that can see them is open (docs/design.md §6, invariant 1), so whether a
// mapping is the current one or an older, longer-lived one makes no
// difference to what the reader sees. Growing the map therefore never waits
// for readers: it installs a new mapping and leaves each old one to be
// unmapped by the release of its last reference.
package pager

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/dirty"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// ErrClosed is returned by every method of a closed Pager except Close,
// Acquire (which returns an empty View) and Stats.
var ErrClosed = errors.New("pager: closed")

// Defaults and limits.
const (
	// DefaultMmapReserve is the smallest mapping on 64-bit platforms when
	// Options.InitialMmapSize is 0: address space is plentiful there, and a
	// large reserve means a growing file is rarely re-mapped.
	DefaultMmapReserve = 1 << 30
	// DefaultMmapReserve32 is the smallest mapping on 32-bit platforms, whose
	// 2-4 GiB of address space cannot spare 1 GiB per mapping.
	DefaultMmapReserve32 = 64 << 20
	// DefaultGrowSize is the largest step by which Grow extends a file of
	// at least that size when Options.GrowSize is 0 (smaller files double).
	DefaultGrowSize = 16 << 20
	// minGrowStep is the smallest step for a file past GrowSize.
	minGrowStep = 1 << 20
	// MaxCoalescedWrite bounds the bytes WriteRuns copies into one WriteAt.
	// Past a few MiB a bigger single write saves nothing measurable, and the
	// scratch buffer, which is kept between calls, stays bounded.
	MaxCoalescedWrite = 8 << 20
)

const (
	is64Bit = ^uint(0)>>63 == 1
	// maxInt bounds lengths held in memory (buffers, mappings); it is
	// 2^31-1 on 32-bit platforms.
	maxInt = int64(^uint(0) >> 1)
	// maxOffset bounds file offsets, which are int64 everywhere.
	maxOffset = math.MaxInt64
)

// Options configures a Pager.
type Options struct {
	// PageSize is the page size in bytes; it must satisfy page.ValidPageSize.
	PageSize int
	// InitialMmapSize is the smallest mapping EnsureMapped creates, in bytes.
	// 0 selects DefaultMmapReserve (DefaultMmapReserve32 on 32-bit
	// platforms). A positive value replaces that floor, which lets tests on
	// in-memory files (where a reserve costs real memory) keep maps small.
	InitialMmapSize int64
	// GrowSize is the largest step by which Grow extends a file of at
	// least GrowSize bytes (it grows by 1/16 of the file, at least 1 MiB,
	// at most GrowSize); 0 selects DefaultGrowSize. A smaller file doubles
	// (up to GrowSize), so a new or small database is as small as bbolt's:
	// 4 pages new, 8 after one key.
	GrowSize int64
	// MaxSize, if positive, is the largest the file may become, in bytes.
	// Grow never extends past it and fails with errors.ErrMaxSizeReached
	// when asked to.
	MaxSize int64
	// ReadOnly forbids writes, truncates and flushes. EnsureMapped then maps
	// the file as it is and never grows it.
	ReadOnly bool
}

// Stats counts the pager's I/O. All counters only ever increase.
// They are int64, like the public DB statistics they feed.
type Stats struct {
	WriteCalls   int64 // WriteAt calls made by WriteRuns (one per coalesced group)
	PagesWritten int64 // pages written by successful WriteAt calls
	BytesWritten int64 // bytes written by successful WriteAt calls
	Flushes      int64 // Sync calls made
	PagesRead    int64 // pages read by successful ReadPages calls
	Remaps       int64 // mappings created, the first one included
}

// Pager owns a data file's I/O. See the package documentation for what may
// be called concurrently.
type Pager struct {
	f        vfs.File
	ps       int64
	reserve  int64 // smallest mapping length
	growSize int64
	maxSize  int64
	readOnly bool

	// hold, while set, makes writes and cuts of the file wait (HoldWrites).
	hold atomic.Pointer[writeHold]

	// wmu serialises the writer-side calls and Close. It guards scratch (used
	// only for pages smaller than the OS page, see WriteRuns) and sorted, and
	// the transitions of cur and closed.
	wmu     sync.Mutex
	scratch []byte
	sorted  []page.Run

	// pieceBusy is set while writeDeferredPiece writes a piece of the
	// dirty table without wmu, so that commits defer their pages
	// meanwhile; pieceDone is signalled (L = &wmu) when it is cleared.
	// Invariant: while pieceBusy, nothing else writes or cuts the file or
	// takes from the dirty table — every call that does waits for it
	// (waitPiece) right after taking wmu — so the piece's bytes for a
	// page, stale if a later Defer replaced its entry, reach the file
	// before that newer entry's. pieceScratch serves the piece as scratch
	// serves the others.
	pieceBusy    bool
	pieceDone    sync.Cond
	pieceScratch []byte

	// mu guards cur. Acquire loads cur and takes its reference under the
	// read lock; install swaps cur under the write lock before dropping the
	// old mapping's current-reference. So a mapping cannot reach zero
	// references, and be unmapped, between Acquire loading it and counting
	// its own reference.
	mu  sync.RWMutex
	cur *View // nil before the first mapping and after Close

	closed atomic.Bool
	// size caches the file size in bytes, -1 until first needed. It only
	// rises (noteSize), except in Truncate and Cut.
	// Invariant: size <= the real file size. In a writable pager only grow
	// and Truncate change the file's size (WriteRuns grows before writing,
	// so writes never extend the file), which keeps the cache exact there.
	size atomic.Int64

	errMu    sync.Mutex
	unmapErr error // first error from unmapping a released mapping

	writeCalls, pagesWritten, bytesWritten atomic.Int64
	flushes, pagesRead, remaps             atomic.Int64
	// noWriteback is set once the file refused a StartWriteback hint.
	noWriteback atomic.Bool
	// noAdvice and noResident are set once a mapping refused a WillNeed
	// hint or a Resident question as unsupported (the platform has none).
	noAdvice, noResident atomic.Bool
	// wbRanges feeds the goroutine that gives the file StartWriteback
	// hints (nil until the first); wbDone closes when it has stopped.
	// Sends and the close happen under wmu, after checking closed.
	wbRanges chan [2]int64
	wbDone   chan struct{}

	// cutting is set from BeginCut until Cut reaches cutFloor. cutFloor is
	// the size Cut may not go below: BeginCut's, raised by every grow since.
	// Invariant: while cutting, cutFloor >= the end of every run written and
	// of every HWM mapped since BeginCut (WriteRuns and EnsureMapped grow
	// the file to cover them first). Both are guarded by wmu.
	cutting  bool
	cutFloor int64
	// cutMu is held by Cut while the file system cuts the file, which can
	// take many milliseconds (it frees, and may discard, what it drops);
	// Cut lets go of wmu meanwhile, so that writes below the cut, deferrals
	// and mappings that need no growth go on. What changes the file's size
	// otherwise (grow, Truncate, Close) takes cutMu under wmu first.
	// Invariant: while Cut holds cutMu, size is already the size it cuts
	// to, and every page a state can reach lies below it.
	cutMu sync.Mutex

	// dirty holds the runs Defer stored and no write has replaced: pages
	// of committed states the file does not have yet (WriteDeferred).
	// Changed under wmu.
	dirty *dirty.Table
}

// Open returns a Pager for f. It reads nothing from the file. The Pager does
// not own f: Close leaves it open.
func Open(f vfs.File, opts Options) (*Pager, error) {
	if f == nil {
		return nil, errors.New("pager: nil file")
	}
	if !page.ValidPageSize(opts.PageSize) {
		return nil, fmt.Errorf("pager: invalid page size %d", opts.PageSize)
	}
	if opts.InitialMmapSize < 0 || opts.GrowSize < 0 || opts.MaxSize < 0 {
		return nil, errors.New("pager: negative size option")
	}
	p := &Pager{
		f:        f,
		ps:       int64(opts.PageSize),
		reserve:  opts.InitialMmapSize,
		growSize: opts.GrowSize,
		maxSize:  opts.MaxSize,
		readOnly: opts.ReadOnly,
	}
	p.pieceDone.L = &p.wmu
	if p.reserve == 0 {
		p.reserve = DefaultMmapReserve32
		if is64Bit {
			p.reserve = DefaultMmapReserve
		}
	}
	if p.growSize == 0 {
		p.growSize = DefaultGrowSize
	}
	p.size.Store(-1)
	p.dirty = dirty.New(opts.PageSize)
	return p, nil
}

// PageSize returns the page size in bytes.
func (p *Pager) PageSize() int { return int(p.ps) }

// pageOffset returns the byte offset of page id, or false if it does not fit
// in a file offset.
func (p *Pager) pageOffset(id page.ID) (int64, bool) {
	if id > uint64(maxOffset/p.ps) {
		return 0, false
	}
	return int64(id) * p.ps, true
}

// fileSize returns the cached file size if it is at least atLeast, and
// otherwise asks the file (and caches the answer).
func (p *Pager) fileSize(atLeast int64) (int64, error) {
	if s := p.size.Load(); s >= atLeast {
		return s, nil
	}
	s, err := p.f.Size()
	if err != nil {
		return 0, err
	}
	return p.noteSize(s), nil
}

// noteSize raises the cached size to s and returns the cached size. The
// cache only ever rises: the pager never shrinks the file, and a stale answer
// from a concurrent ReadPages must not undo what Grow stored.
func (p *Pager) noteSize(s int64) int64 {
	for {
		old := p.size.Load()
		if old >= s {
			return old
		}
		if p.size.CompareAndSwap(old, s) {
			return s
		}
	}
}

// ReadPages reads n pages starting at id into a new buffer with File.ReadAt,
// so the read is visible to I/O accounting (recovery and region-map loads use
// it). A range that does not lie inside the file is reported as a
// *errors.CorruptError naming id: page ids come from disk, and a range past
// the end means the bytes that named it are wrong. The range is checked
// before the buffer is allocated, so a corrupt count cannot make it allocate
// more than the file holds. Other I/O errors are returned as they are.
func (p *Pager) ReadPages(id page.ID, n uint64) ([]byte, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if n == 0 {
		return nil, fmt.Errorf("pager: ReadPages of zero pages at page %d", id)
	}
	off, ok := p.pageOffset(id)
	if !ok || n > uint64(maxOffset/p.ps) || off > maxOffset-int64(n)*p.ps {
		return nil, page.Corruptf(id, "run of %d pages lies beyond the largest file offset", n)
	}
	length := int64(n) * p.ps
	end := off + length
	size, err := p.fileSize(end)
	if err != nil {
		return nil, err
	}
	if end > size {
		return nil, page.Corruptf(id, "run of %d pages ends at byte %d, past the end of the file (%d bytes)", n, end, size)
	}
	if length > maxInt {
		return nil, page.Corruptf(id, "run of %d pages does not fit in memory", n)
	}
	buf := make([]byte, length)
	got, err := p.f.ReadAt(buf, off)
	if err == io.EOF || err == io.ErrUnexpectedEOF || (err == nil && got < len(buf)) {
		// The file was shorter than its size said (it shrank under us).
		return nil, page.Corruptf(id, "run of %d pages: short read of %d bytes at byte %d", n, got, off)
	}
	if err != nil {
		return nil, err
	}
	p.pagesRead.Add(int64(n))
	return buf, nil
}

// View is a reference to a memory mapping of the file, obtained from Acquire.
// Its methods may be called on a nil *View.
type View struct {
	mp *mapping
	b  []byte
}

// Bytes returns the mapped bytes: the start of the file, up to the smaller of
// the mapping's length and the file's length (in whole pages) when the View
// was installed. Every page inside it is backed by the file, so reading it
// never faults. Callers bound-check page ranges against len(Bytes()).
// The bytes must not be modified and must not be used after Release.
func (v *View) Bytes() []byte {
	if v == nil {
		return nil
	}
	return v.b
}

// Release drops the reference Acquire took. Call it exactly once per
// Acquire. A mapping that is no longer current is unmapped by the release of
// its last reference.
func (v *View) Release() {
	if v == nil || v.mp == nil {
		return
	}
	v.mp.release()
}

// WillNeed asks for pages [id, id+n) of the view to be read in ahead of
// use, in the background (vfs.Advisor): a walk in key order calls it for
// the pages it is about to read, which the mapping's random-access advice
// would otherwise fault in one page at a time. The range is clipped to the
// view. It is a hint: it does nothing on a view whose file takes none, and
// once the platform has refused one as unsupported the pager stops asking.
func (v *View) WillNeed(id page.ID, n uint64) {
	if v == nil || v.mp == nil || v.mp.adv == nil || n == 0 {
		return
	}
	p := v.mp.p
	size := uint64(len(v.b))
	if id >= size/uint64(p.ps) || p.noAdvice.Load() {
		return
	}
	off := id * uint64(p.ps)
	length := min(n, (size-off)/uint64(p.ps)) * uint64(p.ps)
	if err := v.mp.adv.WillNeed(int64(off), int64(length)); errors.Is(err, errors.ErrUnsupported) {
		p.noAdvice.Store(true)
	}
}

// Resident reports whether page id of the view is in memory, so that
// reading it would not wait for the disk; false when that is not known
// (a platform or file that cannot tell, a page outside the view), which
// callers take as a reason to ask for the page (WillNeed).
func (v *View) Resident(id page.ID) bool {
	if v == nil || v.mp == nil || v.mp.adv == nil {
		return false
	}
	p := v.mp.p
	if id >= uint64(len(v.b))/uint64(p.ps) || p.noResident.Load() {
		return false
	}
	in, err := v.mp.adv.Resident(int64(id * uint64(p.ps)))
	if errors.Is(err, errors.ErrUnsupported) {
		p.noResident.Store(true)
	}
	return in && err == nil
}

// emptyView is what Acquire returns when nothing is mapped.
var emptyView = &View{}

// mapping is one vfs.Mapping shared by the Views installed over it.
type mapping struct {
	m     vfs.Mapping
	bytes []byte // m.Bytes(), taken once at creation
	p     *Pager
	adv   vfs.Advisor // m, if it takes read-ahead hints; else nil
	// refs counts one reference for being current plus one per Acquire not
	// yet released. Invariant: the mapping is unmapped exactly when refs
	// drops to zero; once it is zero nothing can take a new reference,
	// because Acquire only references the current mapping, under p.mu, and
	// the current mapping always holds its own reference.
	refs atomic.Int64
}

func (mp *mapping) release() {
	if mp.refs.Add(-1) != 0 {
		// Positive: still in use. Negative: a View was released more often
		// than acquired; the mapping is already gone, nothing to do.
		return
	}
	if err := mp.m.Close(); err != nil {
		mp.p.errMu.Lock()
		if mp.p.unmapErr == nil {
			mp.p.unmapErr = err
		}
		mp.p.errMu.Unlock()
	}
}

// Acquire returns the current mapping with a reference held, so it stays
// mapped until the View is released, however the pager re-maps in the
// meantime. Before the first EnsureMapped and after Close it returns an empty
// View (Bytes() is nil; Release does nothing).
func (p *Pager) Acquire() *View {
	p.mu.RLock()
	v := p.cur
	if v != nil {
		v.mp.refs.Add(1)
	}
	p.mu.RUnlock()
	if v == nil {
		return emptyView
	}
	return v
}

// install makes v current. The caller holds wmu and passes v with the
// current-reference already counted in v.mp.refs when v.mp is new.
func (p *Pager) install(v *View) {
	p.mu.Lock()
	old := p.cur
	p.cur = v
	p.mu.Unlock()
	if old != nil && old.mp != v.mp {
		old.mp.release() // its current-reference
	}
}

// EnsureMapped makes the current View cover at least hwm pages, growing the
// file first (see Grow) so that no covered page lies past the end of the
// file. If the current mapping is too short, or shorter than the file, it
// creates a new mapping of max(InitialMmapSize floor, 2×hwm pages, file
// size) bytes rounded up to the page size, and makes it current without
// waiting for the readers of older mappings.
//
// Re-mapping when the file outgrows the mapping, even if hwm is covered,
// matters on Windows, where a mapping stops at the file's end, and for
// in-memory files, whose growth past a mapping moves their bytes.
//
// In a read-only pager the file is never grown: the View covers the file as
// it is, which may be less than hwm pages for a file cut short.
//
// Call it before publishing a state whose pages lie below hwm.
func (p *Pager) EnsureMapped(hwm uint64) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	need, ok := p.pageOffset(hwm)
	if !ok {
		return fmt.Errorf("pager: high-water mark of %d pages is past the largest file offset", hwm)
	}
	var size int64
	if p.readOnly {
		s, err := p.f.Size()
		if err != nil {
			return err
		}
		size = p.noteSize(s)
	} else {
		if err := p.grow(need); err != nil {
			return err
		}
		size = p.size.Load()
	}
	// Invariant: a View never extends past the last whole page of the file.
	visible := size / p.ps * p.ps
	required := min(need, visible)

	if cur := p.cur; cur != nil {
		mapLen := int64(len(cur.mp.bytes))
		if mapLen >= need && mapLen >= size {
			if l := min(mapLen, visible); l != int64(len(cur.b)) {
				// Same mapping, more of it backed by the file now.
				p.install(&View{mp: cur.mp, b: cur.mp.bytes[:l]})
			}
			return nil
		}
	}

	tight := roundUp(max(need, size), p.ps)
	if tight > maxInt {
		return fmt.Errorf("pager: a %d-byte file cannot be mapped on this platform", max(need, size))
	}
	length := max(p.reserve, tight)
	if need <= maxOffset/2 {
		length = max(length, 2*need)
	}
	length = min(roundUp(length, p.ps), maxInt/p.ps*p.ps)
	m, err := p.f.Map(length)
	if err != nil && length > tight {
		// The reserve is a convenience; a tight address space (32-bit, or
		// a ulimit) may still fit a mapping of exactly what is needed.
		m, err = p.f.Map(tight)
	}
	if err != nil {
		return err
	}
	b := m.Bytes()
	if int64(len(b)) < required {
		m.Close()
		return fmt.Errorf("pager: mapping of %d bytes is shorter than the %d bytes needed", len(b), required)
	}
	mp := &mapping{m: m, bytes: b, p: p}
	mp.adv, _ = m.(vfs.Advisor)
	mp.refs.Store(1)
	p.remaps.Add(1)
	p.install(&View{mp: mp, b: b[:min(int64(len(b)), visible)]})
	return nil
}

// roundUp rounds n up to a multiple of ps, saturating at the largest
// multiple that fits in an int64.
func roundUp(n, ps int64) int64 {
	if n > maxOffset-ps {
		return maxOffset / ps * ps
	}
	return (n + ps - 1) / ps * ps
}

// Grow makes the file at least hwm pages long, so that pages read through the
// map never lie past the end of the file (a read there faults). It extends
// the file with Truncate: a file smaller than Options.GrowSize to twice its
// size (at most GrowSize), a larger one by 1/16 of its size (at least 1 MiB,
// at most GrowSize); never less than needed, never past Options.MaxSize.
func (p *Pager) Grow(hwm uint64) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	need, ok := p.pageOffset(hwm)
	if !ok {
		return fmt.Errorf("pager: high-water mark of %d pages is past the largest file offset", hwm)
	}
	return p.grow(need)
}

// grow makes the file at least need bytes long. The caller holds wmu.
func (p *Pager) grow(need int64) error {
	if p.readOnly {
		return rerrors.ErrDatabaseReadOnly
	}
	if p.cutting {
		p.cutFloor = max(p.cutFloor, need)
	}
	if need > p.size.Load() {
		// The file may be being cut (Cut lowers size first): let the cut
		// finish before asking the file its size and extending it.
		p.cutMu.Lock()
		defer p.cutMu.Unlock()
	}
	size, err := p.fileSize(need)
	if err != nil {
		return err
	}
	if size >= need {
		return nil
	}
	if p.maxSize > 0 && need > p.maxSize {
		return fmt.Errorf("%w: need %d bytes, limit %d", rerrors.ErrMaxSizeReached, need, p.maxSize)
	}
	// step is the slack a file of n bytes gets past GrowSize: 1/16 of it,
	// at least 1 MiB, at most GrowSize, so a file carries at most 6 % or
	// 16 MiB of slack, against bbolt's 16 MiB. (Steps of 1/8 left a
	// 100 MiB file 12 MiB of slack that bbolt's did not have.)
	step := func(n int64) int64 { return min(p.growSize, max(n/16, minGrowStep)) }
	target := need
	if size < p.growSize {
		// Doubling, as bbolt's file does up to its 16 MiB allocation step
		// (it grows the file to its doubling map size): a compacted copy
		// of a small database stays small.
		target = max(need, min(2*size, p.growSize))
	} else if s := step(size); size <= maxOffset-s {
		target = max(need, size+s)
	}
	if target == need {
		// One commit needed more than a step: give the new size its own
		// slack, so the next small commit does not grow the file again
		// (bbolt's TestOpen_Size: a 20 MB load, then one key).
		if need < p.growSize {
			target = min(p.growSize, nextPowerOfTwo(need))
		} else if s := step(need); need <= maxOffset-s {
			target = need + s
		}
	}
	target = roundUp(target, p.ps)
	if p.maxSize > 0 && target > p.maxSize {
		target = max(need, p.maxSize/p.ps*p.ps)
	}
	if err := p.f.Truncate(target); err != nil {
		return err
	}
	p.noteSize(target)
	return nil
}

// SetMaxSize replaces Options.MaxSize (0 or less: unlimited) for the
// growth that follows; the file is never cut to meet it.
func (p *Pager) SetMaxSize(size int64) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.maxSize = max(size, 0)
}

// Truncate cuts the file to size bytes if it is longer, so that pages past
// size are given back to the file system. The caller guarantees that no
// state that can still be read or recovered reaches past size (docs/design.md
// §4.1), and holds off every write that could grow the file meanwhile:
// mappings may stay longer than the file, and nothing reads them past its
// end.
func (p *Pager) Truncate(size int64) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.waitPiece()
	p.cutMu.Lock()
	defer p.cutMu.Unlock()
	if err := p.writable(); err != nil {
		return err
	}
	cur, err := p.f.Size()
	if err != nil {
		return err
	}
	return p.truncate(cur, size)
}

// BeginCut starts cutting the file down to size bytes, a piece per Cut,
// while writes go on between the pieces. The caller guarantees, as for
// Truncate, that nothing that can be read or recovered reaches past size
// when it calls BeginCut, with every write that could grow the file held
// off until it returns; after that the pager keeps what is written or
// mapped: Cut never goes below the end of a run WriteRuns wrote or of a
// high-water mark EnsureMapped mapped since.
func (p *Pager) BeginCut(size int64) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.cutting = true
	p.cutFloor = size
}

// Cut cuts at most chunk bytes (a positive number) off the file toward
// the size BeginCut set, raised by what was written or mapped since; more
// reports that the file is still longer than that. Once Cut returns with
// more false, the cut is over: a later one needs BeginCut again. A grow
// waits for a Cut in progress (cutMu); writes below the cut do not, here,
// though the kernel may serialise them with the file's size change.
func (p *Pager) Cut(chunk int64) (more bool, err error) {
	p.wmu.Lock()
	p.waitPiece()
	if err := p.writable(); err != nil {
		p.wmu.Unlock()
		return false, err
	}
	if !p.cutting {
		p.wmu.Unlock()
		return false, nil
	}
	cur, err := p.f.Size()
	if err != nil {
		p.wmu.Unlock()
		return false, err
	}
	to := p.cutFloor
	if cur-to > chunk {
		to = max(cur-chunk-(cur-chunk)%p.ps, p.cutFloor)
		more = true
	}
	if to >= cur {
		p.cutting = more
		p.wmu.Unlock()
		return more, nil
	}
	// Pages past the end are free in every state that can be read, and
	// size comes down before the file does, so a grow from now on waits
	// for the cut (cutMu) before it extends the file.
	p.dirty.DropFrom(page.ID((to + p.ps - 1) / p.ps))
	p.size.Store(to)
	p.cutMu.Lock()
	p.wmu.Unlock()
	err = p.waitHold()
	if err == nil {
		err = p.f.Truncate(to)
	}
	p.cutMu.Unlock()
	if err != nil {
		// The file may be anything from to to cur bytes long: size stays
		// at to, below it, and a grow asks the file again.
		return false, err
	}
	p.wmu.Lock()
	p.cutting = more && p.cutting
	p.wmu.Unlock()
	return more, nil
}

// writeHold is a hold on the file's writes (HoldWrites): done is closed
// when it ends, and err then says why writes fail, if they must.
type writeHold struct {
	done chan struct{}
	err  error
}

// HoldWrites makes every write and every cut of the file from now on
// wait until release is called; if release is given an error, they fail
// with it from then on. Growing the file does not wait: it changes no
// byte a reader or a crash can find. Open holds writes while the flush of
// a state recovered from the page cache runs (docs/design.md §3.4).
func (p *Pager) HoldWrites() (release func(error)) {
	h := &writeHold{done: make(chan struct{})}
	p.hold.Store(h)
	return func(err error) {
		h.err = err
		if err == nil {
			p.hold.CompareAndSwap(h, nil)
		}
		close(h.done)
	}
}

// waitHold waits for a hold on writes to end (HoldWrites) and returns the
// error it ended with.
func (p *Pager) waitHold() error {
	h := p.hold.Load()
	if h == nil {
		return nil
	}
	<-h.done
	return h.err
}

// waitPiece waits, with wmu held, until no piece of the dirty table is
// being written without it (pieceBusy).
func (p *Pager) waitPiece() {
	for p.pieceBusy {
		p.pieceDone.Wait()
	}
}

// writable returns why the pager cannot change the file, if it cannot.
// The caller holds wmu.
func (p *Pager) writable() error {
	if p.closed.Load() {
		return ErrClosed
	}
	if p.readOnly {
		return rerrors.ErrDatabaseReadOnly
	}
	return nil
}

// truncate cuts the file, cur bytes long, to size bytes if that is
// shorter. The caller holds wmu and cutMu.
func (p *Pager) truncate(cur, size int64) error {
	if size >= cur {
		return nil
	}
	if err := p.waitHold(); err != nil {
		return err
	}
	if err := p.f.Truncate(size); err != nil {
		return err
	}
	// Pages past the end are free in every state that can be read.
	p.dirty.DropFrom(page.ID((size + p.ps - 1) / p.ps))
	// The cache only rises elsewhere; here it must come down with the file.
	p.size.Store(size)
	return nil
}

// nextPowerOfTwo returns the smallest power of two >= n (n > 0).
func nextPowerOfTwo(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// WriteRuns writes page runs. Each run's Data must be a positive multiple of
// the page size; runs must not overlap. Runs need not be sorted: WriteRuns
// orders them by page id (in its own buffer; runs is not modified) and writes
// each group of adjacent runs (one ending where the next begins) as one
// contiguous extent (see writeExtent), counted as one write call in Stats. A
// group is capped at MaxCoalescedWrite bytes unless a single run is larger.
//
// Pages at least as large as the OS page are written straight from the
// runs' buffers: writeExtent cuts an extent at page boundaries anyway, so
// copying a group into one buffer first would only cost a copy and keep a
// buffer as large as the largest commit alive. Smaller pages are copied
// into a scratch buffer so that they reach the file in OS-page-sized writes;
// that buffer is kept between calls only while it is small (maxKeptScratch).
//
// The file is grown (see Grow) to cover every run before anything is
// written. Errors from the file are returned as they are; after one, some
// runs may have been written and others not (the caller latches).
func (p *Pager) WriteRuns(runs []page.Run) error {
	_, _, err := p.writeRuns(runs)
	return err
}

// WriteRunsAndStart is WriteRuns followed by a hint that the file start
// sending the range the runs span to storage now (vfs.Writebacker), for a
// flush that will follow: the flush then finds less left to write. It is
// meant for runs written while a commit is still being prepared.
//
// The hint is given from a goroutine of the Pager's: the call can block
// while the kernel queues the writes (measured: ~10 ms of a 11 MB commit's
// 2,700 pages when the writer gave it), and the writer has a commit to
// finish meanwhile. A hint that finds the goroutine busy is dropped.
func (p *Pager) WriteRunsAndStart(runs []page.Run) error {
	lo, hi, err := p.writeRuns(runs)
	if err != nil || hi <= lo || p.noWriteback.Load() {
		return err
	}
	wb, ok := p.f.(vfs.Writebacker)
	if !ok {
		p.noWriteback.Store(true)
		return nil
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed.Load() {
		return nil
	}
	if p.wbRanges == nil {
		p.wbRanges = make(chan [2]int64, 64)
		p.wbDone = make(chan struct{})
		go func(ranges <-chan [2]int64, done chan<- struct{}) {
			defer close(done)
			for r := range ranges {
				if !p.noWriteback.Load() && wb.StartWriteback(r[0], r[1]-r[0]) != nil {
					// Not supported by this file system: the flush does
					// it all.
					p.noWriteback.Store(true)
				}
			}
		}(p.wbRanges, p.wbDone)
	}
	select {
	case p.wbRanges <- [2]int64{lo, hi}:
	default:
	}
	return nil
}

// WaitWriteback writes the file's dirty pages back and waits for them,
// where the file can (vfs.WritebackWaiter): a caller that writes much
// outside any flush (compaction) keeps the dirty data it leaves bounded.
// It makes nothing durable, and a file that cannot do it is left to the
// kernel and the next flush.
func (p *Pager) WaitWriteback() {
	if w, ok := p.f.(vfs.WritebackWaiter); ok && !p.closed.Load() {
		_ = w.WaitWriteback(0, 0)
	}
}

// WaitWritebackRange writes the dirty pages of [lo, hi) back and waits for
// them, as WaitWriteback does for the whole file. It reports false when
// the file cannot (vfs.WritebackWaiter) or the hint failed.
func (p *Pager) WaitWritebackRange(lo, hi int64) bool {
	w, ok := p.f.(vfs.WritebackWaiter)
	if !ok || p.closed.Load() || hi <= lo {
		return false
	}
	return w.WaitWriteback(lo, hi-lo) == nil
}

// writeRuns is WriteRuns; it returns the byte range the runs span.
func (p *Pager) writeRuns(runs []page.Run) (lo, hi int64, err error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.waitPiece()
	lo, hi, err = p.writeRunsLocked(runs)
	if err == nil {
		// What was just written is newer than any entry for its pages.
		for _, r := range runs {
			p.dirty.Drop(r.ID, uint64(int64(len(r.Data))/p.ps))
		}
	}
	return lo, hi, err
}

// writeRunsLocked is writeRuns with wmu held, leaving the dirty table
// alone.
func (p *Pager) writeRunsLocked(runs []page.Run) (lo, hi int64, err error) {
	if len(runs) == 0 {
		if err := p.writable(); err != nil {
			return 0, 0, err
		}
		return 0, 0, nil
	}
	sorted := append(p.sorted[:0], runs...)
	defer func() {
		// Drop the references to the callers' buffers.
		clear(sorted)
		p.sorted = nil
		if cap(sorted) <= maxKeptRuns {
			p.sorted = sorted[:0]
		}
	}()
	if !slices.IsSortedFunc(sorted, page.CompareRuns) {
		slices.SortFunc(sorted, page.CompareRuns)
	}
	if lo, hi, err = p.prepareWrite(sorted); err != nil {
		return 0, 0, err
	}
	if err := p.writeSorted(sorted, &p.scratch); err != nil {
		return 0, 0, err
	}
	return lo, hi, nil
}

// prepareWrite checks runs sorted by page id for a write — each a positive
// multiple of the page size, within the largest offset, none overlapping —
// and grows the file to cover them. It returns the byte range they span.
// The caller holds wmu.
func (p *Pager) prepareWrite(sorted []page.Run) (lo, hi int64, err error) {
	if err := p.writable(); err != nil {
		return 0, 0, err
	}
	var end int64
	for i, r := range sorted {
		if len(r.Data) == 0 || int64(len(r.Data))%p.ps != 0 {
			return 0, 0, fmt.Errorf("pager: run at page %d is %d bytes, not a positive multiple of the page size %d", r.ID, len(r.Data), p.ps)
		}
		off, ok := p.pageOffset(r.ID)
		if !ok || off > maxOffset-int64(len(r.Data)) {
			return 0, 0, fmt.Errorf("pager: run at page %d lies past the largest file offset", r.ID)
		}
		if i > 0 && off < end {
			prev := sorted[i-1]
			return 0, 0, fmt.Errorf("pager: run at page %d overlaps the run at page %d (%d pages)", r.ID, prev.ID, int64(len(prev.Data))/p.ps)
		}
		end = off + int64(len(r.Data))
	}
	if err := p.grow(end); err != nil {
		return 0, 0, err
	}
	lo, _ = p.pageOffset(sorted[0].ID)
	return lo, end, nil
}

// writeSorted writes runs that prepareWrite checked, each group of
// adjacent ones as one extent, with *scratch as the buffer for pages
// smaller than the OS page. The caller holds wmu, or is the piece
// writeDeferredPiece marked busy (with pieceScratch).
func (p *Pager) writeSorted(sorted []page.Run, scratch *[]byte) error {
	for i := 0; i < len(sorted); {
		first := sorted[i]
		total := len(first.Data)
		j := i + 1
		for j < len(sorted) &&
			sorted[j].ID == sorted[j-1].ID+uint64(len(sorted[j-1].Data))/uint64(p.ps) &&
			total+len(sorted[j].Data) <= MaxCoalescedWrite {
			total += len(sorted[j].Data)
			j++
		}
		off, _ := p.pageOffset(first.ID)
		p.writeCalls.Add(1)
		if err := p.writeGroup(sorted[i:j], total, off, scratch); err != nil {
			return err
		}
		p.pagesWritten.Add(int64(total) / p.ps)
		p.bytesWritten.Add(int64(total))
		i = j
	}
	if cap(*scratch) > maxKeptScratch {
		*scratch = nil
	}
	return nil
}

// maxKeptScratch is the largest scratch buffer WriteRuns keeps for the next
// call. One-key commits need a few pages; a bulk load's megabytes are
// allocated for that commit and then left to the garbage collector rather
// than held for the life of the DB.
const maxKeptScratch = 64 << 10

// maxKeptRuns bounds the sorted copy of the runs WriteRuns keeps for the
// next call: a one-key commit writes a handful of runs, while a bulk load's
// hundreds of thousands would otherwise stay allocated for the life of the
// file.
const maxKeptRuns = 1024

// writeGroup writes a group of adjacent runs, total bytes starting at byte
// off, as one extent, copying them into *scratch if pages are smaller than
// the OS page.
func (p *Pager) writeGroup(group []page.Run, total int, off int64, scratch *[]byte) error {
	if len(group) == 1 {
		return p.writeExtent(group[0].Data, off)
	}
	if p.ps >= osPageSize {
		// Every pwrite writeExtent issues covers exactly one page, so the
		// runs can be written one after the other from their own buffers:
		// the same system calls as for a copy of the whole group.
		for _, r := range group {
			if err := p.writeExtent(r.Data, off); err != nil {
				return err
			}
			off += int64(len(r.Data))
		}
		return nil
	}
	if cap(*scratch) < total {
		*scratch = make([]byte, 0, max(total, min(2*cap(*scratch), maxKeptScratch)))
	}
	buf := (*scratch)[:0]
	for _, r := range group {
		buf = append(buf, r.Data...)
	}
	return p.writeExtent(buf, off)
}

// writeExtent writes one contiguous extent as page-sized pwrites (at least
// the OS page size, aligned to it).
//
// Why not one pwrite per extent: Linux (seen on 6.18, ext4) backs a
// buffered write with page-cache folios as large as the write, and a later
// small write into such a folio writes the whole folio back. Copy-on-write
// reuses freed pages one by one, so a file first written in large extents
// then sent up to 140x more bytes to storage than rivet wrote (measured:
// 100 random 4 KiB updates after 1 MiB initial writes cost 51,814 KiB of
// write_bytes per flush; after 4 KiB initial writes, 399 KiB). The extent
// is still contiguous on disk: only the system calls are split.
func (p *Pager) writeExtent(buf []byte, off int64) error {
	if err := p.waitHold(); err != nil {
		return err
	}
	chunk := p.ps
	if chunk < osPageSize {
		chunk = osPageSize
	}
	for len(buf) > 0 {
		n := chunk - off%chunk // up to the next aligned boundary
		if n > int64(len(buf)) {
			n = int64(len(buf))
		}
		w, err := p.f.WriteAt(buf[:n], off)
		if err == nil && int64(w) != n {
			err = io.ErrShortWrite
		}
		if err != nil {
			return err
		}
		buf, off = buf[n:], off+n
	}
	return nil
}

// osPageSize is the page-cache granularity writes are aligned to.
var osPageSize = int64(os.Getpagesize())

// Sync flushes the file with the given primitive. Its error is returned as it
// is; the caller must not trust a retry (docs/design.md §3.1 step 6).
//
// Sync does not take the write lock: a flush runs while later commits write
// their pages (group commit depends on it). It makes durable every write
// that completed before it was called; writes running concurrently may or
// may not be included, and callers do not count on them.
func (p *Pager) Sync(kind vfs.SyncKind) error {
	if p.closed.Load() {
		return ErrClosed
	}
	if p.readOnly {
		return rerrors.ErrDatabaseReadOnly
	}
	p.flushes.Add(1)
	return p.f.Sync(kind)
}

// Stats returns the I/O counters. It may be called at any time, also after
// Close.
func (p *Pager) Stats() Stats {
	return Stats{
		WriteCalls:   p.writeCalls.Load(),
		PagesWritten: p.pagesWritten.Load(),
		BytesWritten: p.bytesWritten.Load(),
		Flushes:      p.flushes.Load(),
		PagesRead:    p.pagesRead.Load(),
		Remaps:       p.remaps.Load(),
	}
}

// Close releases the current mapping; mappings still referenced by Views are
// unmapped when those are released. It does not close the file. It returns
// the first error from unmapping so far. Closing twice is a no-op.
func (p *Pager) Close() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.waitPiece()
	// A cut in progress finishes before the file closes.
	p.cutMu.Lock()
	defer p.cutMu.Unlock()
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	if p.wbRanges != nil {
		// The file is closed after the Pager: no hint may reach it then.
		close(p.wbRanges)
		<-p.wbDone
		p.wbRanges = nil
	}
	p.mu.Lock()
	cur := p.cur
	p.cur = nil
	p.mu.Unlock()
	if cur != nil {
		cur.mp.release()
	}
	p.scratch, p.sorted = nil, nil
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.unmapErr
}

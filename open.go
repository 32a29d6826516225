package rivet

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/pager"
	"github.com/rivetkv/rivet/internal/spacemap"
	"github.com/rivetkv/rivet/internal/vfs"
)

func pointerOf(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// Open opens the database file at path, creating it with mode if it does not
// exist. It reads the two meta pages and, if the last commit may be torn,
// the pages that commit wrote — nothing proportional to the file's size.
//
// A file another process holds for writing makes Open wait (Options.Timeout,
// zero = forever) and then fail with errors.ErrTimeout.
func Open(path string, mode os.FileMode, options *Options) (*DB, error) {
	fs := vfs.OS()
	if options != nil && options.OpenFile != nil {
		fs = vfs.OSWithOpener(path, options.OpenFile)
	}
	return openFS(fs, path, mode, options)
}

// openFS opens a database through a file seam (tests pass in-memory and
// crash-simulating file systems).
func openFS(fs vfs.FS, path string, mode os.FileMode, options *Options) (*DB, error) {
	if options == nil {
		options = DefaultOptions
	}
	opts := *options
	if s := opts.LocalitySlack; !(s >= 0 && s <= maxLocalitySlack) {
		return nil, fmt.Errorf("rivet: Options.LocalitySlack %v is out of range: it must be from 0 to %v", s, maxLocalitySlack)
	}
	for attempt := 1; ; attempt++ {
		db, err := openFile(fs, path, mode, opts)
		if err != errPathMoved && err != errConverted {
			return db, err
		}
		// The bbolt file at path was converted, by this Open or by
		// another process while this one waited for the lock: open what
		// the path holds now. Each round follows a rename over path, so
		// only files renamed over and over keep it going.
		if attempt >= maxOpenAttempts {
			return nil, fmt.Errorf("rivet: %s was replaced %d times while opening it", path, attempt)
		}
	}
}

// maxOpenAttempts bounds Open's rounds (see openFS): one conversion takes
// two.
const maxOpenAttempts = 8

// openFile opens, locks and loads the file at path once.
func openFile(fs vfs.FS, path string, mode os.FileMode, opts Options) (*DB, error) {
	db := newDB(fs, path, mode, opts)
	flag := os.O_RDWR | os.O_CREATE
	if db.readOnly {
		flag = os.O_RDONLY
	}
	f, err := fs.OpenFile(path, flag, mode)
	if err != nil {
		return nil, err
	}
	db.file = f
	if err := lockWithTimeout(f, !db.readOnly, opts.Timeout); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := db.load(fs); err != nil {
		// The flush Open may have started in the background.
		db.bgSyncs.Wait()
		_ = f.Unlock()
		_ = f.Close()
		return nil, err
	}
	return db, nil
}

// newDB returns a DB for the file at path, not yet opened.
func newDB(fs vfs.FS, path string, mode os.FileMode, opts Options) *DB {
	db := &DB{
		fs:             fs,
		mode:           mode,
		path:           path,
		opts:           opts,
		readOnly:       opts.ReadOnly,
		NoSync:         opts.NoSync,
		NoGrowSync:     opts.NoGrowSync,
		NoFreelistSync: opts.NoFreelistSync,
		FreelistType:   opts.FreelistType,
		MmapFlags:      opts.MmapFlags,
		MaxSize:        opts.MaxSize,
		Mlock:          opts.Mlock,
		MaxBatchSize:   DefaultMaxBatchSize,
		MaxBatchDelay:  DefaultMaxBatchDelay,
		AllocSize:      DefaultAllocSize,
		logger:         opts.Logger,
	}
	if db.logger == nil {
		db.logger = discardLogger{}
	}
	db.noSync.Store(db.NoSync)
	db.maxSizeApplied = db.MaxSize
	db.syncCond = sync.NewCond(&db.syncMu)
	return db
}

func lockWithTimeout(f vfs.File, exclusive bool, timeout time.Duration) error {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		err := f.TryLock(exclusive)
		if err == nil {
			return nil
		}
		if !errors.Is(err, vfs.ErrLocked) {
			return err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return rerrors.ErrTimeout
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// load reads or creates the file's state.
func (db *DB) load(fs vfs.FS) error {
	size, err := db.file.Size()
	if err != nil {
		return err
	}
	var metas [2]*page.Meta
	var errs [2]error
	if size > 0 {
		// A bbolt file (load tells it apart below and reads it) has no
		// rivet meta 1 to look for at every page size.
		metas, errs = page.ReadMetas(db.openReader(), size, boltfile.IsMetaPage)
	}
	for _, e := range errs {
		// A meta of a newer format means a newer rivet wrote this file; the
		// other meta is then an older state of it (or of the format it came
		// from), and opening at that one would roll back, and then
		// overwrite, what the newer build committed.
		if errors.Is(e, rerrors.ErrVersionMismatch) {
			return e
		}
	}
	if metas[0] == nil && metas[1] == nil {
		// A bbolt file is read, converted or refused (loadBboltFile); it
		// is told apart by a few bytes, before the scan for zeros below
		// reads up to a megabyte.
		if size > 0 && db.isBboltFile() {
			return db.loadBboltFile(size)
		}
		// A file that never committed a state is created afresh: an empty
		// file, or one that is all zeros (a crash before creation's first
		// flush). Anything else without a valid meta is refused.
		if size == 0 || db.allZero(size) {
			if db.readOnly {
				return fmt.Errorf("%w: file has no committed state and is opened read-only", rerrors.ErrInvalid)
			}
			return db.create(fs)
		}
		// bbolt returns ErrInvalid itself here and callers compare with ==,
		// so the details go to the log rather than into a wrapped error.
		db.logger.Errorf("%s: no valid meta page: meta 0: %v; meta 1: %v", db.path, errs[0], errs[1])
		return rerrors.ErrInvalid
	}
	ps := 0
	for _, m := range metas {
		if m != nil {
			ps = m.PageSize
		}
	}
	db.pageSize = ps
	if size < int64(page.MinPages)*int64(ps) {
		// Creation makes the file page.MinPages pages long before it writes
		// a meta (see create), so a shorter file with a valid meta was cut:
		// its maps, and perhaps its data, are gone. bbolt's words.
		return fmt.Errorf("%w: file size too small: %d bytes, but a file with %d-byte pages is at least %d", rerrors.ErrInvalid, size, ps, int64(page.MinPages)*int64(ps))
	}
	p, err := pager.Open(db.file, pager.Options{PageSize: ps, InitialMmapSize: int64(db.opts.InitialMmapSize), MaxSize: int64(max(db.maxSizeApplied, 0)), ReadOnly: db.readOnly})
	if err != nil {
		return err
	}
	db.pager = p
	meta, slot, rec, err := db.recover(metas, errs, size)
	if err == errCreationTorn && !db.readOnly {
		// Creation crashed after its first flush: the file never held a
		// committed state (see create). Start again.
		_ = p.Close()
		db.pager = nil
		return db.create(fs)
	}
	if err == errCreationTorn {
		err = fmt.Errorf("%w: %v (opened read-only, so not created again)", rerrors.ErrInvalid, err)
	}
	if err != nil {
		_ = p.Close()
		return err
	}
	db.noteDamagedMeta(metas, errs, slot, &rec)
	db.recovered = rec
	db.slotMeta = metas
	db.openedMetaErrs = errs
	return db.start(meta, slot, false)
}

// start publishes meta as the current state and prepares the writer.
// durable says the file's state is known to be on stable storage (create
// has just flushed it).
func (db *DB) start(meta *page.Meta, slot int, durable bool) error {
	if err := db.pager.EnsureMapped(meta.HWM); err != nil {
		return err
	}
	space, err := spacemap.New(spacemap.Config{
		PageSize:        db.pageSize,
		HWM:             meta.HWM,
		Txid:            meta.Txid,
		Selector:        meta.Selector,
		FirstFreeRegion: meta.FirstFreeRegion,
		FreePages:       meta.FreePages,
		Delta:           meta.Delta,
		MaxPages:        maxPagesFor(db.pageSize, db.maxSizeApplied),
		Loader:          db.pager,
	})
	if err != nil {
		return err
	}
	space.SetLocalitySlack(db.opts.LocalitySlack)
	db.space = space
	db.head = meta
	db.base = meta
	db.durable = meta.Txid
	db.durableSlot = slot
	db.lastFullSync = time.Now()
	db.flushed = meta.Txid
	db.spaceStats = space.Stats()
	if !db.readOnly && !durable && meta.Txid != meta.Steady {
		// The state may have been recovered from the page cache after a
		// process crash: make it durable before anything builds on it.
		// Until the flush is done, no byte of the file changes (the
		// pager holds every write and cut), so a crash meanwhile finds
		// the file as this Open did; Open itself writes nothing and does
		// not wait. A clean-close meta (txid == steady, see
		// writeCleanMeta) needs no flush: Close wrote it only after the
		// state it describes was durable, and if the meta itself was
		// not, the previous one describes the same state.
		// Until it is done only the previous sync point counts as
		// flushed, so a Sync meanwhile makes a flush of its own.
		db.flushed = meta.Steady
		release := db.pager.HoldWrites()
		db.bgSyncs.Add(1)
		go func() {
			defer db.bgSyncs.Done()
			err := db.pager.Sync(vfs.SyncData)
			if err != nil {
				err = db.latch(fmt.Errorf("rivet: flushing the state recovered at Open: %w", err))
			} else {
				db.syncMu.Lock()
				db.flushed = max(db.flushed, meta.Txid)
				db.syncMu.Unlock()
			}
			release(err)
		}()
	}
	if !db.readOnly {
		// A tail that no meta on disk reaches (a Compact whose cut had to
		// wait, growth slack far beyond the usual) goes back now: nothing
		// else runs yet.
		if err := db.truncateSlack(); err != nil {
			return err
		}
	}
	// Last, so that a failure above leaves no view held.
	db.readers.Open(meta, db.pager.Acquire())
	db.mu.Lock()
	db.opened = true
	db.mu.Unlock()
	if err := db.startJournal(meta); err != nil {
		db.closeJournal()
		return err
	}
	if !db.readOnly {
		// Periodic even under NoSync: the program may clear NoSync later
		// (the syncer skips its ticks while NoSync is in force).
		if d := db.opts.Durability; d.mode == modePeriodic {
			db.bgStop = make(chan struct{})
			db.bgDone = make(chan struct{})
			go db.periodicSyncer(d.interval)
		}
		if ac := db.opts.AutoCompact; ac != nil {
			db.compactStop = make(chan struct{})
			db.compactDone = make(chan struct{})
			go db.autoCompactor(*ac)
		}
	}
	return nil
}

// maxLocalitySlack bounds Options.LocalitySlack: a file at least a tenth
// live.
const maxLocalitySlack = 0.9

// errCreationTorn is recover's verdict on a file whose creation crashed
// after meta 0 was flushed but before the rest was.
var errCreationTorn = errors.New("rivet: file creation did not finish")

// allZero reports whether the file holds only zero bytes: what a crash
// before creation's first flush leaves. Files over 64 MiB are not scanned
// (creation never writes that much), so a damaged large file is refused
// rather than read in full.
func (db *DB) allZero(size int64) bool {
	const limit = 64 << 20
	if size > limit {
		return false
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		if _, err := db.readAt(buf[:n], off); err != nil || !page.IsZeroPage(buf[:n]) {
			return false
		}
	}
	return true
}

// countingReaderAt counts in *n the bytes read through it: what Open reads
// before the pager exists, for the statistics.
type countingReaderAt struct {
	r io.ReaderAt
	n *int64
}

// openReader returns the file as Open reads it before the pager exists.
func (db *DB) openReader() io.ReaderAt { return countingReaderAt{db.file, &db.metaReadBytes} }

func (c countingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	*c.n += int64(n)
	return n, err
}

// readAt reads len(b) bytes at off for Open, before the pager exists, and
// counts them in the statistics.
func (db *DB) readAt(b []byte, off int64) (int, error) {
	n, err := db.openReader().ReadAt(b, off)
	if err == io.EOF && n == len(b) {
		err = nil
	}
	if err == io.EOF {
		err = page.Corruptf(uint64(off/page.MinPageSize), "file ends inside a meta page")
	}
	return n, err
}

// recover chooses the state to open at (docs/design.md §3.4).
func (db *DB) recover(metas [2]*page.Meta, errs [2]error, size int64) (*page.Meta, int, Recovery, error) {
	newest, other := 0, 1
	if metas[0] == nil || (metas[1] != nil && metas[1].Txid > metas[0].Txid) {
		newest, other = 1, 0
	}
	m := metas[newest]
	rec := Recovery{Txid: m.Txid}
	reason := db.verify(m, size, &rec)
	if reason == nil {
		return m, newest, rec, nil
	}
	o := metas[other]
	if m.Steady == 0 && (o == nil || o.Steady != 0 || db.verify(o, size, &rec) != nil) {
		// Only creation writes a meta with steady txid 0 (see create);
		// if no creation meta verifies, creation never finished.
		return nil, 0, rec, errCreationTorn
	}
	if m.Steady == 0 {
		return o, other, rec, nil
	}
	if o == nil || o.Txid != m.Steady {
		why := errs[other]
		if o != nil {
			why = fmt.Errorf("other meta is txn %d, not the steady txn %d", o.Txid, m.Steady)
		}
		return nil, 0, rec, fmt.Errorf("newest meta (txn %d) failed verification (%w) and there is no steady meta to fall back to: %v", m.Txid, reason, why)
	}
	if oreason := db.verify(o, size, &rec); oreason != nil {
		return nil, 0, rec, fmt.Errorf("both meta states fail verification: txn %d: %v; txn %d: %w", m.Txid, reason, o.Txid, oreason)
	}
	db.logger.Warningf("last commit (txn %d) is incomplete (%v); opened at txn %d", m.Txid, reason, o.Txid)
	rec.Txid = o.Txid
	rec.FellBack = true
	rec.Reason = reason.Error()
	return o, other, rec, nil
}

// noteDamagedMeta records, in rec and the log, a meta page that failed
// validation while Open used the one in slot. A cleanly written file has two
// valid metas (creation writes both), so an invalid one was torn by a crash
// or damaged afterwards; if it was the newer, the commit it described is
// gone, and the user must hear of it rather than find the data missing.
func (db *DB) noteDamagedMeta(metas [2]*page.Meta, errs [2]error, slot int, rec *Recovery) {
	bad := 1 - slot
	if metas[bad] != nil || errs[bad] == nil {
		return
	}
	buf := make([]byte, page.MinPageSize)
	claimed, readable := uint64(0), false
	if _, err := db.readAt(buf, int64(bad)*int64(db.pageSize)); err == nil {
		claimed, readable = page.ClaimedTxid(buf)
	}
	opened := metas[slot].Txid
	claim := "unreadable"
	if readable {
		claim = fmt.Sprintf("txn %d", claimed)
	}
	rec.DamagedMeta = fmt.Sprintf("meta %d (claims %s) is damaged: %v", bad, claim, errs[bad])
	if !readable || claimed > opened {
		db.logger.Warningf("%s: %s; opened at txn %d from meta %d: commits after txn %d may be lost", db.path, rec.DamagedMeta, opened, slot, opened)
		if !rec.FellBack {
			rec.FellBack = true
			rec.Reason = rec.DamagedMeta
		}
		return
	}
	db.logger.Warningf("%s: %s; it is older than txn %d, opened from meta %d, so nothing is lost", db.path, rec.DamagedMeta, opened, slot)
}

// verify reads what sync point m wrote after its steady txid and checks it
// against m: node and blob runs against their parents' checksums, and the
// map slots of the regions m changed. Pages older than m.Steady were flushed
// by a completed sync point and are not read.
func (db *DB) verify(m *page.Meta, size int64, rec *Recovery) error {
	ps := db.pageSize
	if uint64(size) < m.HWM*uint64(ps) {
		return page.Corruptf(0, "file is %d bytes, state %d needs %d", size, m.Txid, m.HWM*uint64(ps))
	}
	if m.Txid == m.Steady {
		return nil
	}
	// The pages are read through the map, which covers the whole state
	// now that the file is known to: a page fault each, not a system call,
	// a copy and an allocation.
	if err := db.pager.EnsureMapped(m.HWM); err != nil {
		return err
	}
	view := db.pager.Acquire()
	defer view.Release()
	mapped := view.Bytes()
	var verified atomic.Int64
	defer func() { rec.PagesVerified += int(verified.Load()) }()
	w := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			verified.Add(int64(n))
			if n <= m.HWM && uint64(id) <= m.HWM-n && (uint64(id)+n)*uint64(ps) <= uint64(len(mapped)) {
				lo, hi := uint64(id)*uint64(ps), (uint64(id)+n)*uint64(ps)
				return mapped[lo:hi:hi], nil
			}
			return db.pager.ReadPages(id, n)
		},
		PageSize:        ps,
		HWM:             m.HWM,
		MinTxid:         m.Steady,
		VerifyChecksums: true,
		// Reading through the map, a page costs its fault and its
		// checksum, both of which two processors share.
		Workers: 2,
	}
	if err := w.Walk(m.Root); err != nil {
		return err
	}
	for r := uint64(0); r < m.RegionCount(); r++ {
		if !page.BitmapGet(m.Changed, r) {
			continue
		}
		s := 0
		if page.BitmapGet(m.Selector, r) {
			s = 1
		}
		slot := page.MapSlot(ps, r, s)
		buf, err := db.pager.ReadPages(slot, 1)
		if err != nil {
			return err
		}
		rec.PagesVerified++
		txid, _, err := page.DecodeRegionMap(buf, ps, slot)
		if err != nil {
			return err
		}
		if txid != m.Txid {
			return page.Corruptf(slot, "region %d map written by txn %d, meta txn %d changed it", r, txid, m.Txid)
		}
	}
	return nil
}

// create initialises an empty file in three flushes:
//
//  0. the file's length, at least page.MinPages pages, with nothing in it;
//  1. meta 0, the "creation meta": txid 1, steady txid 0, region 0 marked
//     changed, so recovery verifies region 0's map before trusting it;
//  2. region 0's map (slot A) and meta 1, a copy of meta 0.
//
// A crash before flush 1 leaves a file of zeros (Open creates it again); a
// crash between flushes 1 and 2 leaves a creation meta whose map does not
// verify, which recovery also reads as "never created". No other meta has
// steady txid 0, so neither case can be taken for a file that held data.
// Flush 0 makes the length durable before any meta exists, so that a file
// shorter than page.MinPages pages that holds a valid meta is damaged, never
// a creation cut short (load refuses it; see TestOpenFileTooSmall).
func (db *DB) create(fs vfs.FS) error {
	ps := db.opts.PageSize
	if ps == 0 {
		ps = os.Getpagesize()
	}
	if !page.ValidPageSize(ps) {
		return fmt.Errorf("rivet: page size %d is not supported: it must be a power of two from %d to %d bytes", ps, page.MinPageSize, page.MaxPageSize)
	}
	db.pageSize = ps
	p, err := pager.Open(db.file, pager.Options{PageSize: ps, InitialMmapSize: int64(db.opts.InitialMmapSize), MaxSize: int64(max(db.maxSizeApplied, 0))})
	if err != nil {
		return err
	}
	db.pager = p
	const txid = 1
	meta := &page.Meta{
		PageSize:    ps,
		Txid:        txid,
		Steady:      0,
		HWM:         page.MinPages,
		RegionPages: page.RegionPages(ps),
		Selector:    make([]byte, 1),
		Changed:     []byte{1},
	}
	metaBuf := make([]byte, ps)
	page.EncodeMeta(metaBuf, meta)
	mapBuf := make([]byte, ps)
	page.EncodeRegionMap(mapBuf, ps, page.MapSlot(ps, 0, 0), txid, make([]uint64, page.RegionMapWords(ps)))
	if err := p.Grow(page.MinPages); err != nil {
		return err
	}
	if err := p.Sync(vfs.SyncData); err != nil {
		return err
	}
	steps := [][]page.Run{
		{{ID: 0, Data: metaBuf}},
		{{ID: 1, Data: metaBuf}, {ID: page.MapSlot(ps, 0, 0), Data: mapBuf}, {ID: page.MapSlot(ps, 0, 1), Data: make([]byte, ps)}},
	}
	for _, runs := range steps {
		if err := p.WriteRuns(runs); err != nil {
			return err
		}
		if err := p.Sync(vfs.SyncData); err != nil {
			return err
		}
	}
	vfs.SyncParentDir(fs, db.path)
	m, err := page.DecodeMeta(0, metaBuf)
	if err != nil {
		return err
	}
	db.slotMeta = [2]*page.Meta{m, m}
	return db.start(m, 0, true)
}

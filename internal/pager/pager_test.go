package pager

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

const ps = 4096

// smallMaps keeps mappings and growth small, so in-memory files stay cheap
// and tests cross mapping boundaries quickly.
var smallMaps = Options{PageSize: ps, InitialMmapSize: 16 * ps, GrowSize: 8 * ps}

// backend is a file system the pager tests run on.
type backend struct {
	name string
	open func(t *testing.T, fs func(vfs.FS) vfs.FS) vfs.File
}

func backends() []backend {
	return []backend{
		{"Mem", func(t *testing.T, wrap func(vfs.FS) vfs.FS) vfs.File {
			return openFile(t, wrap(vfs.NewMem()), "db")
		}},
		{"OS", func(t *testing.T, wrap func(vfs.FS) vfs.FS) vfs.File {
			return openFile(t, wrap(vfs.OS()), filepath.Join(t.TempDir(), "db"))
		}},
	}
}

func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

func openFile(t *testing.T, fs vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func identity(fs vfs.FS) vfs.FS { return fs }

func mustOpen(t *testing.T, f vfs.File, opts Options) *Pager {
	t.Helper()
	p, err := Open(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// pageBytes returns n pages of content identifying each page: the page id in
// the first 8 bytes, then a fill byte derived from id and tag.
func pageBytes(id page.ID, n int, tag byte) []byte {
	b := make([]byte, n*ps)
	for i := 0; i < n; i++ {
		pg := b[i*ps : (i+1)*ps]
		for j := range pg {
			pg[j] = byte(id+uint64(i)) ^ tag
		}
		binary.LittleEndian.PutUint64(pg, id+uint64(i))
	}
	return b
}

func TestOpenValidatesAndReadsNothing(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	f := openFile(t, c, "db")
	for _, bad := range []Options{
		{PageSize: 0}, {PageSize: 3000}, {PageSize: 512}, {PageSize: 128 << 10},
		{PageSize: ps, InitialMmapSize: -1}, {PageSize: ps, GrowSize: -1}, {PageSize: ps, MaxSize: -1},
	} {
		if _, err := Open(f, bad); err == nil {
			t.Errorf("Open(%+v) succeeded", bad)
		}
	}
	if _, err := Open(nil, Options{PageSize: ps}); err == nil {
		t.Error("Open(nil) succeeded")
	}
	p := mustOpen(t, f, Options{PageSize: ps})
	if p.PageSize() != ps {
		t.Fatalf("PageSize() = %d", p.PageSize())
	}
	if got := c.Snapshot(); got != (vfs.Counts{}) {
		t.Fatalf("Open did I/O: %+v", got)
	}
	if v := p.Acquire(); v.Bytes() != nil {
		t.Fatal("Acquire before EnsureMapped returned bytes")
	} else {
		v.Release()
	}
}

func TestWriteRunsCoalesces(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var c *vfs.CountingFS
		f := b.open(t, func(fs vfs.FS) vfs.FS { c = vfs.NewCounting(fs); return c })
		p := mustOpen(t, f, smallMaps)

		// Pages 10, 11-12 and 13 are adjacent; 20 is not. Given out of order.
		runs := []page.Run{
			{ID: 20, Data: pageBytes(20, 1, 0)},
			{ID: 11, Data: pageBytes(11, 2, 0)},
			{ID: 13, Data: pageBytes(13, 1, 0)},
			{ID: 10, Data: pageBytes(10, 1, 0)},
		}
		order := []page.ID{20, 11, 13, 10}
		c.Reset()
		if err := p.WriteRuns(runs); err != nil {
			t.Fatal(err)
		}
		got := c.Snapshot()
		// Two extents (pages 10-13, page 20), each written as page-sized
		// pwrites: see writeExtent for why extents are not one pwrite.
		if got.WriteCalls != 5 {
			t.Fatalf("%d WriteAt calls, want 5 (one per page)", got.WriteCalls)
		}
		if got.WriteBytes != 5*ps {
			t.Fatalf("%d bytes written, want %d", got.WriteBytes, 5*ps)
		}
		for i, r := range runs {
			if r.ID != order[i] {
				t.Fatal("WriteRuns reordered the caller's slice")
			}
		}
		st := p.Stats()
		if st.WriteCalls != 2 || st.PagesWritten != 5 || st.BytesWritten != 5*ps {
			t.Fatalf("Stats = %+v", st)
		}
		buf, err := p.ReadPages(10, 11)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Concat(pageBytes(10, 4, 0), make([]byte, 6*ps), pageBytes(20, 1, 0))
		if !bytes.Equal(buf, want) {
			t.Fatal("pages read back differ from the runs written")
		}
	})
}

func TestWriteRunsCoalescingCap(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	p := mustOpen(t, openFile(t, c, "db"), smallMaps)
	per := MaxCoalescedWrite / 2 / ps // pages per run: two runs fill a write
	runs := []page.Run{
		{ID: 0, Data: pageBytes(0, per, 1)},
		{ID: uint64(per), Data: pageBytes(uint64(per), per, 1)},
		{ID: uint64(2 * per), Data: pageBytes(uint64(2*per), per, 1)},
		// A single run larger than the cap is written whole.
		{ID: uint64(3 * per), Data: pageBytes(uint64(3*per), 3*per, 1)},
	}
	if err := p.WriteRuns(runs); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().WriteCalls; got != 3 {
		t.Fatalf("%d extents written, want 3 (2 runs, then 1, then the big one)", got)
	}
	if got, want := c.Snapshot().WriteCalls, int64(6*per); got != want {
		t.Fatalf("%d WriteAt calls, want %d (one per page)", got, want)
	}
	buf, err := p.ReadPages(0, uint64(6*per))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, pageBytes(0, 6*per, 1)) {
		t.Fatal("contents differ")
	}
}

func TestWriteRunsReusesScratch(t *testing.T) {
	f := openFile(t, vfs.NewMem(), "db")
	p := mustOpen(t, f, smallMaps)
	runs := []page.Run{{ID: 1, Data: pageBytes(1, 1, 0)}, {ID: 2, Data: pageBytes(2, 2, 0)}, {ID: 4, Data: pageBytes(4, 1, 0)}}
	if err := p.WriteRuns(runs); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := p.WriteRuns(runs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteRuns allocates %.1f times per call once warm", allocs)
	}
}

func TestWriteRunsRejectsBadRuns(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	p := mustOpen(t, openFile(t, c, "db"), smallMaps)
	for name, runs := range map[string][]page.Run{
		"overlap":      {{ID: 1, Data: make([]byte, 2*ps)}, {ID: 2, Data: make([]byte, ps)}},
		"duplicate":    {{ID: 5, Data: make([]byte, ps)}, {ID: 5, Data: make([]byte, ps)}},
		"empty":        {{ID: 1, Data: nil}},
		"partial page": {{ID: 1, Data: make([]byte, ps+1)}},
		"huge id":      {{ID: math.MaxUint64 / 2, Data: make([]byte, ps)}},
		"end overflow": {{ID: math.MaxInt64 / ps, Data: make([]byte, 2*ps)}},
	} {
		if err := p.WriteRuns(runs); err == nil {
			t.Errorf("%s: WriteRuns succeeded", name)
		}
	}
	if got := c.Snapshot(); got.WriteCalls != 0 || got.TruncateCalls != 0 {
		t.Fatalf("rejected runs reached the file: %+v", got)
	}
	if err := p.WriteRuns(nil); err != nil {
		t.Fatalf("WriteRuns(nil): %v", err)
	}
}

func TestWriteAndSyncErrorsReturnedAsIs(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	p := mustOpen(t, openFile(t, faulty, "db"), smallMaps)
	faulty.Arm(vfs.Fault{Op: vfs.OpWrite, Err: syscall.ENOSPC, ShortWrite: 100})
	err := p.WriteRuns([]page.Run{{ID: 0, Data: make([]byte, ps)}})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteRuns: %v, want ENOSPC", err)
	}
	if st := p.Stats(); st.WriteCalls != 1 || st.PagesWritten != 0 {
		t.Fatalf("a failed write was counted as written: %+v", st)
	}
	faulty.Arm(vfs.Fault{Op: vfs.OpSync})
	if err := p.Sync(vfs.SyncData); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: %v, want EIO", err)
	}
	if err := p.Sync(vfs.SyncBarrier); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().Flushes; got != 2 {
		t.Fatalf("Flushes = %d, want 2", got)
	}
	faulty.Arm(vfs.Fault{Op: vfs.OpTruncate, Err: syscall.ENOSPC})
	if err := p.Grow(100000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Grow: %v, want ENOSPC", err)
	}
}

// TestFailedGrowChangesNothing: when the file cannot grow (a full disk),
// EnsureMapped and WriteRuns fail with the file's error and leave the file
// size, the pager's idea of it and the current view as they were, so no
// view ever covers a page past the end of the file; once there is room the
// same calls succeed.
func TestFailedGrowChangesNothing(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	f := openFile(t, faulty, "db")
	p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 64 * ps, GrowSize: 16 * ps})
	if err := p.EnsureMapped(4); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteRuns([]page.Run{{ID: 1, Data: pageBytes(1, 1, 7)}}); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		s, err := f.Size()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := size()
	viewLen := func() int {
		v := p.Acquire()
		defer v.Release()
		return len(v.Bytes())
	}
	beforeView := viewLen()
	writes := p.Stats().WriteCalls

	faulty.Arm(vfs.Fault{Op: vfs.OpTruncate, Err: syscall.ENOSPC, Persist: true})
	if err := p.EnsureMapped(20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("EnsureMapped on a full disk: %v, want ENOSPC", err)
	}
	if err := p.WriteRuns([]page.Run{{ID: 18, Data: pageBytes(18, 1, 8)}}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("WriteRuns past the end on a full disk: %v, want ENOSPC", err)
	}
	if got := size(); got != before {
		t.Fatalf("file size %d after failed growth, was %d", got, before)
	}
	if got := p.size.Load(); got != before {
		t.Fatalf("the pager believes the file is %d bytes; it is %d", got, before)
	}
	if got := viewLen(); got != beforeView || int64(got) > before {
		t.Fatalf("view covers %d bytes after failed growth (was %d, file %d)", got, beforeView, before)
	}
	if got := p.Stats().WriteCalls; got != writes {
		t.Fatalf("%d writes issued although the file could not grow", got-writes)
	}
	faulty.Disarm()
	if err := p.EnsureMapped(20); err != nil {
		t.Fatalf("EnsureMapped once there is room: %v", err)
	}
	if err := p.WriteRuns([]page.Run{{ID: 18, Data: pageBytes(18, 1, 8)}}); err != nil {
		t.Fatalf("WriteRuns once there is room: %v", err)
	}
	if got := viewLen(); got < 20*ps || int64(got) > size() {
		t.Fatalf("view covers %d bytes, file %d, want at least 20 pages", got, size())
	}
}

func TestReadPagesPastEOFIsCorrupt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, smallMaps)
		if _, err := f.WriteAt(pageBytes(0, 3, 0), 0); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			id page.ID
			n  uint64
		}{
			{3, 1},                  // just past the end
			{2, 2},                  // straddles the end
			{1000, 1},               // far past
			{0, 1 << 40},            // corrupt count: must not allocate 4 PiB
			{math.MaxUint64, 1},     // offset overflow
			{1, math.MaxUint64 / 2}, // length overflow
		} {
			_, err := p.ReadPages(tc.id, tc.n)
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("ReadPages(%d, %d): %v, want ErrCorrupt", tc.id, tc.n, err)
			}
			var ce *rerrors.CorruptError
			if !errors.As(err, &ce) || ce.Page != tc.id {
				t.Fatalf("ReadPages(%d, %d): %v does not name the page", tc.id, tc.n, err)
			}
		}
		if _, err := p.ReadPages(0, 0); err == nil || errors.Is(err, rerrors.ErrCorrupt) {
			t.Fatalf("ReadPages of 0 pages: %v, want a non-corruption error", err)
		}
		got, err := p.ReadPages(1, 2)
		if err != nil || !bytes.Equal(got, pageBytes(1, 2, 0)) {
			t.Fatalf("ReadPages(1, 2): %v", err)
		}
		if st := p.Stats(); st.PagesRead != 2 {
			t.Fatalf("PagesRead = %d, want 2", st.PagesRead)
		}
	})
}

func TestReadPagesIsCountedIO(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	f := openFile(t, c, "db")
	p := mustOpen(t, f, smallMaps)
	if err := p.WriteRuns([]page.Run{{ID: 0, Data: pageBytes(0, 4, 0)}}); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	if _, err := p.ReadPages(1, 3); err != nil {
		t.Fatal(err)
	}
	if got := c.Snapshot(); got.ReadCalls != 1 || got.ReadBytes != 3*ps {
		t.Fatalf("ReadPages did %+v, want one ReadAt of 3 pages", got)
	}
}

func TestReadPagesIOErrorIsNotCorruption(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	p := mustOpen(t, openFile(t, faulty, "db"), smallMaps)
	if err := p.WriteRuns([]page.Run{{ID: 0, Data: make([]byte, ps)}}); err != nil {
		t.Fatal(err)
	}
	faulty.Arm(vfs.Fault{Op: vfs.OpRead})
	_, err := p.ReadPages(0, 1)
	if !errors.Is(err, syscall.EIO) || errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("ReadPages: %v, want EIO and not ErrCorrupt", err)
	}
}

// TestRemapWhileViewHeld maps, holds a view, forces a re-map, and checks the
// old view still reads its pages, the new one sees new pages, and the old
// mapping is unmapped only when its view is released.
func TestRemapWhileViewHeld(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var c *vfs.CountingFS
		f := b.open(t, func(fs vfs.FS) vfs.FS { c = vfs.NewCounting(fs); return c })
		p := mustOpen(t, f, smallMaps)

		if err := p.EnsureMapped(4); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteRuns([]page.Run{{ID: 0, Data: pageBytes(0, 4, 0)}}); err != nil {
			t.Fatal(err)
		}
		old := p.Acquire()
		if !bytes.Equal(old.Bytes()[:4*ps], pageBytes(0, 4, 0)) {
			t.Fatal("first view does not show the pages written")
		}
		oldLen := len(old.Bytes())

		// Far past the first mapping (16 pages): forces a new one.
		const hwm = 200
		if err := p.EnsureMapped(hwm); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteRuns([]page.Run{{ID: 150, Data: pageBytes(150, 50, 0)}}); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Remaps != 2 {
			t.Fatalf("Remaps = %d, want 2", st.Remaps)
		}
		cur := p.Acquire()
		if len(cur.Bytes()) < hwm*ps {
			t.Fatalf("new view is %d bytes, want at least %d", len(cur.Bytes()), hwm*ps)
		}
		if !bytes.Equal(cur.Bytes()[150*ps:hwm*ps], pageBytes(150, 50, 0)) {
			t.Fatal("new view does not show pages written after the re-map")
		}
		if !bytes.Equal(cur.Bytes()[:4*ps], pageBytes(0, 4, 0)) {
			t.Fatal("new view lost old pages")
		}
		// The old view is still mapped and unchanged.
		if len(old.Bytes()) != oldLen || !bytes.Equal(old.Bytes()[:4*ps], pageBytes(0, 4, 0)) {
			t.Fatal("old view changed after the re-map")
		}
		if got := c.Snapshot(); got.MapCalls != 2 || got.UnmapCalls != 0 {
			t.Fatalf("before release: %d maps, %d unmaps; want 2, 0", got.MapCalls, got.UnmapCalls)
		}
		old.Release()
		if got := c.Snapshot().UnmapCalls; got != 1 {
			t.Fatalf("releasing the last view of the old mapping unmapped %d mappings, want 1", got)
		}
		cur.Release()
		if got := c.Snapshot().UnmapCalls; got != 1 {
			t.Fatal("releasing a view of the current mapping unmapped it")
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got := c.Snapshot().UnmapCalls; got != 2 {
			t.Fatalf("after Close %d unmaps, want 2", got)
		}
	})
}

func TestEnsureMappedGrowsFile(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	f := openFile(t, c, "db")
	p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 16 * ps, GrowSize: 16 * ps, MaxSize: 100 * ps})
	size := func() int64 {
		s, err := f.Size()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Below GrowSize the file doubles, or grows to what is needed if that
	// is more.
	for _, step := range []struct{ hwm, want uint64 }{{1, 1}, {2, 2}, {3, 4}, {5, 8}, {9, 16}} {
		if err := p.EnsureMapped(step.hwm); err != nil {
			t.Fatal(err)
		}
		if got := size(); got != int64(step.want)*ps {
			t.Fatalf("hwm %d: size %d pages, want %d", step.hwm, got/ps, step.want)
		}
	}
	// Within the grown size: no truncate.
	if err := p.EnsureMapped(16); err != nil {
		t.Fatal(err)
	}
	if got := c.Snapshot().TruncateCalls; got != 5 {
		t.Fatalf("%d truncates, want 5", got)
	}
	// From GrowSize on, steps of GrowSize.
	if err := p.EnsureMapped(17); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != 32*ps {
		t.Fatalf("size %d pages, want 32", got/ps)
	}
	// A need beyond one step gets a step of its own on top, cut short at
	// MaxSize ...
	if err := p.EnsureMapped(95); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != 100*ps {
		t.Fatalf("size %d pages, want the MaxSize of 100", got/ps)
	}
	// ... which later needs then fit ...
	if err := p.EnsureMapped(96); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != 100*ps {
		t.Fatalf("size %d pages, want the MaxSize of 100", got/ps)
	}
	// ... and asking for more fails without changing the file.
	if err := p.EnsureMapped(101); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("EnsureMapped past MaxSize: %v", err)
	}
	if err := p.WriteRuns([]page.Run{{ID: 100, Data: make([]byte, ps)}}); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("WriteRuns past MaxSize: %v", err)
	}
	if got := size(); got != 100*ps {
		t.Fatalf("size %d pages after refused growth", got/ps)
	}
	v := p.Acquire()
	defer v.Release()
	if len(v.Bytes()) != 100*ps {
		t.Fatalf("view covers %d pages, want the whole file (100)", len(v.Bytes())/ps)
	}
}

// TestSetMaxSize: a cap set on an open pager bounds the growth that
// follows, never cuts the file, and 0 lifts it.
func TestSetMaxSize(t *testing.T) {
	f := openFile(t, vfs.NewMem(), "db")
	p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 16 * ps, GrowSize: 16 * ps})
	if err := p.EnsureMapped(8); err != nil {
		t.Fatal(err)
	}
	p.SetMaxSize(6 * ps)
	if err := p.EnsureMapped(8); err != nil {
		t.Fatalf("a cap below the file's size refused what the file holds: %v", err)
	}
	if err := p.EnsureMapped(9); !errors.Is(err, rerrors.ErrMaxSizeReached) {
		t.Fatalf("growth past the cap: %v, want ErrMaxSizeReached", err)
	}
	if s, _ := f.Size(); s != 8*ps {
		t.Fatalf("size %d pages, want 8", s/ps)
	}
	p.SetMaxSize(12 * ps)
	if err := p.EnsureMapped(9); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Size(); s != 12*ps {
		t.Fatalf("size %d pages, want the cap of 12 (doubling cut short)", s/ps)
	}
	p.SetMaxSize(0)
	if err := p.EnsureMapped(40); err != nil {
		t.Fatal(err)
	}
}

func TestGrowByFraction(t *testing.T) {
	f := openFile(t, vfs.NewMem(), "db")
	const start = 20000 // 78 MiB: past the default GrowSize
	if err := f.Truncate(start * ps); err != nil {
		t.Fatal(err)
	}
	p := mustOpen(t, f, Options{PageSize: ps})
	if err := p.Grow(start + 1); err != nil {
		t.Fatal(err)
	}
	// 1/16 of the file: more than 1 MiB, less than the 16 MiB GrowSize.
	if s, _ := f.Size(); s != (start+start/16)*ps {
		t.Fatalf("size %d pages, want %d", s/ps, start+start/16)
	}
	if err := p.Grow(10); err != nil { // never shrinks
		t.Fatal(err)
	}
	if s, _ := f.Size(); s != (start+start/16)*ps {
		t.Fatalf("Grow to a smaller size changed the file to %d pages", s/ps)
	}
	if err := p.Grow(math.MaxUint64); err == nil {
		t.Fatal("Grow to an impossible size succeeded")
	}
	// Past 16 x GrowSize, 1/16 is more than GrowSize: the step is GrowSize
	// (with the default, a 10 GiB file grows by 16 MiB, not 640 MiB).
	g := openFile(t, vfs.NewMem(), "big")
	if err := g.Truncate(32 << 20); err != nil {
		t.Fatal(err)
	}
	q := mustOpen(t, g, Options{PageSize: ps, InitialMmapSize: 1 << 20, GrowSize: 1 << 20})
	if err := q.Grow((32<<20)/ps + 1); err != nil {
		t.Fatal(err)
	}
	if s, _ := g.Size(); s != 33<<20 {
		t.Fatalf("32 MiB file grew to %d bytes, want one 1 MiB GrowSize step more", s)
	}
}

func TestReadOnly(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	f := openFile(t, c, "db")
	if _, err := f.WriteAt(pageBytes(0, 5, 0), 0); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 16 * ps, ReadOnly: true})
	// The meta says 10 pages but the file holds 5: the view stops at the
	// file's end, never past it.
	if err := p.EnsureMapped(10); err != nil {
		t.Fatal(err)
	}
	v := p.Acquire()
	defer v.Release()
	if len(v.Bytes()) != 5*ps || !bytes.Equal(v.Bytes(), pageBytes(0, 5, 0)) {
		t.Fatalf("read-only view covers %d bytes", len(v.Bytes()))
	}
	for name, err := range map[string]error{
		"WriteRuns": p.WriteRuns([]page.Run{{ID: 0, Data: make([]byte, ps)}}),
		"Grow":      p.Grow(20),
		"Sync":      p.Sync(vfs.SyncData),
	} {
		if !errors.Is(err, rerrors.ErrDatabaseReadOnly) {
			t.Errorf("%s on a read-only pager: %v", name, err)
		}
	}
	if got := c.Snapshot(); got.WriteCalls != 0 || got.TruncateCalls != 0 || got.SyncCalls() != 0 {
		t.Fatalf("read-only pager changed the file: %+v", got)
	}
}

// TestViewNeverPastEOF checks the invariant that guards against SIGBUS: a
// view of a writable pager covers only pages the file holds.
func TestViewNeverPastEOF(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 1 << 20, GrowSize: 3 * ps})
		for _, hwm := range []uint64{0, 1, 3, 4, 10, 100, 300} {
			if err := p.EnsureMapped(hwm); err != nil {
				t.Fatal(err)
			}
			v := p.Acquire()
			size, err := f.Size()
			if err != nil {
				t.Fatal(err)
			}
			if n := int64(len(v.Bytes())); n > size || n < int64(hwm)*ps || n%ps != 0 {
				t.Fatalf("hwm %d: view of %d bytes, file of %d", hwm, n, size)
			}
			// Touch the last byte: on the OS backend a page past the end
			// would fault here.
			if n := len(v.Bytes()); n > 0 {
				_ = v.Bytes()[n-1]
			}
			v.Release()
		}
	})
}

// shortMapFS wraps an FS so mappings stop at the file's end, the way Windows
// maps, to exercise the pager's handling of views shorter than requested.
type shortMapFS struct{ vfs.FS }

func (s shortMapFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return shortMapFile{f}, nil
}

type shortMapFile struct{ vfs.File }

func (f shortMapFile) Map(length int64) (vfs.Mapping, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	return f.File.Map(min(length, size))
}

func TestShortMappings(t *testing.T) {
	f := openFile(t, shortMapFS{vfs.NewMem()}, "db")
	p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 1 << 20, GrowSize: 4 * ps})
	for hwm := uint64(1); hwm <= 40; hwm++ {
		if err := p.EnsureMapped(hwm); err != nil {
			t.Fatalf("hwm %d: %v", hwm, err)
		}
		if err := p.WriteRuns([]page.Run{{ID: hwm - 1, Data: pageBytes(hwm-1, 1, 7)}}); err != nil {
			t.Fatal(err)
		}
		v := p.Acquire()
		if len(v.Bytes()) < int(hwm)*ps || !bytes.Equal(v.Bytes()[:hwm*ps], pageBytes(0, int(hwm), 7)) {
			t.Fatalf("hwm %d: view of %d bytes misses pages", hwm, len(v.Bytes()))
		}
		v.Release()
	}
	// The file doubled up to GrowSize (1, 2, 4 pages), then grew 4 pages at
	// a time (8 ... 40), and each growth needed a new mapping.
	if got := p.Stats().Remaps; got != 12 {
		t.Fatalf("Remaps = %d, want 12", got)
	}
}

// failBigMapFS refuses mappings longer than limit, like a small address
// space, to check that the pager falls back to mapping only what it needs.
type failBigMapFS struct {
	vfs.FS
	limit int64
}

func (s failBigMapFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return failBigMapFile{f, s.limit}, nil
}

type failBigMapFile struct {
	vfs.File
	limit int64
}

func (f failBigMapFile) Map(length int64) (vfs.Mapping, error) {
	if length > f.limit {
		return nil, syscall.ENOMEM
	}
	return f.File.Map(length)
}

func TestMapFallsBackToTightLength(t *testing.T) {
	f := openFile(t, failBigMapFS{vfs.NewMem(), 64 * ps}, "db")
	p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 1 << 30, GrowSize: ps})
	if err := p.EnsureMapped(40); err != nil {
		t.Fatalf("EnsureMapped with a tight address space: %v", err)
	}
	v := p.Acquire()
	if len(v.Bytes()) < 40*ps {
		t.Fatalf("view of %d pages", len(v.Bytes())/ps)
	}
	v.Release()
	if err := p.EnsureMapped(100); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("EnsureMapped beyond the address space: %v, want ENOMEM", err)
	}
}

func TestClose(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	f := openFile(t, c, "db")
	p, err := Open(f, smallMaps)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureMapped(2); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteRuns([]page.Run{{ID: 0, Data: pageBytes(0, 2, 0)}}); err != nil {
		t.Fatal(err)
	}
	held := p.Acquire()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// A view taken before Close stays readable until released.
	if c.Snapshot().UnmapCalls != 0 || !bytes.Equal(held.Bytes()[:2*ps], pageBytes(0, 2, 0)) {
		t.Fatal("Close unmapped a mapping a view still holds")
	}
	held.Release()
	if got := c.Snapshot().UnmapCalls; got != 1 {
		t.Fatalf("%d unmaps after the last release, want 1", got)
	}
	held.Release() // an extra release must not unmap twice or panic
	if got := c.Snapshot().UnmapCalls; got != 1 {
		t.Fatalf("%d unmaps after a double release", got)
	}

	if v := p.Acquire(); v.Bytes() != nil {
		t.Fatal("Acquire after Close returned bytes")
	} else {
		v.Release()
	}
	for name, err := range map[string]error{
		"EnsureMapped": p.EnsureMapped(1),
		"Grow":         p.Grow(1),
		"WriteRuns":    p.WriteRuns([]page.Run{{ID: 0, Data: make([]byte, ps)}}),
		"Sync":         p.Sync(vfs.SyncData),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := p.ReadPages(0, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadPages after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if st := p.Stats(); st.PagesWritten != 2 {
		t.Fatalf("Stats after Close: %+v", st)
	}
	// The pager does not own the file.
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("file unusable after pager Close: %v", err)
	}
	var nilView *View
	if nilView.Bytes() != nil {
		t.Fatal("nil View has bytes")
	}
	nilView.Release()
}

// TestConcurrentReadersAndRemaps runs readers that Acquire, verify published
// pages and Release, against a writer that keeps writing new pages and
// growing the map. Under -race this checks the mapping bookkeeping; at the
// end every mapping must have been unmapped exactly once.
func TestConcurrentReadersAndRemaps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		var c *vfs.CountingFS
		f := b.open(t, func(fs vfs.FS) vfs.FS { c = vfs.NewCounting(fs); return c })
		p, err := Open(f, Options{PageSize: ps, InitialMmapSize: 8 * ps, GrowSize: 4 * ps})
		if err != nil {
			t.Fatal(err)
		}
		// published is the number of pages readers may read. Invariant:
		// pages below it were written before it was stored, and are never
		// written again (copy-on-write).
		var published atomic.Uint64
		var stop atomic.Bool
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for r := 0; r < 6; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					// Load before Acquire: the view installed when hwm
					// pages were published covers them.
					hwm := published.Load()
					v := p.Acquire()
					bs := v.Bytes()
					if uint64(len(bs)) < hwm*ps {
						errs <- fmt.Errorf("view of %d pages, %d published", len(bs)/ps, hwm)
						v.Release()
						return
					}
					if hwm > 0 {
						id := uint64(i) % hwm
						if got := binary.LittleEndian.Uint64(bs[id*ps:]); got != id {
							errs <- fmt.Errorf("page %d holds id %d", id, got)
							v.Release()
							return
						}
						if bs[id*ps+ps-1] != byte(id)^3 {
							errs <- fmt.Errorf("page %d has wrong fill", id)
							v.Release()
							return
						}
					}
					v.Release()
				}
			}()
		}
		const total = 600
		for hwm := uint64(0); hwm < total; {
			n := 1 + hwm%5
			if err := p.EnsureMapped(hwm + n); err != nil {
				t.Fatal(err)
			}
			if err := p.WriteRuns([]page.Run{{ID: hwm, Data: pageBytes(hwm, int(n), 3)}}); err != nil {
				t.Fatal(err)
			}
			hwm += n
			published.Store(hwm)
		}
		stop.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		got := c.Snapshot()
		if got.MapCalls != got.UnmapCalls || got.MapCalls != p.Stats().Remaps {
			t.Fatalf("%d maps, %d unmaps, %d remaps: every mapping must be unmapped once", got.MapCalls, got.UnmapCalls, p.Stats().Remaps)
		}
		if got.MapCalls < 3 {
			t.Fatalf("only %d mappings: the test did not exercise re-mapping", got.MapCalls)
		}
	})
}

// errUnmapFS wraps an FS so that closing a mapping fails.
type errUnmapFS struct{ vfs.FS }

func (s errUnmapFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return errUnmapFile{f}, nil
}

type errUnmapFile struct{ vfs.File }

func (f errUnmapFile) Map(length int64) (vfs.Mapping, error) {
	m, err := f.File.Map(length)
	if err != nil {
		return nil, err
	}
	return errUnmapMapping{m}, nil
}

type errUnmapMapping struct{ vfs.Mapping }

func (m errUnmapMapping) Close() error {
	m.Mapping.Close()
	return syscall.EINVAL
}

func TestCloseReportsUnmapError(t *testing.T) {
	f := openFile(t, errUnmapFS{vfs.NewMem()}, "db")
	p, err := Open(f, smallMaps)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureMapped(1); err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureMapped(100); err != nil { // retires the first mapping
		t.Fatal(err)
	}
	if err := p.Close(); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("Close: %v, want the unmap error", err)
	}
}

// TestDefaultReserveOnOS checks the production defaults on a real file: the
// address-space reserve absorbs growth without re-mapping, and the file
// grows by DefaultGrowSize steps, or straight to what is needed.
func TestDefaultReserveOnOS(t *testing.T) {
	if !is64Bit {
		t.Skip("the 1 GiB default applies to 64-bit platforms")
	}
	f := openFile(t, vfs.OS(), filepath.Join(t.TempDir(), "db"))
	p := mustOpen(t, f, Options{PageSize: ps})
	for _, hwm := range []uint64{1, 100, 5000, 20000} {
		if err := p.EnsureMapped(hwm); err != nil {
			t.Fatal(err)
		}
		if err := p.WriteRuns([]page.Run{{ID: hwm - 1, Data: pageBytes(hwm-1, 1, 0)}}); err != nil {
			t.Fatal(err)
		}
		v := p.Acquire()
		if !bytes.Equal(v.Bytes()[(hwm-1)*ps:hwm*ps], pageBytes(hwm-1, 1, 0)) {
			t.Fatalf("hwm %d: page not visible", hwm)
		}
		v.Release()
	}
	if got := p.Stats().Remaps; got != 1 {
		t.Fatalf("Remaps = %d, want 1 (the 1 GiB reserve covers 80 MiB)", got)
	}
	// 1 page -> 1 page; 100 pages -> 128 (doubling 1 page falls short,
	// so the need is rounded up to a power of two); 5000 pages (20 MB,
	// past the 16 MiB GrowSize) -> 5000 + 1/16; 20000 -> 20000 + 1/16:
	// each jump gets its own slack, so the next page needs no growth.
	if size, _ := f.Size(); size != (20000+20000/16)*ps {
		t.Fatalf("file size %d, want %d", size, (20000+20000/16)*ps)
	}
	if err := p.EnsureMapped(20001); err != nil {
		t.Fatal(err)
	}
	if size, _ := f.Size(); size != (20000+20000/16)*ps {
		t.Fatalf("file size %d after one more page, want no growth", size)
	}
}

// wrapFS opens its files through FS and hands each to wrap: how a test
// slows or watches one kind of call on the pager's file.
type wrapFS struct {
	vfs.FS
	wrap func(vfs.File) vfs.File
}

func (fs wrapFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return fs.wrap(f), nil
}

// cutGate holds every Truncate that shrinks a file until release is
// closed, after signalling entered: a slow cut, as a file system that
// frees and discards what it drops makes.
type cutGate struct {
	entered chan struct{}
	release chan struct{}
}

// fs returns a wrapFS whose files truncate through the gate.
func (g *cutGate) fs(fs vfs.FS) vfs.FS {
	return wrapFS{FS: fs, wrap: func(f vfs.File) vfs.File { return &cutGateFile{File: f, fs: g} }}
}

type cutGateFile struct {
	vfs.File
	fs *cutGate
}

func (f *cutGateFile) Truncate(size int64) error {
	if cur, err := f.File.Size(); err == nil && size < cur {
		f.fs.entered <- struct{}{}
		<-f.fs.release
	}
	return f.File.Truncate(size)
}

// TestCutLetsWritesThrough: while the file system cuts the file, writes
// below the cut, deferrals and mappings that need no growth go on; a grow
// waits for the cut to end, and the file then covers it.
func TestCutLetsWritesThrough(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		gate := &cutGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
		f := b.open(t, gate.fs)
		p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 16 * ps, GrowSize: 64 * ps})
		if err := p.WriteRuns([]page.Run{{ID: 0, Data: pageBytes(0, 4, 1)}, {ID: 100, Data: pageBytes(100, 1, 1)}}); err != nil {
			t.Fatal(err)
		}
		p.BeginCut(50 * ps)
		cut := make(chan error, 1)
		go func() {
			_, err := p.Cut(1 << 30)
			cut <- err
		}()
		<-gate.entered
		within := func(what string, fn func() error) {
			t.Helper()
			done := make(chan error, 1)
			go func() { done <- fn() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s during the cut: %v", what, err)
				}
			case <-time.After(10 * time.Second):
				close(gate.release)
				t.Fatalf("%s waited for the cut", what)
			}
		}
		within("WriteRuns below the cut", func() error { return p.WriteRuns([]page.Run{{ID: 20, Data: pageBytes(20, 1, 2)}}) })
		within("Defer below the cut", func() error { return p.Defer([]page.Run{{ID: 30, Data: pageBytes(30, 1, 2)}}) })
		within("EnsureMapped below the cut", func() error { return p.EnsureMapped(45) })

		grown := make(chan error, 1)
		go func() { grown <- p.EnsureMapped(300) }()
		select {
		case err := <-grown:
			t.Fatalf("a grow past the cut returned (%v) while the file was being cut", err)
		case <-time.After(50 * time.Millisecond):
		}
		close(gate.release)
		if err := <-cut; err != nil {
			t.Fatal(err)
		}
		if err := <-grown; err != nil {
			t.Fatal(err)
		}
		if size, _ := f.Size(); size < 300*ps {
			t.Fatalf("file of %d pages after a grow to 300 that waited for the cut", size/ps)
		}
		if err := p.WriteDeferred(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id  page.ID
			tag byte
		}{{20, 2}, {30, 2}, {0, 1}} {
			got, err := p.ReadPages(c.id, 1)
			if err != nil || !bytes.Equal(got, pageBytes(c.id, 1, c.tag)) {
				t.Fatalf("page %d after the cut: %v", c.id, err)
			}
		}
	})
}

// TestCutKeepsLaterWrites: a cut begun at one size goes down a piece per
// Cut, and never below a run written or a high-water mark mapped after it
// began, which is what lets it run without holding off the writers.
func TestCutKeepsLaterWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := b.open(t, identity)
		p := mustOpen(t, f, Options{PageSize: ps, InitialMmapSize: 16 * ps, GrowSize: 64 * ps})
		size := func() int64 {
			t.Helper()
			s, err := f.Size()
			if err != nil {
				t.Fatal(err)
			}
			return s / ps
		}
		if err := p.WriteRuns([]page.Run{{ID: 0, Data: pageBytes(0, 4, 1)}, {ID: 100, Data: pageBytes(100, 1, 1)}}); err != nil {
			t.Fatal(err)
		}
		if got := size(); got < 101 {
			t.Fatalf("file of %d pages after writing page 100", got)
		}
		start := size()
		if more, err := p.Cut(ps); err != nil || more || size() != start {
			t.Fatalf("Cut before BeginCut: more %v, err %v, %d pages (was %d)", more, err, size(), start)
		}
		p.BeginCut(8 * ps)
		more, err := p.Cut(10 * ps)
		if err != nil || !more || size() != start-10 {
			t.Fatalf("first piece: more %v, err %v, %d pages, want %d", more, err, size(), start-10)
		}
		// A commit writes page 40 and maps a state of 50 pages: the cut
		// stops at 50, not 8.
		if err := p.WriteRuns([]page.Run{{ID: 40, Data: pageBytes(40, 1, 2)}}); err != nil {
			t.Fatal(err)
		}
		if err := p.EnsureMapped(50); err != nil {
			t.Fatal(err)
		}
		pieces := 1
		for more {
			if more, err = p.Cut(10 * ps); err != nil {
				t.Fatal(err)
			}
			pieces++
			if pieces > 100 {
				t.Fatal("the cut does not end")
			}
		}
		if got := size(); got != 50 {
			t.Fatalf("cut ended at %d pages, want 50", got)
		}
		got, err := p.ReadPages(40, 1)
		if err != nil || !bytes.Equal(got, pageBytes(40, 1, 2)) {
			t.Fatalf("page 40 after the cut: %v", err)
		}
		// The cut is over: Cut changes nothing until the next BeginCut.
		if more, err := p.Cut(10 * ps); err != nil || more || size() != 50 {
			t.Fatalf("Cut after the end: more %v, err %v, %d pages", more, err, size())
		}
		p.BeginCut(8 * ps)
		if more, err := p.Cut(100 * ps); err != nil || more || size() != 8 {
			t.Fatalf("second cut: more %v, err %v, %d pages, want 8", more, err, size())
		}
	})
}

// TestHoldWrites: while writes are held, a write and a cut wait (growing
// the file does not); released, they go on; released with an error, they
// fail with it.
func TestHoldWrites(t *testing.T) {
	c := vfs.NewCounting(vfs.NewMem())
	p := mustOpen(t, openFile(t, c, "db"), smallMaps)
	if err := p.WriteRuns([]page.Run{{ID: 10, Data: pageBytes(10, 1, 0)}}); err != nil {
		t.Fatal(err)
	}
	release := p.HoldWrites()
	if err := p.Grow(40); err != nil {
		t.Fatalf("a grow waited for the hold or failed: %v", err)
	}
	c.Reset()
	wrote := make(chan error, 1)
	go func() { wrote <- p.WriteRuns([]page.Run{{ID: 30, Data: pageBytes(30, 1, 0)}}) }()
	select {
	case err := <-wrote:
		t.Fatalf("a write passed the hold: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if got := c.Snapshot().WriteCalls; got != 0 {
		t.Fatalf("%d WriteAt calls during the hold", got)
	}
	release(nil)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := p.Truncate(int64(20 * ps)); err != nil {
		t.Fatal(err)
	}

	held := errors.New("the flush failed")
	release = p.HoldWrites()
	release(held)
	if err := p.WriteRuns([]page.Run{{ID: 12, Data: pageBytes(12, 1, 0)}}); !errors.Is(err, held) {
		t.Fatalf("write after a failed hold: %v, want its error", err)
	}
	if err := p.Truncate(int64(16 * ps)); !errors.Is(err, held) {
		t.Fatalf("cut after a failed hold: %v, want its error", err)
	}
}

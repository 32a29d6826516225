package rivet

import (
	"fmt"
	"os"
	"time"
)

// Sizes and defaults, as in bbolt.
const (
	// MaxKeySize is the maximum length of a key, in bytes.
	MaxKeySize = 32768
	// MaxValueSize is the maximum length of a value, in bytes.
	MaxValueSize = (1 << 31) - 2
	// DefaultFillPercent is the fraction of a page that split nodes fill.
	DefaultFillPercent = 0.5
	// DefaultMaxBatchSize is the default DB.MaxBatchSize.
	DefaultMaxBatchSize int = 1000
	// DefaultMaxBatchDelay is the default DB.MaxBatchDelay.
	DefaultMaxBatchDelay = 10 * time.Millisecond
	// DefaultAllocSize is kept for bbolt compatibility (DB.AllocSize).
	DefaultAllocSize = 16 * 1024 * 1024
)

// FreelistType is accepted for bbolt compatibility. rivet has one free-space
// structure (region maps) and ignores the choice.
type FreelistType string

// Freelist types, accepted and ignored.
const (
	FreelistArrayType = FreelistType("array")
	FreelistMapType   = FreelistType("hashmap")
)

// Options configure Open. The zero value (or nil) gives the defaults.
type Options struct {
	// Timeout is how long Open waits for the file lock held by another
	// process. Zero waits forever, as in bbolt.
	Timeout time.Duration

	// NoGrowSync is accepted for bbolt compatibility; rivet's one flush per
	// commit already covers file growth.
	NoGrowSync bool

	// NoFreelistSync is accepted and has nothing to do: rivet writes only the
	// free-space regions a commit changed, and Open never scans.
	NoFreelistSync bool

	// PreLoadFreelist is accepted and ignored: free space loads lazily.
	PreLoadFreelist bool

	// FreelistType is accepted and ignored.
	FreelistType FreelistType

	// ReadOnly opens the file with a shared lock and refuses writes. A
	// file bbolt wrote is read as it is, through rivet's API, without
	// converting it (docs/design.md §11.2).
	ReadOnly bool

	// MmapFlags is accepted for bbolt compatibility and currently ignored
	// (rivet maps read-only and shared, with MADV_RANDOM).
	MmapFlags int

	// InitialMmapSize is the minimum length of the memory map. rivet already
	// reserves address space ahead of the file and never makes writers wait
	// for readers to grow it, so this is only a hint.
	InitialMmapSize int

	// PageSize is the page size of a NEW file; zero means the OS page size.
	// Existing files keep theirs. It must be a power of two from 1 KiB to
	// 64 KiB (bbolt accepts larger; see the README's differences).
	PageSize int

	// MaxSize, if positive, caps the file size in bytes; a commit that needs
	// more fails with errors.ErrMaxSizeReached. DB.MaxSize changes it on the
	// open DB.
	MaxSize int

	// NoSync is bbolt's option: true means Durability None. Unlike bbolt's,
	// it cannot corrupt the file: a crash loses the commits since the last
	// DB.Sync or Close, nothing more. DB.NoSync changes it on the open DB.
	NoSync bool

	// Durability says when commits become durable: Full (the default),
	// Barrier, Periodic(d) or None. See Durability.
	Durability Durability

	// OpenFile replaces os.OpenFile for opening the data file.
	OpenFile func(string, int, os.FileMode) (*os.File, error)

	// Mlock is accepted and ignored.
	Mlock bool

	// Logger receives diagnostic messages; nil discards them.
	Logger Logger

	// NoStatistics turns off the per-transaction statistics counters.
	NoStatistics bool

	// LocalitySlack is the part of the file, from 0 to 0.9, that rivet may
	// leave free so that a commit's pages land in a few contiguous runs
	// (docs/design.md §4.3). Zero, the default, fills the lowest free pages
	// first, which keeps the file smallest but after random updates
	// scatters a commit's pages, one write each. With a slack a commit
	// fills the largest free extents first and, once the file is less than
	// LocalitySlack free, takes what it still needs at the file's end
	// rather than more single-page holes. Fewer, longer writes make a
	// durable commit's flush cheaper, most on disks that pay per write
	// (HDDs, network and cloud volumes); the file may grow until
	// LocalitySlack of it is free. Measured with rivet bench
	// update-locality (100 random updates a commit, ~916,000 keys): see
	// docs/benchmarks.md. AutoCompact, when set, compacts only above
	// whichever is larger, its FreeFraction or the slack plus 0.1.
	LocalitySlack float64

	// NoJournal turns the commit journal off: a Full commit then flushes
	// the file itself, writing its pages, the free-space maps it changed
	// and a meta (format 3's protocol). With the journal (the default in
	// Full durability) a commit writes its pages to the file without
	// flushing it, appends a record of its changes to PATH-journal-0 or
	// PATH-journal-1 and flushes only that: one sequential write on the
	// commit's path. A checkpoint flushes the file in the background every
	// few megabytes of journal (docs/design.md §3.8). Other durability
	// modes never journal.
	NoJournal bool

	// ConvertBbolt makes a writable Open of a file bbolt wrote convert it
	// in place into a rivet file, then open that, instead of returning
	// errors.ErrBboltFile. The conversion holds the file's exclusive lock
	// throughout; writes the rivet file beside it (PATH.converting), in
	// bounded transactions, reporting progress to Logger; verifies it
	// against the bbolt file by the digest `rivet import` prints; keeps
	// the bbolt file as PATH.bbolt (a hard link, or a copy where links
	// are not possible); and renames the rivet file over PATH. A crash at
	// any point leaves PATH holding the untouched bbolt file or the
	// verified rivet file, and the next Open with ConvertBbolt finishes
	// the job. It is refused, before anything is written, when the file
	// system lacks room for the rivet file (*ConvertSpaceError, which
	// matches syscall.ENOSPC) or PATH.bbolt is another file. A read-only
	// Open reads a bbolt file as it is and never converts it. See the
	// README, "Moving from bbolt", and docs/design.md §11.3.
	ConvertBbolt bool

	// AutoCompact, when not nil, runs DB.Compact in the background so that
	// a long-running service's file tracks its live data without anyone
	// calling it (docs/design.md §4.1). Off by default.
	AutoCompact *AutoCompact
}

// AutoCompact configures background compaction (Options.AutoCompact).
type AutoCompact struct {
	// Interval is how often the database looks at its free space; zero
	// means one minute.
	Interval time.Duration
	// FreeFraction starts a compaction when free pages make up more than
	// this part of the database (zero means 0.25); each compaction runs
	// in steps of at most 128 rewritten pages, so writers wait at most
	// one step. When a compaction gives nothing back (the free pages
	// cannot move yet, e.g. a long reader holds them), the next looks
	// come 2, 4, ... up to 64 intervals apart, until one gives back.
	FreeFraction float64
}

// String returns a human-readable form of the options.
func (o *Options) String() string {
	if o == nil {
		return "{}"
	}
	// bbolt's fields first, in bbolt's words, so a log line reads as it
	// did; rivet's own after them.
	return fmt.Sprintf("{Timeout: %s, NoGrowSync: %t, NoFreelistSync: %t, PreLoadFreelist: %t, FreelistType: %s, ReadOnly: %t, MmapFlags: %x, InitialMmapSize: %d, PageSize: %d, MaxSize: %d, NoSync: %t, OpenFile: %p, Mlock: %t, Logger: %p, NoStatistics: %t, Durability: %s, LocalitySlack: %g, AutoCompact: %v, ConvertBbolt: %t}",
		o.Timeout, o.NoGrowSync, o.NoFreelistSync, o.PreLoadFreelist, o.FreelistType, o.ReadOnly, o.MmapFlags, o.InitialMmapSize, o.PageSize, o.MaxSize, o.NoSync, o.OpenFile, o.Mlock, o.Logger, o.NoStatistics,
		o.Durability, o.LocalitySlack, o.AutoCompact, o.ConvertBbolt)
}

// DefaultOptions are the options used when Open is given nil.
var DefaultOptions = &Options{
	Timeout:      0,
	NoGrowSync:   false,
	FreelistType: FreelistArrayType,
}

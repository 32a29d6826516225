package rivet

import (
	"sync/atomic"
	"time"
)

// Stats are database-wide counters. Subtract two snapshots with Sub to get
// the activity of an interval.
type Stats struct {
	// TxStats accumulates the statistics of every finished transaction.
	TxStats TxStats

	// FreePageN is the number of free pages in the newest committed state
	// among the free-space regions loaded so far (rivet loads them lazily),
	// plus the file's recorded total for the rest.
	FreePageN int
	// PendingPageN is the number of freed pages not yet reusable because a
	// reader or the fallback state can still see them.
	PendingPageN int
	// FreeAlloc is FreePageN × page size, in bytes.
	FreeAlloc int
	// FreelistInuse is the bytes of free-space maps in memory (region maps
	// loaded); bbolt reports its freelist size here, which raft-boltdb graphs.
	FreelistInuse int

	// TxN is the number of read transactions started.
	TxN int
	// OpenTxN is the number of read transactions open now.
	OpenTxN int

	// rivet's own cumulative I/O counters, from the file seam.

	// PagesWritten counts pages written (data, free-space maps and metas).
	PagesWritten int64
	// BytesWritten counts bytes written.
	BytesWritten int64
	// WriteRuns counts write calls after coalescing adjacent pages.
	WriteRuns int64
	// Flushes counts flushes (fdatasync or the platform's equivalent).
	Flushes int64
	// PagesRead counts pages read with pread: Open's metas and lazy loads of
	// free-space maps. Reads through the memory map, recovery's verification
	// among them (Recovery.PagesVerified counts those), are not counted.
	PagesRead int64
	// Commits counts committed write transactions.
	Commits int64

	// JournalWrites counts writes to the commit journal (each one append
	// and one flush of the journal file, shared by the commits it holds),
	// JournalRecords the commit records they held and JournalBytes their
	// bytes. The journal's I/O is not in the counters above, which are the
	// database file's.
	JournalWrites  int64
	JournalRecords int64
	JournalBytes   int64

	// CompactCalls counts calls of DB.Compact, the automatic compactor's
	// included.
	CompactCalls int64
	// CompactSteps counts the write transactions compaction committed
	// (DB.Compact, Options.AutoCompact).
	CompactSteps int64
	// CompactPagesRewritten counts the pages compaction steps rewrote:
	// moved below the target or packed.
	CompactPagesRewritten int64
	// CompactLongestHold is the longest compaction has held a writer off
	// at once since Open: the writer lock (a step, lowering the high-water
	// mark) or the file's writes (cutting a piece of the file).
	CompactLongestHold time.Duration
	// Compacting is set while a compaction runs; CompactPhase,
	// CompactBytesMoved and CompactBytesToMove are then its progress
	// (CompactProgress), and zero otherwise.
	Compacting         bool
	CompactPhase       string
	CompactBytesMoved  int64
	CompactBytesToMove int64
	// Latched is set once a failed flush has made the DB refuse further
	// writes (ErrLatched) until it is closed and reopened: the state an
	// operator must be alerted to. A failed write (a full disk) fails its
	// commit and does not latch.
	Latched bool
}

// Sub returns s minus other, for the counters that accumulate; gauges
// (FreePageN, PendingPageN, FreeAlloc, FreelistInuse, OpenTxN, the
// running compaction's progress and CompactLongestHold) keep s's value.
func (s *Stats) Sub(other *Stats) Stats {
	if other == nil {
		return *s
	}
	diff := *s
	diff.TxStats = s.TxStats.Sub(&other.TxStats)
	diff.TxN = s.TxN - other.TxN
	diff.PagesWritten = s.PagesWritten - other.PagesWritten
	diff.BytesWritten = s.BytesWritten - other.BytesWritten
	diff.WriteRuns = s.WriteRuns - other.WriteRuns
	diff.Flushes = s.Flushes - other.Flushes
	diff.PagesRead = s.PagesRead - other.PagesRead
	diff.Commits = s.Commits - other.Commits
	diff.JournalWrites = s.JournalWrites - other.JournalWrites
	diff.JournalRecords = s.JournalRecords - other.JournalRecords
	diff.JournalBytes = s.JournalBytes - other.JournalBytes
	diff.CompactCalls = s.CompactCalls - other.CompactCalls
	diff.CompactSteps = s.CompactSteps - other.CompactSteps
	diff.CompactPagesRewritten = s.CompactPagesRewritten - other.CompactPagesRewritten
	return diff
}

// TxStats are the statistics of one transaction, or a sum of them.
//
// The fields are kept (and deprecated, as in bbolt) because etcd and others
// read them directly; use the Get/Inc accessors, which are atomic.
type TxStats struct {
	// Deprecated: use GetPageCount or IncPageCount.
	PageCount int64 // pages allocated
	// Deprecated: use GetPageAlloc or IncPageAlloc.
	PageAlloc int64 // bytes allocated
	// Deprecated: use GetCursorCount or IncCursorCount.
	CursorCount int64 // cursors created
	// Deprecated: use GetNodeCount or IncNodeCount.
	NodeCount int64 // nodes materialised
	// Deprecated: use GetNodeDeref or IncNodeDeref.
	NodeDeref int64 // node dereferences
	// Deprecated: use GetRebalance or IncRebalance.
	Rebalance int64 // node rebalances
	// Deprecated: use GetRebalanceTime or IncRebalanceTime.
	RebalanceTime time.Duration // time spent rebalancing
	// Deprecated: use GetSplit or IncSplit.
	Split int64 // nodes split
	// Deprecated: use GetSpill or IncSpill.
	Spill int64 // nodes spilled
	// Deprecated: use GetSpillTime or IncSpillTime.
	SpillTime time.Duration // time spent spilling
	// Deprecated: use GetWrite or IncWrite.
	Write int64 // runs written
	// Deprecated: use GetWriteTime or IncWriteTime.
	WriteTime time.Duration // time spent writing and flushing
}

func (s *TxStats) add(o *TxStats) {
	addNonzero(&s.PageCount, o.GetPageCount())
	addNonzero(&s.PageAlloc, o.GetPageAlloc())
	addNonzero(&s.CursorCount, o.GetCursorCount())
	addNonzero(&s.NodeCount, o.GetNodeCount())
	addNonzero(&s.NodeDeref, o.GetNodeDeref())
	addNonzero(&s.Rebalance, o.GetRebalance())
	addNonzero((*int64)(&s.RebalanceTime), int64(o.GetRebalanceTime()))
	addNonzero(&s.Split, o.GetSplit())
	addNonzero(&s.Spill, o.GetSpill())
	addNonzero((*int64)(&s.SpillTime), int64(o.GetSpillTime()))
	addNonzero(&s.Write, o.GetWrite())
	addNonzero((*int64)(&s.WriteTime), int64(o.GetWriteTime()))
}

// addNonzero adds v to *p atomically, skipping the locked instruction
// when v is zero: a short read transaction changes one or two counters of
// twelve, and folding its statistics into the DB's is on every View's path.
func addNonzero(p *int64, v int64) {
	if v != 0 {
		atomic.AddInt64(p, v)
	}
}

// Sub returns s minus other.
func (s *TxStats) Sub(other *TxStats) TxStats {
	return TxStats{
		PageCount:     s.GetPageCount() - other.GetPageCount(),
		PageAlloc:     s.GetPageAlloc() - other.GetPageAlloc(),
		CursorCount:   s.GetCursorCount() - other.GetCursorCount(),
		NodeCount:     s.GetNodeCount() - other.GetNodeCount(),
		NodeDeref:     s.GetNodeDeref() - other.GetNodeDeref(),
		Rebalance:     s.GetRebalance() - other.GetRebalance(),
		RebalanceTime: s.GetRebalanceTime() - other.GetRebalanceTime(),
		Split:         s.GetSplit() - other.GetSplit(),
		Spill:         s.GetSpill() - other.GetSpill(),
		SpillTime:     s.GetSpillTime() - other.GetSpillTime(),
		Write:         s.GetWrite() - other.GetWrite(),
		WriteTime:     s.GetWriteTime() - other.GetWriteTime(),
	}
}

// GetPageCount returns PageCount atomically.
func (s *TxStats) GetPageCount() int64 { return atomic.LoadInt64(&s.PageCount) }

// IncPageCount adds delta to PageCount atomically and returns the new value.
func (s *TxStats) IncPageCount(delta int64) int64 { return atomic.AddInt64(&s.PageCount, delta) }

// GetPageAlloc returns PageAlloc atomically.
func (s *TxStats) GetPageAlloc() int64 { return atomic.LoadInt64(&s.PageAlloc) }

// IncPageAlloc adds delta to PageAlloc atomically and returns the new value.
func (s *TxStats) IncPageAlloc(delta int64) int64 { return atomic.AddInt64(&s.PageAlloc, delta) }

// GetCursorCount returns CursorCount atomically.
func (s *TxStats) GetCursorCount() int64 { return atomic.LoadInt64(&s.CursorCount) }

// IncCursorCount adds delta to CursorCount atomically and returns the new value.
func (s *TxStats) IncCursorCount(delta int64) int64 { return atomic.AddInt64(&s.CursorCount, delta) }

// GetNodeCount returns NodeCount atomically.
func (s *TxStats) GetNodeCount() int64 { return atomic.LoadInt64(&s.NodeCount) }

// IncNodeCount adds delta to NodeCount atomically and returns the new value.
func (s *TxStats) IncNodeCount(delta int64) int64 { return atomic.AddInt64(&s.NodeCount, delta) }

// GetNodeDeref returns NodeDeref atomically.
func (s *TxStats) GetNodeDeref() int64 { return atomic.LoadInt64(&s.NodeDeref) }

// IncNodeDeref adds delta to NodeDeref atomically and returns the new value.
func (s *TxStats) IncNodeDeref(delta int64) int64 { return atomic.AddInt64(&s.NodeDeref, delta) }

// GetRebalance returns Rebalance atomically.
func (s *TxStats) GetRebalance() int64 { return atomic.LoadInt64(&s.Rebalance) }

// IncRebalance adds delta to Rebalance atomically and returns the new value.
func (s *TxStats) IncRebalance(delta int64) int64 { return atomic.AddInt64(&s.Rebalance, delta) }

// GetRebalanceTime returns RebalanceTime atomically.
func (s *TxStats) GetRebalanceTime() time.Duration {
	return time.Duration(atomic.LoadInt64((*int64)(&s.RebalanceTime)))
}

// IncRebalanceTime adds delta to RebalanceTime atomically and returns the new value.
func (s *TxStats) IncRebalanceTime(delta time.Duration) time.Duration {
	return time.Duration(atomic.AddInt64((*int64)(&s.RebalanceTime), int64(delta)))
}

// GetSplit returns Split atomically.
func (s *TxStats) GetSplit() int64 { return atomic.LoadInt64(&s.Split) }

// IncSplit adds delta to Split atomically and returns the new value.
func (s *TxStats) IncSplit(delta int64) int64 { return atomic.AddInt64(&s.Split, delta) }

// GetSpill returns Spill atomically.
func (s *TxStats) GetSpill() int64 { return atomic.LoadInt64(&s.Spill) }

// IncSpill adds delta to Spill atomically and returns the new value.
func (s *TxStats) IncSpill(delta int64) int64 { return atomic.AddInt64(&s.Spill, delta) }

// GetSpillTime returns SpillTime atomically.
func (s *TxStats) GetSpillTime() time.Duration {
	return time.Duration(atomic.LoadInt64((*int64)(&s.SpillTime)))
}

// IncSpillTime adds delta to SpillTime atomically and returns the new value.
func (s *TxStats) IncSpillTime(delta time.Duration) time.Duration {
	return time.Duration(atomic.AddInt64((*int64)(&s.SpillTime), int64(delta)))
}

// GetWrite returns Write atomically.
func (s *TxStats) GetWrite() int64 { return atomic.LoadInt64(&s.Write) }

// IncWrite adds delta to Write atomically and returns the new value.
func (s *TxStats) IncWrite(delta int64) int64 { return atomic.AddInt64(&s.Write, delta) }

// GetWriteTime returns WriteTime atomically.
func (s *TxStats) GetWriteTime() time.Duration {
	return time.Duration(atomic.LoadInt64((*int64)(&s.WriteTime)))
}

// IncWriteTime adds delta to WriteTime atomically and returns the new value.
func (s *TxStats) IncWriteTime(delta time.Duration) time.Duration {
	return time.Duration(atomic.AddInt64((*int64)(&s.WriteTime), int64(delta)))
}

// BucketStats describes the resources a bucket uses (bbolt's fields).
type BucketStats struct {
	// Page counts.
	BranchPageN     int // logical branch pages
	BranchOverflowN int // extra pages of multi-page branch runs
	LeafPageN       int // logical leaf pages
	LeafOverflowN   int // extra pages of multi-page leaf runs and blob pages

	// Tree statistics.
	KeyN  int // key/value pairs
	Depth int // levels in the B+tree

	// Page size utilisation.
	BranchAlloc int // bytes allocated for branch pages
	BranchInuse int // bytes used for branch data
	LeafAlloc   int // bytes allocated for leaf pages
	LeafInuse   int // bytes used for leaf data

	// Bucket statistics.
	BucketN           int // buckets, including the top bucket
	InlineBucketN     int // always 0: rivet does not inline buckets
	InlineBucketInuse int // always 0
}

// Add adds other's counts to s; Depth becomes the larger of the two.
func (s *BucketStats) Add(other BucketStats) {
	s.BranchPageN += other.BranchPageN
	s.BranchOverflowN += other.BranchOverflowN
	s.LeafPageN += other.LeafPageN
	s.LeafOverflowN += other.LeafOverflowN
	s.KeyN += other.KeyN
	if s.Depth < other.Depth {
		s.Depth = other.Depth
	}
	s.BranchAlloc += other.BranchAlloc
	s.BranchInuse += other.BranchInuse
	s.LeafAlloc += other.LeafAlloc
	s.LeafInuse += other.LeafInuse
	s.BucketN += other.BucketN
	s.InlineBucketN += other.InlineBucketN
	s.InlineBucketInuse += other.InlineBucketInuse
}

package rivet

import (
	"fmt"
	"time"
)

type durabilityMode uint8

const (
	modeFull durabilityMode = iota
	modeBarrier
	modePeriodic
	modeNone
)

// Durability says when a commit becomes durable. Every mode is
// crash-consistent: after a power loss or a crash the file opens at some
// committed state and passes Check. The modes differ only in how much
// recent work a crash can lose, and in what a commit costs:
//
//   - Full (the default): Commit returns once the transaction is durable:
//     one flush per sync point (fdatasync on Linux, F_FULLFSYNC on macOS,
//     FlushFileBuffers on Windows). Concurrent commits share flushes (group
//     commit). A crash loses nothing that Commit acknowledged. Readers see
//     a transaction once it is durable.
//   - Barrier: like Full, but each sync point uses a write barrier
//     (F_BARRIERFSYNC on macOS: ordered, not forced out of the drive's
//     cache), with a full flush at least every Barrier interval (1 s). On
//     Linux and Windows a barrier is a full flush, so Barrier is Full. A
//     power loss can lose the commits since the last full flush.
//   - Periodic(d): Commit returns as soon as the transaction is written to
//     the file (no flush) and readers see it at once; a sync point runs
//     every d. A crash loses at most the commits of the last d (plus the
//     sync point in flight).
//   - None: no flush except at DB.Sync and Close (bbolt's NoSync, but
//     crash-consistent). A crash loses everything since the last Sync.
//
// In Periodic and None, pages freed since the last sync point cannot be
// reused before the next one (the file must still hold the last durable
// state). rivet starts a sync point early, in the background, when such
// pages exceed a quarter of the file (at least 4,096 pages), and makes a
// commit wait for one past twice that, which bounds the file's growth.
type Durability struct {
	mode     durabilityMode
	interval time.Duration
}

// The fixed durability modes (Periodic takes an interval).
var (
	// Full makes every acknowledged commit durable (the default).
	Full = Durability{mode: modeFull}
	// Barrier orders commits with write barriers and flushes fully every
	// second; see Durability.
	Barrier = Durability{mode: modeBarrier, interval: time.Second}
	// None flushes only at DB.Sync and Close; see Durability.
	None = Durability{mode: modeNone}
)

// DefaultPeriodicInterval is the interval of Periodic(0).
const DefaultPeriodicInterval = time.Second

// Periodic returns the mode that runs a sync point every d (1 s if d <= 0).
func Periodic(d time.Duration) Durability {
	if d <= 0 {
		d = DefaultPeriodicInterval
	}
	return Durability{mode: modePeriodic, interval: d}
}

// String names the mode.
func (d Durability) String() string {
	switch d.mode {
	case modeFull:
		return "Full"
	case modeBarrier:
		return "Barrier"
	case modePeriodic:
		return fmt.Sprintf("Periodic(%s)", d.interval)
	default:
		return "None"
	}
}

// syncsEachCommit reports whether Commit waits for durability.
func (d Durability) syncsEachCommit() bool { return d.mode == modeFull || d.mode == modeBarrier }

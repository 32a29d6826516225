// Package pagewalk finds the use of every page of a snapshot: which pages
// are metas and region-map slots, which runs the trees reach (with the
// bucket that owns each and its depth), which are free, and which are
// damaged, leaked or of unknown state (docs/design.md §3.7).
//
// It reads the snapshot's bytes through internal/page, validates the trees
// with internal/btree's walker (the one Check uses, so both find the same
// problems) and reads free sets through internal/spacemap. The root
// package's Tx.WalkPages and Tx.Page are built on it: the root decides
// where the free set comes from, holds the locks that guard it, and turns
// each Use into its public PageUse.
package pagewalk

import "github.com/rivetkv/rivet/internal/page"

// Kind says what a run of pages is used for. The root package maps each
// kind to its public PageKind of the same name.
type Kind uint8

// The kinds. Every page in [0, HWM) is exactly one of them.
const (
	// Meta is one of the two meta pages (pages 0 and 1).
	Meta Kind = iota + 1
	// RegionMap is one of a region's two map slots, current or not.
	RegionMap
	// Branch, Leaf and Blob are runs reachable from the snapshot's root:
	// tree nodes and the extents of large values.
	Branch
	Leaf
	Blob
	// Free is free in the snapshot's free set.
	Free
	// Unreachable is neither reachable nor free: leaked, or below a
	// damaged page.
	Unreachable
	// Damaged is a run a valid page points to that failed validation, or
	// pages below the HWM past the end of the file.
	Damaged
	// Unknown is not reachable, and whether it is free is not known.
	Unknown
)

// Checksum says whether a run's checksum was verified.
type Checksum uint8

const (
	// ChecksumNotStored: nothing records a checksum for the run.
	ChecksumNotStored Checksum = iota
	// ChecksumOK: the run's CRC-32C matches its record.
	ChecksumOK
	// ChecksumBad: it does not, or the run could not be read.
	ChecksumBad
)

// Use describes one run of pages; the fields mean what the root package's
// PageUse fields of the same names mean.
type Use struct {
	ID       page.ID
	Pages    int
	Kind     Kind
	Txid     uint64
	Count    int
	Checksum Checksum
	// Bucket is shared between uses and owned by the Walk: it must not be
	// modified, and it stays valid after the walk.
	Bucket  [][]byte
	Depth   int
	Key     []byte
	Current bool
	Err     error
}

package inspect

import (
	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/page"
)

// Format is a database file format Detect tells apart.
type Format int

// The formats Detect tells apart.
const (
	// FormatUnknown is neither rivet's nor bbolt's.
	FormatUnknown Format = iota
	// FormatRivet is rivet's own format.
	FormatRivet
	// FormatBbolt is bbolt's format (v1.x), which rivet opens read-only,
	// converts and salvages.
	FormatBbolt
)

// String returns "rivet", "bbolt" or "unknown".
func (f Format) String() string {
	switch f {
	case FormatRivet:
		return "rivet"
	case FormatBbolt:
		return "bbolt"
	}
	return "unknown"
}

// Detect names the format of the meta page b starts with: rivet's when b
// starts with rivet's magic (4 bytes), bbolt's when b holds a bbolt meta
// page's header flags and magic in either byte order (20 bytes). It
// verifies nothing else, so a page that passes may still be damaged. Pass
// a file's first bytes to test its meta 0, or the bytes at one page size
// in to test its meta 1, which is whole when meta 0 is not.
func Detect(b []byte) Format {
	switch {
	case page.HasMagic(b):
		return FormatRivet
	case boltfile.MetaOrder(b) != nil:
		return FormatBbolt
	}
	return FormatUnknown
}

// IsBbolt reports whether b starts with a bbolt meta page's header flags
// and magic: Detect(b) == FormatBbolt.
func IsBbolt(b []byte) bool { return Detect(b) == FormatBbolt }

// DetectSize is how many bytes Detect needs to tell every format.
const DetectSize = boltfile.HeaderSize + 4

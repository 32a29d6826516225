package page

import "encoding/binary"

// HasMagic reports whether b starts with rivet's meta magic: the cheapest
// sign that a page is a rivet meta, for telling file formats apart. It
// verifies nothing else.
func HasMagic(b []byte) bool {
	return len(b) >= 4 && binary.LittleEndian.Uint32(b[metaOffMagic:]) == Magic
}

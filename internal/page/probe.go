package page

import "encoding/binary"

// HasMagic reports whether b starts with rivet's meta magic: the cheapest
// sign that a page is a rivet meta, for telling file formats apart. It
// verifies nothing else.
func HasMagic(b []byte) bool {
	return len(b) >= 4 && binary.LittleEndian.Uint32(b[metaOffMagic:]) == Magic
}

// MetaVersion returns the format version field of a meta page, for
// reports: ok is false unless b starts with rivet's magic. DecodeMeta
// accepts versions 1 to FormatVersion; the value is what the page says,
// verified only when DecodeMeta accepts the same bytes.
func MetaVersion(b []byte) (version uint32, ok bool) {
	if len(b) < metaOffVersion+4 || !HasMagic(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[metaOffVersion:]), true
}

package page

import (
	"encoding/binary"
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
)

// Meta field offsets (docs/design.md §2.2).
const (
	metaOffMagic        = 0
	metaOffVersion      = 4
	metaOffPageSize     = 8
	metaOffChecksum     = 12
	metaOffTxid         = 16
	metaOffSteady       = 24
	metaOffHWM          = 32
	metaOffRoot         = 40
	metaOffRootTxid     = 48
	metaOffRootSum      = 56
	metaOffRegionPages  = 60
	metaOffRegionCount  = 64
	metaOffFlags        = 68
	metaOffFreePages    = 72
	metaOffFirstFree    = 80
	metaOffDeltaCount   = 84 // format 2; reserved (zero) in format 1
	metaOffJournalSalt  = 88 // format 4; reserved (zero) before
	metaOffReserved     = 96
	metaFixedSize       = 128
	minHWM              = MinPages // two metas and region 0's two map slots
	maxBitmapRegionsPer = 4        // regions per byte pair: (pageSize-128)*8/2 = (pageSize-128)*4
)

// MinPages is the smallest high-water mark a state can have: the two metas
// and region 0's two map slots. A file shorter than MinPages pages holds no
// state rivet wrote (creation makes the file that long durable before it
// writes a meta).
const MinPages = 4

// Ref points from a parent to a child run: the child's page id, the txid in
// the child's header and the CRC-32C of the child's whole run.
//
// Invariant: a parent's Ref is written only after the child's bytes are
// final, so the checksum is exact (the Merkle property recovery relies on).
type Ref struct {
	ID       ID
	Txid     uint64
	Checksum uint32
}

// IsZero reports whether r points nowhere (an empty tree).
func (r Ref) IsZero() bool { return r.ID == 0 }

// Meta is a decoded meta page.
type Meta struct {
	// Version is the format version of the page the meta was decoded from
	// (an older one is read as this format, see DecodeMeta); zero for a
	// meta built in memory. EncodeMeta always writes FormatVersion.
	Version         uint32
	PageSize        int
	Txid            uint64
	Steady          uint64 // the sync point this one builds on
	HWM             uint64
	Root            Ref // root of the root bucket's tree
	RegionPages     uint64
	FreePages       uint64
	FirstFreeRegion uint32
	Selector        []byte // bit r set: region r's current map is slot B
	Changed         []byte // bit r set: region r's map was written by this sync point
	// JournalSalt names the commit journal whose records extend this state
	// (docs/design.md §3.8): the journal beside the file applies only if
	// its header carries the same salt. Zero: no journal (formats 1-3,
	// copies).
	JournalSalt uint64
	// Delta lists the pages whose state differs from what the selected
	// region maps say (docs/design.md §2.2, §4): the free set of this state
	// is the selected maps with these runs applied. Ascending, disjoint,
	// each inside one region's data pages below the HWM, none in a region
	// this sync point wrote.
	Delta []DeltaRun
}

// DeltaRun is one entry of a meta's free-space delta: pages [ID, ID+N) are
// free (Free) or in use (!Free) in the meta's state, whatever the region map
// named by its selector says.
type DeltaRun struct {
	ID   ID
	N    uint64
	Free bool
}

// DeltaRunSize is the encoded size of a DeltaRun: pgid (8 bytes), then a
// uint32 whose bit 31 is Free and whose low 31 bits are N.
const DeltaRunSize = 12

// maxDeltaRunPages is the longest run one entry can hold (31 bits).
const maxDeltaRunPages = 1<<31 - 1

// MaxDeltaRuns returns how many delta runs fit in a meta page of pageSize
// whose state has regions regions, after the fixed part and the two
// bitmaps.
func MaxDeltaRuns(pageSize int, regions uint64) int {
	room := pageSize - metaFixedSize - 2*BitmapLen(regions)
	if room < 0 {
		return 0
	}
	return room / DeltaRunSize
}

// RegionCount returns the number of regions covering pages [0, HWM).
func (m *Meta) RegionCount() uint64 {
	return (m.HWM + m.RegionPages - 1) / m.RegionPages
}

// MaxRegions returns how many regions a meta page of pageSize can describe.
func MaxRegions(pageSize int) uint64 { return uint64(pageSize-metaFixedSize) * maxBitmapRegionsPer }

// BitmapLen returns the byte length of a per-region bitmap for n regions.
func BitmapLen(n uint64) int { return int((n + 7) / 8) }

// EncodeMeta writes m into buf (len(buf) == m.PageSize), zeroing the rest.
// The selector and changed bitmaps must be BitmapLen(m.RegionCount()) long,
// and m.Delta must hold at most MaxDeltaRuns runs, each of at most 2^31-1
// pages (the spacemap never builds more; a longer delta would overrun buf).
func EncodeMeta(buf []byte, m *Meta) {
	clear(buf)
	le := binary.LittleEndian
	le.PutUint32(buf[metaOffMagic:], Magic)
	le.PutUint32(buf[metaOffVersion:], FormatVersion)
	le.PutUint32(buf[metaOffPageSize:], uint32(m.PageSize))
	le.PutUint64(buf[metaOffTxid:], m.Txid)
	le.PutUint64(buf[metaOffSteady:], m.Steady)
	le.PutUint64(buf[metaOffHWM:], m.HWM)
	le.PutUint64(buf[metaOffRoot:], m.Root.ID)
	le.PutUint64(buf[metaOffRootTxid:], m.Root.Txid)
	le.PutUint32(buf[metaOffRootSum:], m.Root.Checksum)
	le.PutUint32(buf[metaOffRegionPages:], uint32(m.RegionPages))
	n := m.RegionCount()
	le.PutUint32(buf[metaOffRegionCount:], uint32(n))
	le.PutUint64(buf[metaOffFreePages:], m.FreePages)
	le.PutUint32(buf[metaOffFirstFree:], m.FirstFreeRegion)
	le.PutUint64(buf[metaOffJournalSalt:], m.JournalSalt)
	bl := BitmapLen(n)
	copy(buf[metaFixedSize:metaFixedSize+bl], m.Selector)
	copy(buf[metaFixedSize+bl:metaFixedSize+2*bl], m.Changed)
	end := metaFixedSize + 2*bl
	le.PutUint32(buf[metaOffDeltaCount:], uint32(len(m.Delta)))
	for _, d := range m.Delta {
		le.PutUint64(buf[end:], d.ID)
		v := uint32(d.N)
		if d.Free {
			v |= 1 << 31
		}
		le.PutUint32(buf[end+8:], v)
		end += DeltaRunSize
	}
	le.PutUint32(buf[metaOffChecksum:], ChecksumSkipping(buf[:end], metaOffChecksum))
}

// MetaPageSize returns the page size a meta header names, if b starts with
// rivet's magic and a supported page size. It lets Open read meta 0 in full
// after reading only its first bytes.
func MetaPageSize(b []byte) (int, bool) {
	if len(b) < metaFixedSize || binary.LittleEndian.Uint32(b[metaOffMagic:]) != Magic {
		return 0, false
	}
	ps := int(binary.LittleEndian.Uint32(b[metaOffPageSize:]))
	return ps, ValidPageSize(ps)
}

// IsZeroPage reports whether every byte of b is zero.
func IsZeroPage(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ClaimedTxid returns the txid field of a meta page that failed to decode,
// for reports: ok is false unless the page still starts with rivet's magic.
// The value is not verified and must never be used to open a state.
func ClaimedTxid(buf []byte) (txid uint64, ok bool) {
	if len(buf) < metaOffTxid+8 || binary.LittleEndian.Uint32(buf[metaOffMagic:]) != Magic {
		return 0, false
	}
	return binary.LittleEndian.Uint64(buf[metaOffTxid:]), true
}

// DecodeMeta decodes and validates the meta page in buf, read from page id
// (0 or 1). It returns rerrors.ErrInvalid-wrapping errors for a page that is
// not a rivet meta, rerrors.ErrVersionMismatch for a newer format, and a
// CorruptError for a meta that is rivet's but damaged.
func DecodeMeta(id ID, buf []byte) (*Meta, error) {
	le := binary.LittleEndian
	if len(buf) < metaFixedSize {
		return nil, Corruptf(id, "meta page too short (%d bytes)", len(buf))
	}
	if le.Uint32(buf[metaOffMagic:]) != Magic {
		return nil, rerrors.ErrInvalid
	}
	// Older formats are subsets of this one, read by the same decoding:
	// format 1 is format 2 without a delta (its delta count field was
	// reserved and zero), format 2 is format 3 without inline buckets (a
	// bucket record never had the inline flag), format 3 is format 4
	// without a journal (its journal salt bytes were reserved and zero).
	// The first sync point of a
	// newer build writes a meta of its own format, which older builds
	// refuse, as they must once an inline bucket may exist.
	version := le.Uint32(buf[metaOffVersion:])
	if version < 1 || version > FormatVersion {
		return nil, rerrors.ErrVersionMismatch
	}
	ps := int(le.Uint32(buf[metaOffPageSize:]))
	if !ValidPageSize(ps) {
		return nil, Corruptf(id, "meta page size %d is not supported", ps)
	}
	if len(buf) < ps {
		return nil, Corruptf(id, "meta page shorter than its page size %d", ps)
	}
	m := &Meta{
		Version:         version,
		PageSize:        ps,
		Txid:            le.Uint64(buf[metaOffTxid:]),
		Steady:          le.Uint64(buf[metaOffSteady:]),
		HWM:             le.Uint64(buf[metaOffHWM:]),
		Root:            Ref{ID: le.Uint64(buf[metaOffRoot:]), Txid: le.Uint64(buf[metaOffRootTxid:]), Checksum: le.Uint32(buf[metaOffRootSum:])},
		RegionPages:     uint64(le.Uint32(buf[metaOffRegionPages:])),
		FreePages:       le.Uint64(buf[metaOffFreePages:]),
		FirstFreeRegion: le.Uint32(buf[metaOffFirstFree:]),
		JournalSalt:     le.Uint64(buf[metaOffJournalSalt:]),
	}
	if m.RegionPages != RegionPages(ps) {
		return nil, Corruptf(id, "meta region pages %d, want %d for page size %d", m.RegionPages, RegionPages(ps), ps)
	}
	count := uint64(le.Uint32(buf[metaOffRegionCount:]))
	if count > MaxRegions(ps) {
		return nil, Corruptf(id, "meta region count %d exceeds the maximum %d", count, MaxRegions(ps))
	}
	bl := BitmapLen(count)
	end := metaFixedSize + 2*bl
	if end > ps {
		return nil, Corruptf(id, "meta bitmaps overrun the page")
	}
	deltas := uint64(le.Uint32(buf[metaOffDeltaCount:]))
	if deltas > uint64(MaxDeltaRuns(ps, count)) {
		return nil, Corruptf(id, "meta delta of %d runs overruns the page (room for %d)", deltas, MaxDeltaRuns(ps, count))
	}
	bitmapsEnd := end
	end += int(deltas) * DeltaRunSize
	if got, want := le.Uint32(buf[metaOffChecksum:]), ChecksumSkipping(buf[:end], metaOffChecksum); got != want {
		return nil, Corruptf(id, "meta checksum %08x, computed %08x", got, want)
	}
	// Only structural checks below: the checksum matched, so a failure here
	// means a bug or a deliberately forged page; still never trust it.
	if f := le.Uint32(buf[metaOffFlags:]); f != 0 {
		return nil, Corruptf(id, "meta flags %#x, want 0", f)
	}
	if m.JournalSalt != 0 && version < 4 {
		return nil, Corruptf(id, "format-%d meta with a journal salt (reserved before format 4)", version)
	}
	if !IsZeroPage(buf[metaOffReserved:metaFixedSize]) {
		return nil, Corruptf(id, "meta reserved bytes are not zero")
	}
	if m.HWM > MaxRegions(ps)*RegionPages(ps) {
		return nil, Corruptf(id, "meta high-water mark %d past the largest file", m.HWM)
	}
	if m.HWM < minHWM {
		return nil, Corruptf(id, "meta high-water mark %d below the minimum %d", m.HWM, minHWM)
	}
	if m.RegionCount() != count {
		return nil, Corruptf(id, "meta region count %d disagrees with high-water mark %d", count, m.HWM)
	}
	if m.Steady > m.Txid {
		return nil, Corruptf(id, "meta steady txid %d is after its txid %d", m.Steady, m.Txid)
	}
	if m.Root.ID != 0 && (m.Root.ID < minHWM || m.Root.ID >= m.HWM) {
		return nil, Corruptf(id, "meta root page %d outside [%d, %d)", m.Root.ID, minHWM, m.HWM)
	}
	if m.Root.Txid > m.Txid {
		return nil, Corruptf(id, "meta root written by txn %d after the meta's txn %d", m.Root.Txid, m.Txid)
	}
	m.Selector = append([]byte(nil), buf[metaFixedSize:metaFixedSize+bl]...)
	m.Changed = append([]byte(nil), buf[metaFixedSize+bl:bitmapsEnd]...)
	if deltas > 0 {
		m.Delta = make([]DeltaRun, deltas)
		for i := range m.Delta {
			off := bitmapsEnd + i*DeltaRunSize
			v := le.Uint32(buf[off+8:])
			m.Delta[i] = DeltaRun{ID: le.Uint64(buf[off:]), N: uint64(v &^ (1 << 31)), Free: v>>31 != 0}
		}
		if err := CheckDelta(m.Delta, ps, m.HWM, m.Changed); err != nil {
			return nil, Corruptf(id, "meta delta: %v", err)
		}
	}
	return m, nil
}

// CheckDelta validates the structure of a meta's delta (see Meta.Delta)
// for a state with high-water mark hwm whose sync point wrote the regions
// set in changed. It says nothing about whether each run agrees with the
// region maps; the spacemap checks that when it loads a region.
func CheckDelta(delta []DeltaRun, pageSize int, hwm uint64, changed []byte) error {
	rp := RegionPages(pageSize)
	var prevEnd uint64
	for i, d := range delta {
		if d.N == 0 || d.N > maxDeltaRunPages {
			return fmt.Errorf("run %d at page %d has length %d", i, d.ID, d.N)
		}
		end := d.ID + d.N
		if end < d.ID || end > hwm {
			return fmt.Errorf("run %d (%d+%d) reaches past the high-water mark %d", i, d.ID, d.N, hwm)
		}
		if i > 0 && d.ID < prevEnd {
			return fmt.Errorf("run %d at page %d is out of order or overlaps the previous run", i, d.ID)
		}
		r := d.ID / rp
		if (end-1)/rp != r {
			return fmt.Errorf("run %d (%d+%d) crosses the end of region %d", i, d.ID, d.N, r)
		}
		if d.ID < RegionFirstData(pageSize, r) {
			return fmt.Errorf("run %d (%d+%d) covers a meta or map slot of region %d", i, d.ID, d.N, r)
		}
		if BitmapGet(changed, r) {
			return fmt.Errorf("run %d (%d+%d) is in region %d, whose map this sync point wrote", i, d.ID, d.N, r)
		}
		prevEnd = end
	}
	return nil
}

// BitmapGet reports whether bit i of bitmap b is set (LSB first).
func BitmapGet(b []byte, i uint64) bool {
	if i/8 >= uint64(len(b)) {
		return false
	}
	return b[i/8]&(1<<(i%8)) != 0
}

// BitmapSet sets bit i of b to v; b must be long enough.
func BitmapSet(b []byte, i uint64, v bool) {
	if v {
		b[i/8] |= 1 << (i % 8)
	} else {
		b[i/8] &^= 1 << (i % 8)
	}
}

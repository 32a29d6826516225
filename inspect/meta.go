package inspect

import (
	"io"

	"github.com/rivetkv/rivet/internal/page"
)

// Meta is a decoded, validated meta page: the root of one committed state.
type Meta struct {
	PageSize      int
	FormatVersion uint32
	Txid          uint64
	// Steady is the sync point this state builds on.
	Steady uint64
	// HWM is the high-water mark: the state's pages are [0, HWM).
	HWM uint64
	// Root is the root bucket's tree.
	Root            Ref
	RegionPages     uint64
	Regions         uint64
	FreePages       uint64
	FirstFreeRegion uint32
	// SlotB lists the regions whose current map is in slot B (the others'
	// is in slot A).
	SlotB []uint64
	// Changed lists the regions whose map this sync point wrote.
	Changed []uint64
	// Delta lists the pages whose state differs from what the selected
	// region maps say, ascending.
	Delta []DeltaRun
}

// DeltaRun is one run of a meta's free-space delta: pages [First,
// First+N) are free (Free) or in use, whatever the region map says.
type DeltaRun struct {
	First uint64
	N     uint64
	Free  bool
}

// DecodeMeta decodes and validates the meta page b read from slot (0 or
// 1). The error wraps errors.ErrInvalid for a page that is not a rivet
// meta, errors.ErrVersionMismatch for a newer format, and is a
// *errors.CorruptError for a rivet meta that is damaged.
func DecodeMeta(slot uint64, b []byte) (*Meta, error) {
	m, err := page.DecodeMeta(slot, b)
	if err != nil {
		return nil, err
	}
	return metaOf(m), nil
}

// metaOf describes a decoded meta.
func metaOf(m *page.Meta) *Meta {
	out := &Meta{
		PageSize: m.PageSize, FormatVersion: m.Version, Txid: m.Txid, Steady: m.Steady, HWM: m.HWM,
		Root: refOf(m.Root), RegionPages: m.RegionPages, Regions: m.RegionCount(), FreePages: m.FreePages,
		FirstFreeRegion: m.FirstFreeRegion,
	}
	for r := range out.Regions {
		if page.BitmapGet(m.Selector, r) {
			out.SlotB = append(out.SlotB, r)
		}
		if page.BitmapGet(m.Changed, r) {
			out.Changed = append(out.Changed, r)
		}
	}
	for _, d := range m.Delta {
		out.Delta = append(out.Delta, DeltaRun{First: d.ID, N: d.N, Free: d.Free})
	}
	return out
}

// ClaimedTxid returns the transaction a meta page that failed to decode
// says it holds, for reports: ok is false unless b still starts with
// rivet's magic. The value is not verified.
func ClaimedTxid(b []byte) (txid uint64, ok bool) { return page.ClaimedTxid(b) }

// ReadMetas reads and decodes both meta pages of the rivet file r, size
// bytes long, as Open does. The page size is the one meta 0's header
// names; when meta 0 names none, meta 1 is looked for at every page size
// rivet supports, so a damaged meta 0 does not hide meta 1. errs[i] says
// why slot i holds no valid meta (metas[i] is then nil).
func ReadMetas(r io.ReaderAt, size int64) (metas [2]*Meta, errs [2]error) {
	ms, errs := page.ReadMetas(r, size, nil)
	for slot, m := range ms {
		if m != nil {
			metas[slot] = metaOf(m)
		}
	}
	return metas, errs
}

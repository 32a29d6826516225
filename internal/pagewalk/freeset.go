package pagewalk

import (
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/spacemap"
)

// FreeSource says where the snapshot's free set comes from. The caller
// chooses it from state the walk does not see — whether the DB is
// read-only, which state is the newest, whether a writer runs — and holds
// whatever guards Space until ReadFreeSet returns.
//
// At most one field is set. With neither, the free set is read from the
// region maps the snapshot's meta selects, with the meta's delta applied:
// right for a read-only DB, whose map slots nothing rewrites.
type FreeSource struct {
	// Unknown says why the free set cannot be known: the pages no tree
	// reaches are reported as Unknown, with it as their error.
	Unknown error
	// Space is a free-space map holding exactly the snapshot's free set.
	Space *spacemap.Map
}

// ReadFreeSet records the snapshot's free set from src, where it can be
// known: a region whose map cannot be read leaves its pages Unknown and
// the others known.
func (w *Walk) ReadFreeSet(src FreeSource) {
	w.free = make([]uint64, (w.pages+63)/64)
	w.regionErr = map[uint64]error{}
	switch {
	case src.Unknown != nil:
		w.freeErr = src.Unknown
	case src.Space != nil:
		w.collect(src.Space)
	default:
		m, err := spacemap.New(spacemap.Config{
			PageSize:        w.ps,
			HWM:             w.meta.HWM,
			Txid:            w.meta.Txid,
			Selector:        w.meta.Selector,
			FirstFreeRegion: w.meta.FirstFreeRegion,
			FreePages:       w.meta.FreePages,
			Delta:           w.meta.Delta,
			Loader:          loader{w},
		})
		if err != nil {
			w.freeErr = fmt.Errorf("the free set of the snapshot cannot be read: %w", err)
			return
		}
		w.collect(m)
	}
}

// collect copies m's free set into w.free, region by region.
func (w *Walk) collect(m *spacemap.Map) {
	w.countErr = m.ForEachRegionFree(func(r uint64, free []uint64, err error) error {
		if err != nil {
			w.regionErr[r] = err
			return nil
		}
		// A region is a whole number of words (R is a multiple of 64 for
		// every page size), so its bitmap lands word for word.
		base := r * w.rp / 64
		for i, word := range free {
			if base+uint64(i) >= uint64(len(w.free)) {
				break
			}
			w.free[base+uint64(i)] = word
		}
		return nil
	})
}

// loader reads region maps from the snapshot's mapping.
type loader struct{ w *Walk }

func (l loader) ReadPages(id page.ID, n uint64) ([]byte, error) { return l.w.fetch(id, n) }

package spacemap

import (
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
)

// ForEachRegionFree loads every region of the Map's state and calls fn
// once per region, in ascending order, with the region's free bitmap (bit
// i set: page r·R+i is free in the newest committed state, pending frees
// included; valid only during the call, and not to be modified) or, when
// the region's map could not be read or does not agree with the meta
// (damaged, torn, a delta run that changes nothing), the error and a nil
// bitmap.
//
// Unlike ForEachFree it does not stop at a region that fails to load: a
// tool that shows a damaged file reports that region and goes on with the
// others. When every region loaded, it returns an error matching
// errors.ErrCorrupt if their free pages do not add up to the meta's count
// (the check ForEachFree makes); otherwise it returns fn's first error.
// Memory is one bitmap per region, as ForEachFree's. Called inside a
// transaction, it shows that transaction's allocations but not its frees.
func (m *Map) ForEachRegionFree(fn func(r uint64, free []uint64, err error) error) error {
	count := m.regionCount()
	var total uint64
	failed := false
	for r := uint64(0); r < count; r++ {
		reg, err := m.region(r)
		if err != nil {
			failed = true
			if err := fn(r, nil, err); err != nil {
				return err
			}
			continue
		}
		total += reg.nfree
		if err := fn(r, reg.free, nil); err != nil {
			return err
		}
	}
	if !failed && total != m.freePages {
		return fmt.Errorf("spacemap: the meta counts %d free pages, the region maps hold %d: %w", m.freePages, total, rerrors.ErrCorrupt)
	}
	return nil
}

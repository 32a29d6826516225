package spacemap

import (
	"fmt"

	"github.com/rivetkv/rivet/internal/page"
)

// AllocateFrom is Allocate for runs that should follow one another on
// disk in the order they are asked for: the lowest run of n allocatable
// pages at or after page from (and, under a limit, below it), else what
// Allocate returns. Compaction passes from as the end of the leaf it moved
// last, so the leaves it moves land in key order, each after the one
// before, however its steps interleave with other transactions; holes
// that open behind the stream (the pages of branches a later step copies
// again) are left to first fit. With from 0 it is Allocate.
func (m *Map) AllocateFrom(n uint64, from page.ID) (page.ID, error) {
	m.mustTx("AllocateFrom")
	if m.tx.shrink != nil {
		panic("spacemap: AllocateFrom after ShrinkTo in one transaction")
	}
	if n == 0 || n > m.maxRun {
		return 0, fmt.Errorf("spacemap: cannot allocate a run of %d pages (1..%d)", n, m.maxRun)
	}
	if from == 0 || from >= m.hwm {
		return m.Allocate(n)
	}
	count := m.regionCount()
	lim := m.tx.limit
	if lim != 0 {
		count = min(count, (lim+m.rp-1)/m.rp)
	}
	for r := from / m.rp; r < count; r++ {
		reg := m.regions[r]
		if reg == nil {
			if r < m.diskHint {
				continue // unloaded below the meta's hint: nothing free there
			}
			var err error
			if reg, err = m.load(r); err != nil {
				return 0, err
			}
		}
		if reg.nalloc < n || (reg.noFit != 0 && n >= reg.noFit) {
			continue
		}
		bit := uint64(reg.allocHint) * 64
		if r == from/m.rp {
			bit = max(bit, from-r*m.rp)
		}
		// A failed search from bit says nothing of the bits before it, so
		// it leaves noFit alone.
		start, ok := findRun(reg.alloc, bit, n)
		if !ok {
			continue
		}
		if lim != 0 && r*m.rp+start+n > lim {
			break
		}
		m.take(reg, start, n)
		id := r*m.rp + start
		m.tx.allocs = append(m.tx.allocs, run{id, n})
		return id, nil
	}
	return m.Allocate(n)
}

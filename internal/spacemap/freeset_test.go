package spacemap

import (
	"errors"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// TestForEachRegionFree: every region is delivered, with its free bits, in
// order; a region whose map is damaged comes with its error and the walk
// goes on to the next; a free count that disagrees with the maps is
// reported once every region loaded.
func TestForEachRegionFree(t *testing.T) {
	d, ms, slot := corruptState(t)
	type got struct {
		r    uint64
		free uint64
		err  error
	}
	collect := func(m *Map) ([]got, error) {
		var out []got
		err := m.ForEachRegionFree(func(r uint64, free []uint64, err error) error {
			g := got{r: r, err: err}
			if free != nil {
				g.free = popcount(free)
				if r == 0 && countRange(free, 100, 3) != 3 {
					t.Errorf("region 0: pages 100-102 not free")
				}
			}
			out = append(out, g)
			return nil
		})
		return out, err
	}
	regions, err := collect(reopen(t, d, ms))
	if err != nil || len(regions) != 2 || regions[0].free != 3 || regions[1].free != 0 || regions[0].err != nil || regions[1].err != nil {
		t.Fatalf("healthy: %+v, %v", regions, err)
	}

	bad := ms
	bad.freePages++
	if _, err := collect(reopen(t, d, bad)); err == nil {
		t.Fatal("a free count the maps do not add up to was not reported")
	}

	d.pages[slot][page.HeaderSize+12] ^= 1 // region 0's map fails its checksum
	regions, err = collect(reopen(t, d, ms))
	if err != nil || len(regions) != 2 || regions[1].err != nil {
		t.Fatalf("damaged region 0: %+v, %v", regions, err)
	}
	wantCorrupt(t, regions[0].err, "damaged map")

	stop := errors.New("stop")
	calls := 0
	if err := reopen(t, d, ms).ForEachRegionFree(func(uint64, []uint64, error) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, calls)
	}
}

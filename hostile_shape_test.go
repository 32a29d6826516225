package rivet

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/vfs"
	"github.com/rivetkv/rivet/testing/hostile"
)

// Hostile tree shapes (bbolt #877: Check ran for 30 minutes on a damaged
// file): trees whose pages are shared or form cycles, with every checksum
// and txid consistent, so that only the shape is wrong (testing/hostile
// builds them). A walk that follows references without remembering where
// it has been does work exponential in the depth of a shared subtree, or
// never ends on a cycle. These tests assert that Check and Open's recovery
// finish, report the damage, and read a number of pages bounded by the
// file's: counted, not timed.

// shapeLevels is the depth of the shared or cyclic structures: an
// unfolding walk would take 19^20 to 31^20 steps, and the depth is below the
// walkers' depth and nesting caps, so only remembering pages can stop the
// walk early.
const shapeLevels = 20

// maxReadsPerPage bounds the pages a walk reads, as a multiple of the
// file's: each run is read once for its header and once whole, and a page
// reached a second time is not read again (btree.Walker's invariant).
const maxReadsPerPage = 2

// hostileShapeDB builds the hostile database with bucket b damaged into
// shape (see hostile.Build for fresh) and returns its path and the damage.
func hostileShapeDB(t *testing.T, shape hostile.Shape, fresh bool) (string, hostile.Damage) {
	t.Helper()
	path, img := hostileDB(t)
	d, err := hostile.Build(img, "b", shape, shapeLevels, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, d
}

// checkPagesRead runs fn with the pages Check's walk reads counted.
func checkPagesRead(fn func()) uint64 {
	var pages atomic.Uint64
	checkFetchTestHook = func(n uint64) { pages.Add(n) }
	defer func() { checkFetchTestHook = nil }()
	fn()
	return pages.Load()
}

func TestHostileShapesCheckBounded(t *testing.T) {
	for _, shape := range hostile.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			path, d := hostileShapeDB(t, shape, false)
			var r hostileResult
			read := checkPagesRead(func() { r = openHostile(t, path) })
			if r.openErr != nil {
				t.Fatalf("open: %v", r.openErr)
			}
			wantCheckNames(t, r.checkErr, d.Twice)
			if !strings.Contains(errors.Join(r.checkErr...).Error(), "reachable twice") {
				t.Errorf("no Check error says a page is reachable twice: %v", r.checkErr)
			}
			t.Logf("%d problems, first %v; Check read %d pages of a %d-page file", len(r.checkErr), r.checkErr[0], read, d.HWM)
			// The walk reached the structure (its levels, each a page) and
			// read nothing twice.
			if read < shapeLevels {
				t.Errorf("Check read %d pages, fewer than the %d levels of the structure: the count misses reads", read, shapeLevels)
			}
			if read > maxReadsPerPage*d.HWM {
				t.Errorf("Check read %d pages of a %d-page file, more than %d per page", read, d.HWM, maxReadsPerPage)
			}
			if !errors.Is(r.statsErr, rerrors.ErrCorrupt) {
				t.Errorf("Bucket.Stats: %v, want ErrCorrupt", r.statsErr)
			}
		})
	}
}

// TestHostileShapesOpenBounded damages pages the last commit wrote, so Open's
// recovery verifies them: it must refuse the state (the fallback state
// shares the damaged pages, so Open fails) after reading no more pages than
// maxReadsPerPage per page of the file beyond what Open of the undamaged
// file reads.
func TestHostileShapesOpenBounded(t *testing.T) {
	open := func(path string) (pagesRead uint64, err error) {
		counts := vfs.NewCounting(vfs.OS())
		done := make(chan error, 1)
		go func() {
			db, err := openFS(counts, path, 0o600, &Options{ReadOnly: true, Timeout: time.Second})
			if err == nil {
				err = db.Close()
			}
			done <- err
		}()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("Open of %s did not finish in 20 s", path)
		}
		return uint64(counts.Snapshot().ReadBytes) / hostilePS, err
	}
	path, _ := hostileDB(t)
	base, err := open(path)
	if err != nil {
		t.Fatalf("undamaged file: %v", err)
	}
	for _, shape := range hostile.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			path, d := hostileShapeDB(t, shape, true)
			read, err := open(path)
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			// Both states' reasons are reported: the newest state fails on
			// the shape, the fallback (which shares bucket b's pages) on
			// the damaged pages' newer txid.
			newest, fallback, ok := strings.Cut(err.Error(), "; txn ")
			if !ok || strings.Contains(newest, "stale or torn") || !strings.Contains(fallback, "stale or torn") {
				t.Errorf("Open's error does not give each state's own reason: %v", err)
			}
			t.Logf("Open read %d pages of a %d-page file (%d for the undamaged file): %v", read, d.HWM, base, err)
			if read > base+maxReadsPerPage*d.HWM {
				t.Errorf("Open read %d pages of a %d-page file, more than %d + %d per page", read, d.HWM, base, maxReadsPerPage)
			}
		})
	}
}

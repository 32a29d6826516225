package btree

import (
	"errors"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// The cursor checks key order only when it crosses to another leaf (see
// Cursor.crossed). A leaf whose own keys are out of order must not defeat
// that check: over a DAG of branches that all point to such a leaf, walks
// in both directions must still end with ErrCorrupt instead of visiting the
// leaf once per path.
func TestCursorDAGOverUnorderedLeafTerminates(t *testing.T) {
	const txid, levels = 1, 40
	runs := map[page.ID][]byte{}
	leaf := make([]byte, fuzzPS)
	// Keys out of order inside the leaf: "m" then "c".
	page.EncodeLeaf(leaf, fuzzPS, 4, txid, []page.LeafElem{{Key: []byte("m"), Value: []byte("1")}, {Key: []byte("c"), Value: []byte("2")}})
	runs[4] = leaf
	child := page.Ref{ID: 4, Txid: txid, Checksum: page.Checksum(leaf)}
	for id := page.ID(5); id < 5+levels; id++ {
		b := make([]byte, fuzzPS)
		page.EncodeBranch(b, fuzzPS, id, txid, []page.BranchElem{{Key: []byte("a"), Child: child}, {Key: []byte("z"), Child: child}})
		runs[id] = b
		child = page.Ref{ID: id, Txid: txid, Checksum: page.Checksum(b)}
	}
	img := hostileImage(5+levels, runs)
	walks := []struct {
		name  string
		start func(*Cursor) ([]byte, []byte, uint32, bool)
		step  func(*Cursor) ([]byte, []byte, uint32, bool)
	}{
		{"First/Next", (*Cursor).First, (*Cursor).Next},
		{"Last/Prev", (*Cursor).Last, (*Cursor).Prev},
	}
	for _, w := range walks {
		env := &Env{Data: img, PageSize: fuzzPS, HWM: 5 + levels, Txid: txid}
		c := Open(env, child).Cursor()
		steps := 0
		for _, _, _, ok := w.start(c); ok && steps < 10000; _, _, _, ok = w.step(c) {
			steps++
		}
		if steps >= 10000 {
			t.Fatalf("%s: %d steps over a %d-level DAG of one leaf, want at most a few", w.name, steps, levels)
		}
		if !errors.Is(env.Err, rerrors.ErrCorrupt) {
			t.Fatalf("%s: %d steps, env.Err %v, want ErrCorrupt", w.name, steps, env.Err)
		}
	}
}

package btree

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// validateMem checks the materialised tree under n: keys ascend in every
// node, and every key of a child lies in the range its parent's
// separators give it (the first child takes everything below the second
// separator).
func (t *Tree) validateMem(n *node, lo, hi []byte, path string) error {
	for i, in := range n.inodes {
		if lo != nil && bytes.Compare(in.key, lo) < 0 && !(i == 0 && !n.leaf) {
			return fmt.Errorf("%s: key %q below lo %q (leaf %v, i %d)", path, in.key, lo, n.leaf, i)
		}
		if hi != nil && bytes.Compare(in.key, hi) >= 0 {
			return fmt.Errorf("%s: key %q not below hi %q (leaf %v, i %d)", path, in.key, hi, n.leaf, i)
		}
		if i > 0 && bytes.Compare(n.inodes[i-1].key, in.key) >= 0 {
			return fmt.Errorf("%s: keys out of order at %d", path, i)
		}
	}
	if n.leaf {
		return nil
	}
	for i, in := range n.inodes {
		c, ok := t.nodes[in.child.ID]
		if !ok {
			continue
		}
		var clo, chi []byte
		if i > 0 {
			clo = in.key
		} else {
			clo = lo
		}
		if i+1 < len(n.inodes) {
			chi = n.inodes[i+1].key
		} else {
			chi = hi
		}
		if c.parent != n {
			return fmt.Errorf("%s/%d: child's parent pointer is wrong", path, i)
		}
		if err := t.validateMem(c, clo, chi, fmt.Sprintf("%s/%d", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// TestEagerSplitKeepsSeparators: 60,000 keys put in the random order of
// TestLargeRandomTxn's seed 1795558552680983900, with the materialised tree
// validated every 250 puts. An eager split of a parent's first child used
// to insert the right half's separator before the left half's stale one
// (the first child takes keys below its separator): after put 49,031 keys
// of the left half became unreachable to Get. The failure was in every
// build since eager splits existed.
func TestEagerSplitKeepsSeparators(t *testing.T) {
	rng := rand.New(rand.NewSource(1795558552680983900))
	_ = rng.Intn(3) // TestLargeRandomTxn draws its page size first
	perm := rng.Perm(60000)
	a := &bumpAlloc{next: 4}
	env := &Env{Data: make([]byte, 4*4096), PageSize: 4096, HWM: 4, Txid: 1, Alloc: a}
	tr := Open(env, page.Ref{})
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%09d", i) }
	for j, i := range perm {
		if err := tr.Put(key(i), []byte("v"), 0, 0); err != nil {
			t.Fatal(err)
		}
		if j%250 == 249 || j == len(perm)-1 {
			if err := tr.validateMem(tr.rootNode, nil, nil, "root"); err != nil {
				t.Fatalf("after put %d (%q): %v", j, key(i), err)
			}
			k := key(perm[rng.Intn(j+1)])
			if _, _, ok := tr.Get(k); !ok {
				t.Fatalf("after put %d: Get(%q) misses a key it put", j, k)
			}
		}
	}
}

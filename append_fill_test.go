package rivet

import (
	"encoding/binary"
	"math/rand"
	"testing"
)

// TestAppendsPackLeavesFull: a node whose inserts all landed after its last
// element is split into full pages (docs/design.md §2.4); one insert before
// its end keeps FillPercent's half pages, as bbolt does.
func TestAppendsPackLeavesFull(t *testing.T) {
	const n = 20000
	ids := func(order string, rng *rand.Rand) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i)
		}
		switch order {
		case "descending":
			for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
				out[i], out[j] = out[j], out[i]
			}
		case "random":
			rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
		}
		return out
	}
	for _, c := range []struct {
		order    string
		perTxn   int
		value    int     // bytes
		keys     int     // how many are put, of n
		min, max float64 // bounds on the leaves' fill
	}{
		{"ascending", 500, 100, n, 0.90, 1},
		{"ascending", n, 100, n, 0.90, 1}, // one transaction: eager splits hand on the flags
		{"descending", 500, 100, n, 0.40, 0.65},
		{"random", 500, 100, n, 0.45, 0.85},
		// Three values a page, one a commit: a leaf that takes a fourth
		// keeps three and hands the fourth on (cut two and two, the
		// leaves would be half full).
		{"ascending", 1, 1000, 3000, 0.70, 1},
	} {
		db := openTestDB(t, nil)
		order := ids(c.order, rand.New(rand.NewSource(1)))[:c.keys]
		for s := 0; s < len(order); s += c.perTxn {
			if err := db.Update(func(tx *Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("b"))
				if err != nil {
					return err
				}
				for _, id := range order[s:min(s+c.perTxn, len(order))] {
					k := make([]byte, 16)
					binary.BigEndian.PutUint64(k, id)
					if err := b.Put(k, make([]byte, c.value)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		var st BucketStats
		if err := db.View(func(tx *Tx) error { st = tx.Bucket([]byte("b")).Stats(); return nil }); err != nil {
			t.Fatal(err)
		}
		fill := float64(st.LeafInuse) / float64(st.LeafAlloc)
		t.Logf("%s, %d B values in %d-key transactions: %d leaves, fill %.2f", c.order, c.value, c.perTxn, st.LeafPageN, fill)
		if fill < c.min || fill > c.max {
			t.Errorf("%s, %d B values in %d-key transactions: leaf fill %.2f, want %.2f-%.2f", c.order, c.value, c.perTxn, fill, c.min, c.max)
		}
	}
}

package rivet

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// leafOrder returns, for the leaves of bucket name in key order, how many
// pairs of consecutive leaves lie side by side on disk (the second starts
// where the first ends), how many lie close in file order (the second
// starts at most 16 pages after the first ends: a read-ahead window spans
// such gaps), and how many pairs there are.
func leafOrder(t *testing.T, db *DB, name string) (adjacent, near, pairs int) {
	t.Helper()
	type leaf struct {
		id, pages uint64
		first     []byte
	}
	var leaves []leaf
	err := db.View(func(tx *Tx) error {
		return tx.WalkPages(func(u PageUse) error {
			if u.Kind != PageLeaf || len(u.Bucket) != 1 || string(u.Bucket[0]) != name {
				return nil
			}
			n, err := page.ReadNode(tx.env.Data, tx.env.PageSize, uint64(u.ID), 0, tx.meta.HWM)
			if err != nil {
				return err
			}
			k, err := n.LeafKey(0)
			if err != nil {
				return err
			}
			leaves = append(leaves, leaf{uint64(u.ID), uint64(u.Pages), k})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(leaves, func(a, b leaf) int { return bytes.Compare(a.first, b.first) })
	for i := 1; i < len(leaves); i++ {
		a, b := leaves[i-1], leaves[i]
		if b.id == a.id+a.pages {
			adjacent++
		}
		if b.id >= a.id+a.pages && b.id <= a.id+a.pages+16 {
			near++
		}
	}
	return adjacent, near, len(leaves) - 1
}

// Compaction leaves the leaves it moves in key order, one after another:
// on etcd's shape (revisions appended in order, the oldest half deleted)
// it moves the upper part of the tree into the space the deletes freed,
// and a walk in key order should then read the file front to back. With
// first fit, each step's leaves went back to the holes the steps before it
// left, and a quarter of the consecutive leaves were apart.
func TestCompactKeepsLeavesInKeyOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcd.db")
	db, err := Open(path, 0o600, &Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		mustCheck(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	key := func(rev uint64) []byte {
		k := make([]byte, 17)
		binary.BigEndian.PutUint64(k, rev)
		k[8] = '_'
		return k
	}
	rng := rand.New(rand.NewSource(1))
	val := make([]byte, 8192)
	const revs, perTxn = 16000, 2000
	for rev := uint64(1); rev <= revs; rev += perTxn {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("key"))
			if err != nil {
				return err
			}
			for r := rev; r < rev+perTxn; r++ {
				if err := b.Put(key(r), val[:512+rng.Intn(8192-512)]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for rev := uint64(1); rev <= revs/2; rev += perTxn {
		err := db.Update(func(tx *Tx) error {
			b := tx.Bucket([]byte("key"))
			for r := rev; r < rev+perTxn; r++ {
				if err := b.Delete(key(r)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	adj0, near0, pairs0 := leafOrder(t, db, "key")
	released, err := db.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	adj, near, pairs := leafOrder(t, db, "key")
	t.Logf("released %d MiB; of the pairs of consecutive leaves in key order, side by side: %d of %d before, %d of %d after; close: %d before, %d after",
		released>>20, adj0, pairs0, adj, pairs, near0, near)
	if released < int64(revs/2)*512 {
		t.Fatalf("Compact released %d bytes: it moved little", released)
	}
	// The branches each step copies go first fit, often just where the
	// next step's leaves go on: a page between two leaves. Packing moves
	// a few leaves twice (a step that ends inside a branch's leaves leaves
	// the rest of one for the next step). First fit left 80% close.
	if adj*100 < pairs*80 || near*100 < pairs*94 {
		t.Fatalf("after Compact %d of %d consecutive leaves are side by side and %d close, want at least 80%% and 94%%", adj, pairs, near)
	}
}

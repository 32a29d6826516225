package rivet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCursorDeleteModel drives a write transaction's cursor with random
// moves, deletes through it, and changes made beside it (Bucket.Put and
// Bucket.Delete of other keys), and compares every answer with a sorted
// key list. A cursor whose element was deleted sits before its successor:
// Next returns the successor and Prev the element before, whether the
// delete came through the cursor (which then keeps its place without a
// seek from the root) or the element vanished beside it; a second Delete
// deletes nothing. After a
// move that returns nothing the model does not follow the cursor (its
// place at the ends is TestCursorEndsMatchBbolt's) and repositions it.
func TestCursorDeleteModel(t *testing.T) {
	seed := uint64(testSeed(t))
	rng := rand.New(rand.NewPCG(seed, 7))
	db := openTestDB(t, &Options{PageSize: 1024})
	key := func(i int) string { return fmt.Sprintf("%06d", i) }
	var keys []string // the model, sorted
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := 0; i < 3000; i += 2 {
			keys = append(keys, key(i))
			if err := b.Put([]byte(key(i)), []byte("v"+key(i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	succ := func(k string) (string, bool) { // first key > k
		i, found := slices.BinarySearch(keys, k)
		if found {
			i++
		}
		if i < len(keys) {
			return keys[i], true
		}
		return "", false
	}
	pred := func(k string) (string, bool) { // last key < k
		i, _ := slices.BinarySearch(keys, k)
		if i > 0 {
			return keys[i-1], true
		}
		return "", false
	}
	remove := func(k string) {
		if i, found := slices.BinarySearch(keys, k); found {
			keys = slices.Delete(keys, i, i+1)
		}
	}
	for txn := 0; txn < 20; txn++ {
		err := db.Update(func(tx *Tx) error {
			b := tx.Bucket([]byte("b"))
			c := b.Cursor()
			var at string  // the key the cursor is on, or the gone key it sits after
			known := false // whether the model knows where the cursor is
			gone := false  // whether at was deleted
			check := func(op string, k, v []byte, want string, ok bool) error {
				switch {
				case !ok && k != nil:
					return fmt.Errorf("%s from %q (gone %t): got %q, want nothing", op, at, gone, k)
				case ok && string(k) != want:
					return fmt.Errorf("%s from %q (gone %t): got %q, want %q", op, at, gone, k, want)
				case ok && string(v) != "v"+want:
					return fmt.Errorf("%s: value %q for %q", op, v, k)
				}
				if ok {
					at, gone = want, false
				} else {
					known = false
				}
				return nil
			}
			for range 400 {
				if !known {
					k := key(rng.IntN(3100))
					want, ok := k, true
					if i, found := slices.BinarySearch(keys, k); !found {
						want, ok = "", i < len(keys)
						if ok {
							want = keys[i]
						}
					}
					kk, v := c.Seek([]byte(k))
					if !ok {
						if kk != nil {
							return fmt.Errorf("Seek(%q) past the end: got %q", k, kk)
						}
						continue
					}
					known = true
					if err := check("Seek", kk, v, want, true); err != nil {
						return err
					}
					continue
				}
				switch r := rng.IntN(100); {
				case r < 30:
					want, ok := succ(at)
					k, v := c.Next()
					if err := check("Next", k, v, want, ok); err != nil {
						return err
					}
				case r < 45:
					want, ok := pred(at)
					k, v := c.Prev()
					if err := check("Prev", k, v, want, ok); err != nil {
						return err
					}
				case r < 75:
					if err := c.Delete(); err != nil {
						return err
					}
					if !gone {
						remove(at)
						gone = true
					}
				case r < 82:
					k, v := c.First()
					want, ok := "", len(keys) > 0
					if ok {
						want = keys[0]
					}
					if err := check("First", k, v, want, ok); err != nil {
						return err
					}
				case r < 94:
					// A change beside the cursor: its stack goes stale.
					k := key(2*rng.IntN(1600) + 1)
					if err := b.Put([]byte(k), []byte("v"+k)); err != nil {
						return err
					}
					if i, found := slices.BinarySearch(keys, k); !found {
						keys = slices.Insert(keys, i, k)
					}
				default:
					// The element under the cursor may vanish beside it.
					k := at
					if rng.IntN(2) == 0 && len(keys) > 0 {
						k = keys[rng.IntN(len(keys))]
					}
					if err := b.Delete([]byte(k)); err != nil {
						return err
					}
					remove(k)
					if k == at {
						gone = true
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("txn %d: %v", txn, err)
		}
	}
	if err := db.View(func(tx *Tx) error {
		var got []string
		err := tx.Bucket([]byte("b")).ForEach(func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
		if !slices.Equal(got, keys) {
			t.Errorf("bucket holds %d keys, the model %d", len(got), len(keys))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

package rivet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCursorEndsMatchBbolt pins bbolt v1.5's cursor behaviour at the ends
// of a bucket (etcd-io/bbolt#733, its TestCursor_RepeatOperations), which
// programs such as storm's unique index rely on:
//
//   - Next from the last key returns nil and leaves the cursor on the last
//     key, however often it is repeated: a following Prev returns the
//     second-to-last key;
//   - Prev from the first key returns nil and leaves it on the first key: a
//     following Next returns the second key;
//   - Seek past every key returns nil and leaves the cursor beyond the last
//     key: Prev returns the last key (the "seek to the end of a prefix,
//     step back" idiom), also after more Nexts.
//
// Each case runs on a one-leaf and a multi-level tree, in a top-level and a
// nested bucket, in a read and a write transaction (whose cursors re-seek
// after changes), and in a write transaction after a Put that changed the
// tree under the cursor.
func TestCursorEndsMatchBbolt(t *testing.T) {
	for _, n := range []int{5, 2000} {
		for _, nested := range []bool{false, true} {
			for _, mode := range []string{"read", "write", "write, changed"} {
				name := fmt.Sprintf("%d keys, nested %t, %s", n, nested, mode)
				t.Run(name, func(t *testing.T) {
					db := openTestDB(t, &Options{PageSize: 4096})
					key := func(i int) []byte { return []byte(fmt.Sprintf("%05d", i)) }
					bucket := func(tx *Tx) *Bucket {
						b := tx.Bucket([]byte("b"))
						if nested {
							b = b.Bucket([]byte("n"))
						}
						return b
					}
					if err := db.Update(func(tx *Tx) error {
						b, err := tx.CreateBucket([]byte("b"))
						if err != nil {
							return err
						}
						if nested {
							if b, err = b.CreateBucket([]byte("n")); err != nil {
								return err
							}
						}
						for i := 0; i < n; i++ {
							if err := b.Put(key(i), key(i)); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
					run := func(tx *Tx) error {
						b := bucket(tx)
						if n > 100 && b.Stats().Depth < 2 {
							return fmt.Errorf("tree of %d keys has depth %d; the multi-level case is not covered", n, b.Stats().Depth)
						}
						c := b.Cursor()
						change := func() error {
							if mode != "write, changed" {
								return nil
							}
							// A value rewritten in the middle of the
							// tree: the cursor must re-seek, not lose
							// its place.
							return b.Put(key(n/2), []byte("changed"))
						}
						expect := func(step string, got []byte, want []byte) error {
							if string(got) != string(want) {
								return fmt.Errorf("%s: got %q, want %q", step, got, want)
							}
							return nil
						}
						steps := []struct {
							name string
							move func() ([]byte, []byte)
							want []byte
						}{
							{"Last", c.Last, key(n - 1)},
							{"Next past the end", c.Next, nil},
							{"Next again", c.Next, nil},
							{"Next a third time", c.Next, nil},
							{"Prev after the end", c.Prev, key(n - 2)},
							{"First", c.First, key(0)},
							{"Prev before the start", c.Prev, nil},
							{"Prev again", c.Prev, nil},
							{"Next after the start", c.Next, key(1)},
							{"Seek past every key", func() ([]byte, []byte) { return c.Seek([]byte("zzzzz")) }, nil},
							{"Prev after Seek past the end", c.Prev, key(n - 1)},
							{"Seek past every key", func() ([]byte, []byte) { return c.Seek([]byte("zzzzz")) }, nil},
							{"Next after Seek past the end", c.Next, nil},
							{"Prev", c.Prev, key(n - 1)},
						}
						for _, s := range steps {
							if err := change(); err != nil {
								return err
							}
							k, _ := s.move()
							if err := expect(s.name, k, s.want); err != nil {
								return err
							}
						}
						// bbolt's repeat-operations walk: all the way
						// forward, off the end, all the way back, off the
						// start, and forward again.
						c.First()
						for i := 1; i < n; i++ {
							k, _ := c.Next()
							if err := expect(fmt.Sprintf("forward walk at %d", i), k, key(i)); err != nil {
								return err
							}
						}
						for i := 0; i < 3; i++ {
							if k, _ := c.Next(); k != nil {
								return fmt.Errorf("Next %d past the end: %q", i, k)
							}
						}
						for i := n - 2; i >= 0; i-- {
							if err := change(); err != nil {
								return err
							}
							k, _ := c.Prev()
							if err := expect(fmt.Sprintf("backward walk at %d", i), k, key(i)); err != nil {
								return err
							}
						}
						for i := 0; i < 3; i++ {
							if k, _ := c.Prev(); k != nil {
								return fmt.Errorf("Prev %d before the start: %q", i, k)
							}
						}
						for i := 1; i < n; i++ {
							k, _ := c.Next()
							if err := expect(fmt.Sprintf("second forward walk at %d", i), k, key(i)); err != nil {
								return err
							}
						}
						return nil
					}
					var err error
					if mode == "read" {
						err = db.View(run)
					} else {
						err = db.Update(run)
					}
					if err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestCursorEndsEmptyBucket: every move on an empty bucket returns nil,
// and a later Put is found by the same cursor's First.
func TestCursorEndsEmptyBucket(t *testing.T) {
	db := openTestDB(t, nil)
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		c := b.Cursor()
		for i, move := range []func() ([]byte, []byte){c.First, c.Last, c.Next, c.Prev, func() ([]byte, []byte) { return c.Seek(nil) }} {
			if k, v := move(); k != nil || v != nil {
				return fmt.Errorf("move %d on an empty bucket: %q, %q", i, k, v)
			}
		}
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		if k, _ := c.First(); string(k) != "k" {
			return fmt.Errorf("First after a Put: %q", k)
		}
		if k, _ := c.Next(); k != nil {
			return fmt.Errorf("Next after the only key: %q", k)
		}
		if k, _ := c.Prev(); k != nil {
			return fmt.Errorf("Prev from the only key (the cursor stays on it): %q", k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// firstKeyIs opens a cursor it does not keep, as etcd's backend does for
// each key it reads.
func firstKeyIs(b *Bucket, want []byte) bool {
	k, _ := b.Cursor().First()
	return bytes.Equal(k, want)
}

// TestCursorNotKeptDoesNotAllocate pins what design §5.1 says:
// Bucket.Cursor inlines, so a cursor its caller does not keep stays on the
// caller's stack: past the stacks a read transaction lends, it allocates
// its stack and nothing else. A change that makes Cursor too big to
// inline, or lets init keep a pointer to the cursor, fails here.
func TestCursorNotKeptDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	db := openTestDB(t, nil)
	mustPutOne(t, db.DB, "b", "k", "v")
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	b := tx.Bucket([]byte("b"))
	// Use up the stacks the transaction lends (whether lending allocates
	// depends on whether its pooled state is new), so that from here on
	// each cursor allocates exactly its own stack, and nothing else if
	// the cursor itself stays on the stack.
	for range 8 {
		firstKeyIs(b, []byte("k"))
	}
	ok := true
	allocs := testing.AllocsPerRun(100, func() {
		ok = ok && firstKeyIs(b, []byte("k"))
	})
	if !ok {
		t.Fatal("the cursor did not find the key")
	}
	if allocs != 1 {
		t.Fatalf("a cursor the caller does not keep made %.2f allocations, want 1 (its stack)", allocs)
	}
}

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
					if k == at {
						// The gone key is back: the cursor, which
						// sits at its key, is on it again (as in
						// bbolt, whose cursor keeps its index).
						gone = false
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

func TestCursorDeleteWhileIterating(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	const n = 2000
	_ = db.Update(func(tx *Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		for i := 0; i < n; i++ {
			if err := b.Put([]byte(fmt.Sprintf("%06d", i)), []byte("value")); err != nil {
				return err
			}
		}
		return nil
	})
	// Delete every key through the cursor: none may be skipped.
	err := db.Update(func(tx *Tx) error {
		c := tx.Bucket([]byte("b")).Cursor()
		seen := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if want := fmt.Sprintf("%06d", seen); string(k) != want {
				return fmt.Errorf("cursor at %q, want %q", k, want)
			}
			if seen%3 != 0 {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			seen++
		}
		if seen != n {
			return fmt.Errorf("visited %d keys, want %d", seen, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if got := tx.Bucket([]byte("b")).Stats().KeyN; got != (n+2)/3 {
			t.Errorf("%d keys left, want %d", got, (n+2)/3)
		}
		return nil
	})
}

// Regression: the cursor's key-order check (which stops walks over corrupt
// branch DAGs) reached back across Seek and across the ends of the range,
// so Seek past the end followed by Prev reported a false corruption.
func TestCursorMovesAcrossSeeksAndEnds(t *testing.T) {
	db := openTestDB(t, nil)
	_ = db.Update(func(tx *Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		for _, k := range []string{"a", "b", "c", "d"} {
			if err := b.Put([]byte(k), []byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	err := db.View(func(tx *Tx) error {
		c := tx.Bucket([]byte("b")).Cursor()
		steps := []struct {
			name string
			move func() ([]byte, []byte)
			want string
		}{
			{"Seek(a)", func() ([]byte, []byte) { return c.Seek([]byte("a")) }, "a"},
			{"Seek(zzz)", func() ([]byte, []byte) { return c.Seek([]byte("zzz")) }, ""},
			{"Prev", c.Prev, "d"},
			{"Prev", c.Prev, "c"},
			{"Seek(b)", func() ([]byte, []byte) { return c.Seek([]byte("b")) }, "b"},
			{"Prev", c.Prev, "a"},
			{"Prev", c.Prev, ""},
			// bbolt's ends (TestCursorEndsMatchBbolt): a move off either
			// end leaves the cursor on the end key.
			{"Next", c.Next, "b"},
			{"Last", c.Last, "d"},
			{"Next", c.Next, ""},
			{"Prev", c.Prev, "c"},
			{"First", c.First, "a"},
			{"Next", c.Next, "b"},
		}
		for i, s := range steps {
			k, _ := s.move()
			if string(k) != s.want {
				return fmt.Errorf("step %d %s: got %q, want %q", i, s.name, k, s.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

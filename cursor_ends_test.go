package rivet

import (
	"fmt"
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

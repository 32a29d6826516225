package rivet

import (
	"bytes"
	"fmt"
	"testing"
)

// inlineState reports whether the nested bucket parent/name is stored
// inline (in its parent's leaf) and how many pages the whole file uses.
func inlineState(t *testing.T, db *DB, path ...string) (inline bool, stats BucketStats) {
	t.Helper()
	if err := db.View(func(tx *Tx) error {
		b := tx.Bucket([]byte(path[0]))
		for _, p := range path[1:] {
			b = b.Bucket([]byte(p))
		}
		if b == nil {
			return fmt.Errorf("bucket %v missing", path)
		}
		inline = b.tree.Inline() != nil
		stats = b.Stats()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return inline, stats
}

// TestInlineBucketLifecycle walks one nested bucket through every change of
// representation and checks the data, Check (free pages included) and the
// representation after each commit and after a reopen: created empty (no
// page, not inline), a few keys (inline, no page), past a quarter page
// (its own root page), back under it (inline again, its page freed), given
// a nested bucket (not inline: an inline bucket holds plain values only),
// that removed (inline), a value stored as a blob (not inline), moved to
// another parent (stays inline), deleted (nothing leaked).
func TestInlineBucketLifecycle(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 4096})
	model := map[string]string{}
	update := func(fn func(b *Bucket) error) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			p, err := tx.CreateBucketIfNotExists([]byte("parent"))
			if err != nil {
				return err
			}
			c, err := p.CreateBucketIfNotExists([]byte("child"))
			if err != nil {
				return err
			}
			return fn(c)
		}); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, db.DB)
	}
	verify := func(step string, wantInline bool) {
		t.Helper()
		for round := 0; round < 2; round++ {
			inline, s := inlineState(t, db.DB, "parent", "child")
			if inline != wantInline {
				t.Fatalf("%s (round %d): inline %t, want %t (stats %+v)", step, round, inline, wantInline, s)
			}
			if inline && (s.InlineBucketN != 1 || s.LeafPageN != 0 || s.KeyN != len(model)) {
				t.Fatalf("%s: stats of an inline bucket: %+v", step, s)
			}
			if err := db.View(func(tx *Tx) error {
				got := map[string]string{}
				if err := tx.Bucket([]byte("parent")).Bucket([]byte("child")).ForEach(func(k, v []byte) error {
					if v != nil {
						got[string(k)] = string(v)
					}
					return nil
				}); err != nil {
					return err
				}
				for k, v := range model {
					if got[k] != v {
						return fmt.Errorf("key %q: %q, want %q", k, got[k], v)
					}
				}
				if len(got) != len(model) {
					return fmt.Errorf("%d keys, want %d", len(got), len(model))
				}
				return nil
			}); err != nil {
				t.Fatalf("%s (round %d): %v", step, round, err)
			}
			db.reopen()
		}
	}
	put := func(k, v string) func(b *Bucket) error {
		model[k] = v
		return func(b *Bucket) error { return b.Put([]byte(k), []byte(v)) }
	}

	update(func(b *Bucket) error { return nil })
	verify("created empty", false)
	update(put("a", "1"))
	update(put("b", "2"))
	verify("two keys", true)
	update(put("big", string(bytes.Repeat([]byte("x"), 1500))))
	verify("past a quarter page", false)
	delete(model, "big")
	update(func(b *Bucket) error { return b.Delete([]byte("big")) })
	verify("back under a quarter page", true)
	update(func(b *Bucket) error {
		g, err := b.CreateBucket([]byte("grandchild"))
		if err != nil {
			return err
		}
		return g.Put([]byte("g"), []byte("h"))
	})
	verify("with a nested bucket", false)
	update(func(b *Bucket) error { return b.DeleteBucket([]byte("grandchild")) })
	verify("nested bucket deleted", true)
	update(put("blob", string(bytes.Repeat([]byte("y"), 9*4096))))
	verify("with a blob", false)
	delete(model, "blob")
	update(func(b *Bucket) error { return b.Delete([]byte("blob")) })
	verify("blob deleted", true)
	if err := db.Update(func(tx *Tx) error {
		seq, err := tx.Bucket([]byte("parent")).Bucket([]byte("child")).NextSequence()
		if err != nil || seq != 1 {
			return fmt.Errorf("NextSequence of an inline bucket: %d, %v", seq, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	verify("sequence changed", true)
	if err := db.View(func(tx *Tx) error {
		if s := tx.Bucket([]byte("parent")).Bucket([]byte("child")).Sequence(); s != 1 {
			return fmt.Errorf("sequence %d after reopen, want 1", s)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Moved to another parent in the same transaction as a change to it:
	// the change moves with it and the bucket stays inline.
	if err := db.Update(func(tx *Tx) error {
		other, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		c := tx.Bucket([]byte("parent")).Bucket([]byte("child"))
		if err := c.Put([]byte("moved"), []byte("yes")); err != nil {
			return err
		}
		return tx.MoveBucket([]byte("child"), tx.Bucket([]byte("parent")), other)
	}); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db.DB)
	model["moved"] = "yes"
	inline, s := inlineState(t, db.DB, "other", "child")
	if !inline || s.KeyN != len(model) {
		t.Fatalf("moved bucket: inline %t, %d keys (want inline, %d)", inline, s.KeyN, len(model))
	}
	if err := db.Update(func(tx *Tx) error { return tx.Bucket([]byte("other")).DeleteBucket([]byte("child")) }); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db.DB)
}

// TestManySmallBucketsAreInline: the buildkit/containerd shape — many
// nested buckets of two small keys under one parent — stores every one of
// them inline, so the file holds the parent's leaves and little else.
func TestManySmallBucketsAreInline(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 4096})
	const n = 5000
	for start := 0; start < n; start += 1000 {
		if err := db.Update(func(tx *Tx) error {
			p, err := tx.CreateBucketIfNotExists([]byte("parent"))
			if err != nil {
				return err
			}
			for i := start; i < start+1000; i++ {
				c, err := p.CreateBucket([]byte(fmt.Sprintf("bucket-%06d", i)))
				if err != nil {
					return err
				}
				if err := c.Put([]byte("size"), []byte("12345678")); err != nil {
					return err
				}
				if err := c.Put([]byte("parent"), []byte(fmt.Sprintf("bucket-%06d", i/10))); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var s BucketStats
	var size int64
	if err := db.View(func(tx *Tx) error {
		s = tx.Bucket([]byte("parent")).Stats()
		size = tx.Size()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s.InlineBucketN != n || s.KeyN != 3*n {
		t.Fatalf("stats %+v: want %d inline buckets and %d keys", s, n, 3*n)
	}
	// Each bucket costs 32 + 2*16 + 24 bytes inline plus its element in
	// the parent (16 + 13): about 120 bytes, 34 to a half-full page.
	if perPage := float64(n) / float64(s.LeafPageN); perPage < 15 {
		t.Fatalf("%d buckets in %d leaf pages (%.1f per page), file %d bytes", n, s.LeafPageN, perPage, size)
	}
	t.Logf("%d buckets: %d leaf pages, %d bytes inline, state %d KiB", n, s.LeafPageN, s.InlineBucketInuse, size>>10)
}

package rivet

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Int64("rivet.seed", 0, "seed for randomized tests (0: time-based); printed on every run")
	traceFlag = flag.Bool("rivet.trace", false, "log every operation of randomized tests")
)

func tracef(t *testing.T, format string, args ...any) {
	if *traceFlag {
		t.Logf(format, args...)
	}
}

func testSeed(t *testing.T) int64 {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -rivet.seed=%d)", seed, seed)
	return seed
}

// mbucket is the model of a bucket: plain keys and nested buckets.
type mbucket struct {
	kv  map[string][]byte
	sub map[string]*mbucket
	seq uint64
}

func newMBucket() *mbucket {
	return &mbucket{kv: map[string][]byte{}, sub: map[string]*mbucket{}}
}

// holds reports whether x is m or a bucket nested in it.
func (m *mbucket) holds(x *mbucket) bool {
	if m == x {
		return true
	}
	for _, s := range m.sub {
		if s.holds(x) {
			return true
		}
	}
	return false
}

func (m *mbucket) clone() *mbucket {
	c := newMBucket()
	c.seq = m.seq
	for k, v := range m.kv {
		c.kv[k] = v
	}
	for k, s := range m.sub {
		c.sub[k] = s.clone()
	}
	return c
}

// compareBucket checks that b holds exactly what m holds, in order, walking
// forward and backward.
func compareBucket(t *testing.T, path string, b *Bucket, m *mbucket) {
	t.Helper()
	var keys []string
	for k := range m.kv {
		keys = append(keys, k)
	}
	for k := range m.sub {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c := b.Cursor()
	i := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if i >= len(keys) {
			t.Fatalf("%s: extra key %q", path, k)
		}
		if string(k) != keys[i] {
			t.Fatalf("%s: key %d is %q, model has %q", path, i, k, keys[i])
		}
		if sub, ok := m.sub[keys[i]]; ok {
			if v != nil {
				t.Fatalf("%s: bucket %q has a non-nil value", path, k)
			}
			child := b.Bucket(k)
			if child == nil {
				t.Fatalf("%s: bucket %q missing", path, k)
			}
			if child.Sequence() != sub.seq {
				t.Fatalf("%s/%s: sequence %d, model %d", path, k, child.Sequence(), sub.seq)
			}
			compareBucket(t, path+"/"+string(k), child, sub)
		} else {
			want := m.kv[keys[i]]
			if !bytes.Equal(v, want) || v == nil {
				t.Fatalf("%s: value of %q is %d bytes, model %d bytes (nil=%t)", path, k, len(v), len(want), v == nil)
			}
			if got := b.Get(k); !bytes.Equal(got, want) {
				t.Fatalf("%s: Get(%q) disagrees with the cursor", path, k)
			}
		}
		i++
	}
	if i != len(keys) {
		t.Fatalf("%s: cursor saw %d keys, model has %d", path, i, len(keys))
	}
	// Backwards.
	i = len(keys) - 1
	for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
		if i < 0 || string(k) != keys[i] {
			t.Fatalf("%s: reverse walk: key %q at %d", path, k, i)
		}
		i--
	}
	if i != -1 {
		t.Fatalf("%s: reverse walk saw %d keys, model has %d", path, len(keys)-1-i, len(keys))
	}
}

func compareDB(t *testing.T, db *DB, model *mbucket) {
	t.Helper()
	err := db.View(func(tx *Tx) error {
		compareBucket(t, "", tx.root, model)
		return nil
	})
	if err != nil {
		t.Fatalf("view: %v", err)
	}
}

// randKey returns keys from a small space so puts overwrite and deletes hit.
func randKey(rng *rand.Rand, space int) []byte {
	n := rng.Intn(space)
	switch rng.Intn(4) {
	case 0:
		return []byte(fmt.Sprintf("k%06d", n))
	case 1:
		return []byte(fmt.Sprintf("%d", n))
	default:
		return []byte(fmt.Sprintf("key-%08x-%s", n, bytes.Repeat([]byte{'x'}, n%40)))
	}
}

func randValue(rng *rand.Rand, pageSize int) []byte {
	var n int
	switch r := rng.Intn(100); {
	case r < 3:
		n = 0
	case r < 80:
		n = rng.Intn(120)
	case r < 92:
		n = rng.Intn(pageSize)
	case r < 96:
		n = pageSize + rng.Intn(7*pageSize) // in multi-page leaves
	default:
		n = 8*pageSize + 1 + rng.Intn(4*pageSize) // blobs (btree's MaxInlineValue)
	}
	v := make([]byte, n)
	rng.Read(v)
	return v
}

// pickName returns a key of m chosen by rng (sorted first, so a seed replays).
func pickName[V any](rng *rand.Rand, m map[string]V) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names[rng.Intn(len(names))]
}

// pickBucket walks a random existing path of nested buckets (up to 3 deep).
func pickBucket(rng *rand.Rand, tx *Tx, m *mbucket) (*Bucket, *mbucket) {
	b, mb := tx.root, m
	for depth := 0; depth < 3; depth++ {
		if len(mb.sub) == 0 || (depth > 0 && rng.Intn(3) == 0) {
			break
		}
		name := pickName(rng, mb.sub)
		b, mb = b.Bucket([]byte(name)), mb.sub[name]
	}
	return b, mb
}

// TestModelRandomized runs random transactions against a DB and a map-based
// model, comparing them after every transaction and reopening the file now
// and then. The seed is printed; -rivet.seed replays a run.
func TestModelRandomized(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	// Every durability mode: in None and Periodic many commits share a
	// sync point, so pages written and replaced between two are reused at
	// once (young runs), which the open readers below must not see.
	modes := []struct {
		name string
		d    Durability
	}{{"Full", Full}, {"None", None}, {"Periodic", Periodic(time.Millisecond)}}
	mode := modes[rng.Intn(len(modes))]
	// Half the runs allocate for locality (docs/design.md §4.3): another
	// placement of every page, the same results.
	slack := []float64{0, 0.4}[rng.Intn(2)]
	t.Logf("durability %s, locality slack %v", mode.name, slack)
	opts := &Options{PageSize: 1024 << rng.Intn(3), Durability: mode.d, LocalitySlack: slack}
	db := openTestDB(t, opts)
	model := newMBucket()
	// Read transactions held across commits, each with the model of the
	// state it saw; checked when they end.
	type heldReader struct {
		tx    *Tx
		model *mbucket
	}
	var readers []heldReader
	// Close waits for open readers: end them first if the test fails.
	t.Cleanup(func() {
		for _, r := range readers {
			_ = r.tx.Rollback()
		}
	})
	endReader := func(i int) {
		t.Helper()
		r := readers[i]
		compareBucket(t, "(held reader)", r.tx.root, r.model)
		if err := r.tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		readers = append(readers[:i], readers[i+1:]...)
	}
	heldChecks := 0
	txns := 300
	if testing.Short() {
		txns = 80
	}
	var sawInline, sawPaged int
	for i := 0; i < txns; i++ {
		next := model.clone()
		rollback := rng.Intn(10) == 0
		err := db.Update(func(tx *Tx) error {
			if err := randomOps(t, rng, tx, next, 1+rng.Intn(60), db.pageSize); err != nil {
				return err
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		if rollback {
			if err != errRollback {
				t.Fatalf("txn %d: %v", i, err)
			}
		} else {
			if err != nil {
				t.Fatalf("txn %d: %v", i, err)
			}
			model = next
		}
		compareDB(t, db.DB, model)
		if len(readers) < 4 && rng.Intn(5) == 0 {
			tx, err := db.Begin(false)
			if err != nil {
				t.Fatal(err)
			}
			readers = append(readers, heldReader{tx, model.clone()})
		}
		if len(readers) > 0 && rng.Intn(4) == 0 {
			endReader(rng.Intn(len(readers)))
			heldChecks++
		}
		if inline, paged := bucketKinds(t, db.DB); inline > 0 && paged > 0 {
			sawInline++
			sawPaged++
		} else if inline > 0 {
			sawInline++
		} else if paged > 0 {
			sawPaged++
		}
		if rng.Intn(25) == 0 {
			for len(readers) > 0 {
				endReader(0)
				heldChecks++
			}
			db.reopen()
			compareDB(t, db.DB, model)
		}
		if rng.Intn(20) == 0 {
			mustCheck(t, db.DB)
		}
	}
	for len(readers) > 0 {
		endReader(0)
		heldChecks++
	}
	// The run must have covered both kinds of nested bucket.
	t.Logf("committed states with inline buckets: %d, with paged nested buckets: %d; held readers checked: %d", sawInline, sawPaged, heldChecks)
	if sawInline == 0 || sawPaged == 0 {
		t.Fatalf("no state had both inline and paged buckets: the run no longer covers both kinds (seed %d)", seed)
	}
}

// bucketKinds counts the inline buckets and the nested buckets with pages
// of the committed state.
func bucketKinds(t *testing.T, db *DB) (inline, paged int) {
	t.Helper()
	if err := db.View(func(tx *Tx) error {
		return tx.ForEach(func(_ []byte, b *Bucket) error {
			s := b.Stats()
			inline += s.InlineBucketN
			paged += s.BucketN - s.InlineBucketN
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return inline, paged
}

// randomOps applies ops random operations to the write transaction tx and
// the same changes to the model m: puts (blobs included), deletes, deletes
// while iterating, bucket creation and deletion with sequences, and
// moves of nested buckets, and read-backs of what the transaction wrote.
func randomOps(t *testing.T, rng *rand.Rand, tx *Tx, next *mbucket, ops, pageSize int) error {
	for j := 0; j < ops; j++ {
		b, mb := pickBucket(rng, tx, next)
		switch r := rng.Intn(100); {
		case r < 50:
			k, v := randKey(rng, 300), randValue(rng, pageSize)
			if _, isBucket := mb.sub[string(k)]; isBucket {
				if err := b.Put(k, v); err != ErrIncompatibleValue {
					return fmt.Errorf("put over bucket: %v", err)
				}
				continue
			}
			tracef(t, "put %q (%d bytes) in %q", k, len(v), b.name)
			if err := b.Put(k, v); err != nil {
				return err
			}
			mb.kv[string(k)] = v
		case r < 75:
			k := randKey(rng, 300)
			if _, isBucket := mb.sub[string(k)]; isBucket {
				continue
			}
			tracef(t, "delete %q in %q", k, b.name)
			if err := b.Delete(k); err != nil {
				return err
			}
			delete(mb.kv, string(k))
		case r < 82:
			// Delete while iterating: drop every other key.
			c := b.Cursor()
			n := 0
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v != nil && n%2 == 0 {
					tracef(t, "cursor delete %q in %q", k, b.name)
					if err := c.Delete(); err != nil {
						return err
					}
					delete(mb.kv, string(k))
				}
				n++
				if n > 40 {
					break
				}
			}
		case r < 88:
			name := []byte(fmt.Sprintf("b%d", rng.Intn(12)))
			if _, ok := mb.kv[string(name)]; ok {
				continue
			}
			tracef(t, "create bucket %q in %q", name, b.name)
			nb, err := b.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			if _, ok := mb.sub[string(name)]; !ok {
				mb.sub[string(name)] = newMBucket()
			}
			if rng.Intn(2) == 0 {
				s, err := nb.NextSequence()
				if err != nil {
					return err
				}
				mb.sub[string(name)].seq = s
			}
		case r < 91:
			if len(mb.sub) == 0 {
				continue
			}
			name := pickName(rng, mb.sub)
			tracef(t, "delete bucket %q in %q", name, b.name)
			if err := b.DeleteBucket([]byte(name)); err != nil {
				return fmt.Errorf("delete bucket %q: %w", name, err)
			}
			delete(mb.sub, name)
		case r < 94:
			// Move a nested bucket into another bucket; deletes of its
			// old or new parents may follow in the same transaction.
			if len(mb.sub) == 0 {
				continue
			}
			name := pickName(rng, mb.sub)
			moved := mb.sub[name]
			dst, mdst := pickBucket(rng, tx, next)
			var want error
			switch _, isValue := mdst.kv[name]; {
			case mdst == mb:
				want = errSameBuckets
			case isValue:
				want = ErrIncompatibleValue
			case mdst.sub[name] != nil:
				want = ErrBucketExists
			case moved.holds(mdst):
				want = ErrIncompatibleValue
			}
			tracef(t, "move bucket %q from %q to %q (want %v)", name, b.name, dst.name, want)
			if err := b.MoveBucket([]byte(name), dst); !errors.Is(err, want) || (want == nil && err != nil) {
				return fmt.Errorf("move bucket %q: %v, want %v", name, err, want)
			}
			if want == nil {
				mdst.sub[name] = moved
				delete(mb.sub, name)
			}
		default:
			// Read back something just written.
			if len(mb.kv) > 0 {
				k := pickName(rng, mb.kv)
				if got := b.Get([]byte(k)); !bytes.Equal(got, mb.kv[k]) || got == nil {
					rv, rf, rfound := b.tree.Get([]byte(k))
					return fmt.Errorf("in-txn Get(%q): %d bytes, want %d (tx err %v; tree: found %t flags %x len %d)", k, len(got), len(mb.kv[k]), tx.Err(), rfound, rf, len(rv))
				}
			}
		}
	}
	return nil
}

var errRollback = fmt.Errorf("test: roll back")

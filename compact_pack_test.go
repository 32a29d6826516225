package rivet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
)

// etcdRevKey is an etcd revision key: the main revision big-endian, '_',
// the sub revision.
func etcdRevKey(rev uint64) []byte {
	k := make([]byte, 17)
	binary.BigEndian.PutUint64(k, rev)
	k[8] = '_'
	return k
}

// liveDigest returns the bytes of every key and value of db's top-level
// buckets and a digest of them.
func liveDigest(t *testing.T, db *DB) (live int64, sum [32]byte) {
	t.Helper()
	h := sha256.New()
	if err := db.View(func(tx *Tx) error {
		return tx.ForEach(func(name []byte, b *Bucket) error {
			h.Write(name)
			return b.ForEach(func(k, v []byte) error {
				live += int64(len(k) + len(v))
				h.Write(k)
				h.Write(v)
				return nil
			})
		})
	}); err != nil {
		t.Fatal(err)
	}
	copy(sum[:], h.Sum(nil))
	return live, sum
}

// leafRuns counts db's leaf runs by length in pages, and the longest run of
// a leaf of more than one element written after txid since.
func leafRuns(t *testing.T, db *DB, since uint64) (runs map[int]int, longestShared int) {
	t.Helper()
	runs = map[int]int{}
	if err := db.View(func(tx *Tx) error {
		return tx.WalkPages(func(u PageUse) error {
			if u.Kind == PageLeaf {
				runs[u.Pages]++
				if u.Count > 1 && u.Txid > since {
					longestShared = max(longestShared, u.Pages)
				}
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return runs, longestShared
}

// TestCompactPacksLargeValues: etcd's shape — 17-byte revision keys
// appended in order, values of 512 B to 8 KiB, the oldest half of the
// revisions deleted — leaves leaves of two values over two or three pages,
// half a page of each empty, which moving pages cannot fix. Compaction
// packs them into leaves of up to eight pages: the file ends within 1.2x
// of its live keys and values (1.33x when compaction kept leaves as
// commits cut them), after Compact and after a reopen, with the same
// contents, and no leaf of several elements longer than eight pages.
func TestCompactPacksLargeValues(t *testing.T) {
	total := int64(64 << 20) // bytes of values put
	if testing.Short() || raceEnabled {
		total = 16 << 20
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, 0o600, &Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	val := make([]byte, 8192)
	rng.Read(val)
	var rev uint64
	for put := int64(0); put < total; {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("key"))
			if err != nil {
				return err
			}
			m, err := tx.CreateBucketIfNotExists([]byte("meta"))
			if err != nil {
				return err
			}
			for range 2000 {
				rev++
				n := 512 + rng.Intn(8192-512)
				put += int64(n)
				if err := b.Put(etcdRevKey(rev), val[:n]); err != nil {
					return err
				}
			}
			return m.Put([]byte("consistent_index"), etcdRevKey(rev))
		}); err != nil {
			t.Fatal(err)
		}
	}
	for lo := uint64(1); lo <= rev/2; lo += 2000 {
		if err := db.Update(func(tx *Tx) error {
			b := tx.Bucket([]byte("key"))
			for r := lo; r < min(lo+2000, rev/2+1); r++ {
				if err := b.Delete(etcdRevKey(r)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	live, want := liveDigest(t, db)
	grown := fileLen(t, path)
	if _, err := db.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	compacted := fileLen(t, path)
	runs, longest := leafRuns(t, db, 0)
	t.Logf("%d revisions, %d live bytes: file %d -> %d bytes (%.3fx live); leaf runs by pages %v",
		rev, live, grown, compacted, float64(compacted)/float64(live), runs)
	if ratio := float64(compacted) / float64(live); ratio > 1.2 {
		t.Errorf("compacted file is %.3fx its live keys and values, want <= 1.2", ratio)
	}
	if longest > 8 {
		t.Errorf("a leaf of several elements spans %d pages, want <= 8", longest)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path, 0o600, nil); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	reopened := fileLen(t, path)
	if ratio := float64(reopened) / float64(live); ratio > 1.2 {
		t.Errorf("reopened file is %.3fx its live keys and values, want <= 1.2", ratio)
	}
	if l, got := liveDigest(t, db); l != live || got != want {
		t.Fatalf("contents changed by compaction: %d live bytes, want %d", l, live)
	}
}

// TestCompactSmallValuesOnePageLeaves: values of 100 bytes fill one page
// well, so compaction packs their leaves into single pages, never more,
// however sparse random deletes left them.
func TestCompactSmallValuesOnePageLeaves(t *testing.T) {
	n := 60000
	if testing.Short() || raceEnabled {
		n = 20000
	}
	rng := rand.New(rand.NewSource(testSeed(t)))
	db := openTestDB(t, &Options{PageSize: 4096})
	keys := rng.Perm(n)
	for start := 0; start < n; start += 1000 {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for _, k := range keys[start : start+1000] {
				v := make([]byte, 100)
				rng.Read(v)
				if err := b.Put(binary.BigEndian.AppendUint64(nil, uint64(k)), v); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		for k := range n {
			if rng.Intn(2) == 0 {
				if err := b.Delete(binary.BigEndian.AppendUint64(nil, uint64(k))); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	live, want := liveDigest(t, db.DB)
	before, _ := leafRuns(t, db.DB, 0)
	if _, err := db.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, _ := leafRuns(t, db.DB, 0)
	t.Logf("%d live bytes; leaf runs by pages before %v, after %v", live, before, after)
	for pages, count := range after {
		if pages != 1 {
			t.Errorf("%d leaves of %d pages after compaction, want leaves of one page", count, pages)
		}
	}
	if after[1] >= before[1]*3/4 {
		t.Errorf("compaction kept %d of %d leaves, want fewer than 3/4", after[1], before[1])
	}
	if l, got := liveDigest(t, db.DB); l != live || got != want {
		t.Fatalf("contents changed by compaction: %d live bytes, want %d", l, live)
	}
}

// TestCompactPackModel: random puts, updates and deletes of values from
// a few bytes to past the inline limit, in random and in ascending key
// order, in a bucket and a nested one, with a Compact after every few
// transactions: after each, Check passes, the contents equal the model and
// compaction wrote no leaf of several elements longer than eight pages. The commits after a
// compaction cut its packed leaves again, so packing, the commits' splits
// of packed leaves and packing those again all meet.
func TestCompactPackModel(t *testing.T) {
	rounds := 40
	if testing.Short() || raceEnabled {
		rounds = 12
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	db := openTestDB(t, &Options{PageSize: 4096})
	// The values live in "top" and in "outer"/"nested": the trees a
	// compaction step rewrites without packing them — those holding the
	// record of a bucket it changed — then hold bucket records only.
	model := map[string]map[string][]byte{"top": {}, "nested": {}}
	bucket := func(tx *Tx, name string) (*Bucket, error) {
		if name == "top" {
			return tx.CreateBucketIfNotExists([]byte("top"))
		}
		outer, err := tx.CreateBucketIfNotExists([]byte("outer"))
		if err != nil {
			return nil, err
		}
		return outer.CreateBucketIfNotExists([]byte("nested"))
	}
	value := func() []byte {
		var n int
		switch r := rng.Intn(10); {
		case r < 4:
			n = rng.Intn(200)
		case r < 7:
			n = 200 + rng.Intn(1800)
		case r < 9:
			n = 2000 + rng.Intn(8000)
		default:
			n = 10000 + rng.Intn(30000) // past eight pages: a blob
		}
		v := make([]byte, n)
		rng.Read(v)
		return v
	}
	next := 0 // the next ascending key
	compactions := 0
	for round := range rounds {
		for range 1 + rng.Intn(4) {
			if err := db.Update(func(tx *Tx) error {
				for range 50 + rng.Intn(400) {
					name := "top"
					if rng.Intn(3) == 0 {
						name = "nested"
					}
					b, err := bucket(tx, name)
					if err != nil {
						return err
					}
					var k string
					if rng.Intn(2) == 0 {
						k = fmt.Sprintf("k%08d", next)
						next++
					} else {
						k = fmt.Sprintf("k%08d", rng.Intn(next+1))
					}
					if rng.Intn(4) == 0 {
						delete(model[name], k)
						if err := b.Delete([]byte(k)); err != nil {
							return err
						}
						continue
					}
					v := value()
					model[name][k] = v
					if err := b.Put([]byte(k), v); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		before := db.headTxid()
		if _, err := db.Compact(context.Background()); err != nil {
			t.Fatalf("round %d: Compact: %v", round, err)
		}
		compactions++
		mustCheck(t, db.DB)
		// Commits still make leaves of two or three values of up to
		// eight pages each; compaction's own are at most eight pages.
		if _, longest := leafRuns(t, db.DB, before); longest > 8 {
			t.Fatalf("round %d: compaction wrote a leaf of several elements over %d pages", round, longest)
		}
		if err := db.View(func(tx *Tx) error {
			for name, kv := range model {
				b := tx.Bucket([]byte("top"))
				if name == "nested" {
					b = tx.Bucket([]byte("outer")).Bucket([]byte("nested"))
				}
				n := 0
				if err := b.ForEach(func(k, v []byte) error {
					n++
					if w, ok := kv[string(k)]; !ok || !bytes.Equal(v, w) {
						return fmt.Errorf("%s/%s: %d bytes, model has %d (%t)", name, k, len(v), len(w), ok)
					}
					return nil
				}); err != nil {
					return err
				}
				if n != len(kv) {
					return fmt.Errorf("%s: %d keys, model has %d", name, n, len(kv))
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if compactions != rounds {
		t.Fatalf("%d compactions ran, want %d", compactions, rounds)
	}
	runs, _ := leafRuns(t, db.DB, 0)
	t.Logf("%d keys, %d compactions; leaf runs by pages %v", len(model["top"])+len(model["nested"]), compactions, runs)
}

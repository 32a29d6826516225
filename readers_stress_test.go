package rivet

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadersStressSnapshots runs many goroutines beginning and ending read
// transactions while one writer rewrites a generation of keys per commit
// (freeing and reusing pages, growing the file and letting it shrink) and
// a compactor shrinks the file. Every read transaction checks that it sees
// one generation whole: the counter key, every value's generation and
// their checksum agree. A reader counted nowhere the writer looks would
// see its pages reused (a wrong generation or checksum, a corrupt page)
// or cut off the file (a fault). Some readers are delayed between loading
// the newest state and counting themselves on it, the window the reader
// table's retired bit closes.
func TestReadersStressSnapshots(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts Options
	}{
		{"full", Options{PageSize: 4096}},
		{"none", Options{PageSize: 4096, Durability: None}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			opts := mode.opts
			readersStress(t, &opts)
		})
	}
}

// stressGeneration describes generation g: its key count and value size.
// Most generations are small; every 16th is large, so the file grows and
// the compactor has a tail to cut once the next small one frees it.
func stressGeneration(g uint64) (keys, valueSize int) {
	if g%16 == 15 {
		return 300, 3000
	}
	return 40 + int(g*37%200), 64 + int(g*131%900)
}

// stressValue is value i of generation g: the generation and index, then
// filler that differs between generations.
func stressValue(g uint64, i, size int) []byte {
	v := make([]byte, size)
	binary.BigEndian.PutUint64(v, g)
	binary.BigEndian.PutUint32(v[8:], uint32(i))
	for j := 12; j < size; j++ {
		v[j] = byte(g*7 + uint64(i) + uint64(j))
	}
	return v
}

func readersStress(t *testing.T, opts *Options) {
	seed := testSeed(t)
	db := openTestDB(t, opts)
	db.compactBudget = 32
	// Now and then a reader stops between loading the newest state and
	// counting itself on it, long enough for commits to publish newer
	// states and the writer to look for the states readers hold.
	db.readers.BeforeCount = func() {
		if rand.Intn(64) == 0 {
			time.Sleep(time.Duration(rand.Intn(500)) * time.Microsecond)
		}
	}
	bucket := []byte("b")
	writeGen := func(g uint64) error {
		return db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucket)
			if err != nil {
				return err
			}
			keys, size := stressGeneration(g)
			sum := crc32.NewIEEE()
			for i := range keys {
				v := stressValue(g, i, size)
				sum.Write(v)
				if err := b.Put(fmt.Appendf(nil, "k%04d", i), v); err != nil {
					return err
				}
			}
			// The keys of a larger earlier generation go: their pages
			// are freed.
			for i := keys; ; i++ {
				k := fmt.Appendf(nil, "k%04d", i)
				if b.Get(k) == nil {
					break
				}
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			meta := binary.BigEndian.AppendUint64(nil, g)
			meta = binary.BigEndian.AppendUint32(meta, sum.Sum32())
			return b.Put([]byte("~gen"), meta)
		})
	}
	// check reads one whole generation in tx and verifies it.
	check := func(tx *Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return fmt.Errorf("txn %d: no bucket", tx.ID())
		}
		meta := b.Get([]byte("~gen"))
		if len(meta) != 12 {
			return fmt.Errorf("txn %d: generation key is %d bytes", tx.ID(), len(meta))
		}
		g := binary.BigEndian.Uint64(meta)
		keys, size := stressGeneration(g)
		sum := crc32.NewIEEE()
		n := 0
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if k[0] == '~' {
				continue
			}
			if len(v) != size || binary.BigEndian.Uint64(v) != g || int(binary.BigEndian.Uint32(v[8:])) != n {
				return fmt.Errorf("txn %d (generation %d): key %q is not value %d of the generation (%d bytes)", tx.ID(), g, k, n, len(v))
			}
			sum.Write(v)
			n++
		}
		if n != keys || sum.Sum32() != binary.BigEndian.Uint32(meta[8:]) {
			return fmt.Errorf("txn %d (generation %d): %d keys (want %d), checksum %08x (want %08x)", tx.ID(), g, n, keys, sum.Sum32(), binary.BigEndian.Uint32(meta[8:]))
		}
		return nil
	}
	if err := writeGen(0); err != nil {
		t.Fatal(err)
	}

	duration := 3 * time.Second
	if testing.Short() {
		duration = time.Second
	}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
		views    atomic.Int64
		held     atomic.Int64 // transactions kept open across commits
		shrinks  atomic.Int64 // compactions that cut the file
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stop.Store(true)
	}
	const readers = 16
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(r)))
			for !stop.Load() {
				if rng.Intn(16) != 0 {
					if err := db.View(check); err != nil {
						fail(err)
						return
					}
					views.Add(1)
					continue
				}
				// A longer reader: its snapshot stays held while commits
				// and compaction steps go on, and it checks it twice.
				tx, err := db.Begin(false)
				if err != nil {
					fail(err)
					return
				}
				err = check(tx)
				time.Sleep(time.Duration(rng.Intn(2000)) * time.Microsecond)
				if err == nil {
					err = check(tx)
				}
				if rerr := tx.Rollback(); err == nil {
					err = rerr
				}
				if err != nil {
					fail(err)
					return
				}
				held.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		path := db.Path()
		for !stop.Load() {
			before, err := os.Stat(path)
			if err != nil {
				fail(err)
				return
			}
			if _, err := db.Compact(context.Background()); err != nil {
				fail(fmt.Errorf("compact: %w", err))
				return
			}
			after, err := os.Stat(path)
			if err != nil {
				fail(err)
				return
			}
			if after.Size() < before.Size() {
				shrinks.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Run for duration, and on a loaded machine longer (up to ten times),
	// until each kind of event has happened often enough to assert on.
	enough := func(gens uint64) bool {
		return gens >= 50 && views.Load() >= 1000 && held.Load() >= 20 && shrinks.Load() >= 1
	}
	gens := uint64(0)
	start := time.Now()
	for !stop.Load() {
		if el := time.Since(start); el >= 10*duration || (el >= duration && enough(gens)) {
			break
		}
		gens++
		if err := writeGen(gens); err != nil {
			fail(fmt.Errorf("generation %d: %w", gens, err))
		}
	}
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("%d generations, %d short and %d held read transactions, %d compactions that cut the file",
		gens, views.Load(), held.Load(), shrinks.Load())
	if !enough(gens) {
		t.Fatalf("too little ran to assert anything: %d generations, %d short and %d held readers, %d cuts",
			gens, views.Load(), held.Load(), shrinks.Load())
	}
	if err := db.View(check); err != nil {
		t.Fatal(err)
	}
}

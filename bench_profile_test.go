package rivet

// Profiling benchmarks for the read and load paths. Speed claims come from bench/,
// which runs rivet and bbolt side by side; these exist to profile rivet
// alone (go test -bench Get -cpuprofile ...).

import (
	"encoding/binary"
	"math/rand"
	"testing"
	"time"
)

func BenchmarkGetRandom(b *testing.B) {
	const n = 200000
	db := loadedDB(b, n)
	rng := rand.New(rand.NewSource(1))
	b.ResetTimer()
	_ = db.View(func(tx *Tx) error {
		bk := tx.Bucket([]byte("b"))
		k := make([]byte, 16)
		for i := 0; i < b.N; i++ {
			binary.BigEndian.PutUint64(k, uint64(rng.Intn(n))*2654435761)
			if bk.Get(k) == nil {
				b.Fatal("missing")
			}
		}
		return nil
	})
}

func BenchmarkScan10(b *testing.B) {
	const n = 200000
	db := loadedDB(b, n)
	rng := rand.New(rand.NewSource(1))
	b.ResetTimer()
	_ = db.View(func(tx *Tx) error {
		bk := tx.Bucket([]byte("b"))
		k := make([]byte, 16)
		for i := 0; i < b.N; i++ {
			binary.BigEndian.PutUint64(k, uint64(rng.Intn(n))*2654435761)
			c := bk.Cursor()
			j := 0
			for kk, _ := c.Seek(k); kk != nil && j < 10; kk, _ = c.Next() {
				j++
			}
		}
		return nil
	})
}

// BenchmarkBulkLoadSeq loads 100k sequential keys in 1000-key transactions
// (NoSync, so it measures CPU, not the disk).
func BenchmarkBulkLoadSeq(b *testing.B) {
	for it := 0; it < b.N; it++ {
		db := openTestDB(b, &Options{NoSync: true})
		const n = 100000
		for s := 0; s < n; s += 1000 {
			_ = db.Update(func(tx *Tx) error {
				bk, _ := tx.CreateBucketIfNotExists([]byte("b"))
				for i := s; i < s+1000; i++ {
					k := make([]byte, 16)
					binary.BigEndian.PutUint64(k, uint64(i))
					if err := bk.Put(k, make([]byte, 100)); err != nil {
						return err
					}
				}
				return nil
			})
		}
		db.checkAndClose()
	}
}

// BenchmarkViewScan10 is a read transaction per 10-key range scan, as the
// bench module's random-reads workload does it.
func BenchmarkViewScan10(b *testing.B) {
	const n = 100000
	db := loadedDB(b, n)
	rng := rand.New(rand.NewSource(1))
	k := make([]byte, 16)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(k, uint64(rng.Intn(n))*2654435761)
		_ = db.View(func(tx *Tx) error {
			c := tx.Bucket([]byte("b")).Cursor()
			j := 0
			for kk, _ := c.Seek(k); kk != nil && j < 10; kk, _ = c.Next() {
				j++
			}
			return nil
		})
	}
}

// loadedDB returns a test DB whose bucket "b" holds n keys (16-byte keys in
// ascending order, 100-byte values), loaded in 10,000-key transactions.
func loadedDB(b *testing.B, n int) *testDB {
	db := openTestDB(b, nil)
	for s := 0; s < n; s += 10000 {
		err := db.Update(func(tx *Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := s; i < s+10000 && i < n; i++ {
				k := make([]byte, 16)
				binary.BigEndian.PutUint64(k, uint64(i)*2654435761)
				if err := bk.Put(k, make([]byte, 100)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkSlasherCommit is batch-slasher's commit (bench/wl_slasher.go) in
// Full mode: 5,000 updates per transaction, 1,250 at random into each of
// three 50,000-key buckets and 1,250 appended to a fourth.
func BenchmarkSlasherCommit(b *testing.B) {
	const perBucket = 50000
	db := openTestDB(b, nil)
	key := func(i uint64) []byte {
		k := make([]byte, 16)
		binary.BigEndian.PutUint64(k, i)
		binary.BigEndian.PutUint64(k[8:], i*0x9e3779b97f4a7c15)
		return k
	}
	val := make([]byte, 100)
	names := [][]byte{[]byte("s0"), []byte("s1"), []byte("s2"), []byte("s3")}
	for s := uint64(0); s < perBucket; s += 1250 {
		if err := db.Update(func(tx *Tx) error {
			for _, name := range names {
				bk, err := tx.CreateBucketIfNotExists(name)
				if err != nil {
					return err
				}
				for i := s; i < s+1250; i++ {
					if err := bk.Put(key(i), val); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(1))
	next := uint64(perBucket)
	s0 := db.Stats()
	defer func() {
		s1 := db.Stats()
		d := s1.Sub(&s0)
		n := time.Duration(b.N)
		b.Logf("per commit: rebalance %v, spill %v, write+flush %v", d.TxStats.GetRebalanceTime()/n, d.TxStats.GetSpillTime()/n, d.TxStats.GetWriteTime()/n)
	}()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		if err := db.Update(func(tx *Tx) error {
			for bi, name := range names {
				bk := tx.Bucket(name)
				for i := 0; i < 1250; i++ {
					id := uint64(rng.Intn(perBucket))
					if bi == 3 {
						id, next = next, next+1
					}
					binary.BigEndian.PutUint64(val, uint64(n))
					if err := bk.Put(key(id), val); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkViewsUnderWriter is readers-under-writer's saturating mode
// (bench/wl_readers.go) for profiling the reader table: 64 goroutines of
// Views of one Get while one goroutine commits 64 keys of 4 KiB values.
// It reports the writer's commits per second of the run.
func BenchmarkViewsUnderWriter(b *testing.B) {
	const n = 10000
	db := loadedDB(b, n)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		commits := 0
		for next := uint64(n); ; commits++ {
			select {
			case <-stop:
				done <- commits
				return
			default:
			}
			err := db.Update(func(tx *Tx) error {
				bk := tx.Bucket([]byte("b"))
				for range 64 {
					k := make([]byte, 16)
					binary.BigEndian.PutUint64(k, next*2654435761)
					next++
					if err := bk.Put(k, make([]byte, 4096)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Error(err)
				done <- commits
				return
			}
		}
	}()
	start := time.Now()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewSource(time.Now().UnixNano()))
		k := make([]byte, 16)
		for pb.Next() {
			binary.BigEndian.PutUint64(k, uint64(rng.Intn(n))*2654435761)
			_ = db.View(func(tx *Tx) error {
				if tx.Bucket([]byte("b")).Get(k) == nil {
					b.Error("missing key")
				}
				return nil
			})
		}
	})
	b.StopTimer()
	close(stop)
	commits := <-done
	b.ReportMetric(float64(commits)/time.Since(start).Seconds(), "commits/s")
}

package rivet

// Profiling benchmarks for the read and load paths. Speed claims come from bench/,
// which runs rivet and bbolt side by side; these exist to profile rivet
// alone (go test -bench Get -cpuprofile ...).

import (
	"encoding/binary"
	"math/rand"
	"testing"
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

package rivet

import (
	"math/rand"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkOneKeyCommit profiles the CPU path of a durable one-key commit
// (the bench's durable-writes workload without the disk): Full durability
// on a fresh DB in the test's temporary directory, 16-byte random keys and
// 100-byte values. Where TMPDIR is a tmpfs the flush costs nothing, so the
// figure is the commit's own work; on a disk it includes the flush.
func BenchmarkOneKeyCommit(b *testing.B) { benchOneKeyCommits(b, nil, 1000) }

// BenchmarkOneKeyCommitNone is BenchmarkOneKeyCommit in None durability on
// an empty bucket: the commit path with no flush, meant to be as
// lean as bbolt's with NoSync.
func BenchmarkOneKeyCommitNone(b *testing.B) { benchOneKeyCommits(b, &Options{Durability: None}, 0) }

// benchOneKeyCommits times one-key Updates of 16-byte random keys and
// 100-byte values into a bucket first loaded with preload keys.
func benchOneKeyCommits(b *testing.B, opts *Options, preload int) {
	db := openTestDB(b, opts)
	rng := rand.New(rand.NewSource(1))
	val := make([]byte, 100)
	key := func() []byte {
		k := make([]byte, 16)
		rng.Read(k)
		return k
	}
	if err := db.Update(func(tx *Tx) error {
		bk, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for range preload {
			if err := bk.Put(key(), val); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		k := key()
		if err := db.Update(func(tx *Tx) error {
			return tx.Bucket([]byte("b")).Put(k, val)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConcurrentOneKeyCommits16 is concurrent-durable's 16-goroutine
// setting (one-key Updates) for profiling group commit: Full and None
// durability on a DB in the test's temporary directory.
func BenchmarkConcurrentOneKeyCommits16(b *testing.B) {
	for _, mode := range []struct {
		name string
		d    Durability
	}{{"Full", Full}, {"None", None}} {
		b.Run(mode.name, func(b *testing.B) {
			db := openTestDB(b, &Options{Durability: mode.d})
			if err := db.Update(func(tx *Tx) error {
				_, err := tx.CreateBucket([]byte("b"))
				return err
			}); err != nil {
				b.Fatal(err)
			}
			var seed atomic.Int64
			s0 := db.Stats()
			b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewSource(seed.Add(1)))
				val := make([]byte, 100)
				for pb.Next() {
					k := make([]byte, 16)
					rng.Read(k)
					if err := db.Update(func(tx *Tx) error {
						return tx.Bucket([]byte("b")).Put(k, val)
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			s1 := db.Stats()
			if d := s1.Sub(&s0); d.Flushes > 0 {
				b.ReportMetric(float64(b.N)/float64(d.Flushes), "commits/flush")
			}
		})
	}
}

package rivet

import (
	"math/rand"
	"testing"
)

// BenchmarkOneKeyCommit profiles the CPU path of a durable one-key commit
// (the bench's durable-writes workload without the disk): Full durability
// on a fresh DB in the test's temporary directory, 16-byte random keys and
// 100-byte values. Where TMPDIR is a tmpfs the flush costs nothing, so the
// figure is the commit's own work; on a disk it includes the flush.
func BenchmarkOneKeyCommit(b *testing.B) {
	db := openTestDB(b, nil)
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
		for range 1000 {
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

// BenchmarkOneKeyCommitNone is BenchmarkOneKeyCommit in None durability:
// the commit path with no flush, which issue 12 wants as lean as bbolt's
// with NoSync.
func BenchmarkOneKeyCommitNone(b *testing.B) {
	db := openTestDB(b, &Options{Durability: None})
	rng := rand.New(rand.NewSource(1))
	val := make([]byte, 100)
	key := func() []byte {
		k := make([]byte, 16)
		rng.Read(k)
		return k
	}
	if err := db.Update(func(tx *Tx) error {
		_, err := tx.CreateBucket([]byte("b"))
		return err
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

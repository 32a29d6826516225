package bench

// Side-by-side microbenchmarks of the random-reads workload's two operations
// (wl_randomreads.go) through the same engine adapters, so rivet and bbolt
// can be profiled with identical work:
//
//	go test -run '^$' -bench ReadPath -cpuprofile cpu.out
//
// The workload's figures are the ones reported; these exist to find where
// the time goes.

import (
	"context"
	"math/rand/v2"
	"testing"
)

// readPathKeys is the demo preset's key count.
const readPathKeys = 100_000

func benchReadPath(b *testing.B, engine string, op func(db DB, keys [][]byte) (int, error)) {
	e, err := LookupEngine(engine)
	if err != nil {
		b.Skip(err)
	}
	db, err := e.Open(b.TempDir()+"/reads.db", OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := load(context.Background(), db, sequence(readPathKeys), nopProgress{}); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, readTxnOps)
	for i := range keys {
		keys[i] = seqKey(r.Uint64N(readPathKeys - scanLen))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += readTxnOps {
		if _, err := op(db, keys[:min(readTxnOps, b.N-i)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadPathGet(b *testing.B) {
	for _, e := range []string{RivetEngine, BaselineEngine} {
		b.Run(e, func(b *testing.B) {
			benchReadPath(b, e, func(db DB, keys [][]byte) (int, error) { return db.Get(BucketName, keys) })
		})
	}
}

func BenchmarkReadPathScan10(b *testing.B) {
	for _, e := range []string{RivetEngine, BaselineEngine} {
		b.Run(e, func(b *testing.B) {
			benchReadPath(b, e, func(db DB, keys [][]byte) (int, error) { return db.Scan(BucketName, keys, scanLen) })
		})
	}
}

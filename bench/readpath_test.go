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
	"time"
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

// BenchmarkReadPathPair alternates rivet and bbolt batches of readTxnOps
// operations (one read transaction each) in one loop and reports each
// engine's ns/op and rivet's throughput relative to bbolt's: on a shared,
// noisy machine, interleaving at this grain exposes both engines to the
// same interference, which separate benchmark runs do not.
func BenchmarkReadPathPair(b *testing.B) {
	ops := []struct {
		name string
		op   func(db DB, keys [][]byte) (int, error)
	}{
		{"get", func(db DB, keys [][]byte) (int, error) { return db.Get(BucketName, keys) }},
		{"scan10", func(db DB, keys [][]byte) (int, error) { return db.Scan(BucketName, keys, scanLen) }},
	}
	engines := []string{RivetEngine, BaselineEngine}
	dbs := make([]DB, len(engines))
	for i, name := range engines {
		e, err := LookupEngine(name)
		if err != nil {
			b.Skip(err)
		}
		if dbs[i], err = e.Open(b.TempDir()+"/reads.db", OpenOptions{}); err != nil {
			b.Fatal(err)
		}
		defer dbs[i].Close()
		if err := load(context.Background(), dbs[i], sequence(readPathKeys), nopProgress{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			var spent [2]time.Duration
			keys := make([][]byte, readTxnOps)
			for i := 0; i < b.N; i += readTxnOps {
				for j := range keys {
					keys[j] = seqKey(r.Uint64N(readPathKeys - scanLen))
				}
				batch := keys[:min(readTxnOps, b.N-i)]
				for k := range dbs {
					// Alternate which engine goes first, so neither always
					// finds the caches as the other left them.
					e := (k + i/readTxnOps) % len(dbs)
					start := time.Now()
					if _, err := o.op(dbs[e], batch); err != nil {
						b.Fatal(err)
					}
					spent[e] += time.Since(start)
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "rivet-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "bbolt-ns/op")
			b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "rivet/bbolt-throughput")
		})
	}
}

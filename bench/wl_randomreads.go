package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// randomReads measures point lookups and short range scans on a loaded DB,
// with one and two reader goroutines: readers must scale without a lock
// shared for the life of a read transaction.
var randomReads = Workload{
	Name:    "random-reads",
	Summary: "after loading --keys keys: --reads random Gets with 1 and 2 goroutines, and 10-key range scans",
	Run:     runRandomReads,
}

const (
	// readTxnOps is the Gets (or scans) issued per read transaction: enough
	// to amortise beginning a transaction, as a real reader holding a
	// snapshot for a request would.
	readTxnOps = 1000
	// scanLen is the pairs read per range scan.
	scanLen = 10
)

// readerCounts are the goroutine counts measured. Two is what a two-core CI
// machine can show; more belongs in a scaling workload.
var readerCounts = []int{1, 2}

func runRandomReads(ctx context.Context, env *Env) error {
	n := env.Config.Keys
	db, err := env.Open("reads.db")
	if err != nil {
		return err
	}
	defer db.Close()
	if err := load(ctx, db, sequence(n), env.Progress("load", int64(n))); err != nil {
		return err
	}

	reads := env.Config.Reads
	for _, g := range readerCounts {
		// Keys are drawn before the clock starts, so the figure is the
		// engine's, not the random number generator's.
		per := make([][][]byte, g)
		for w := range per {
			r := env.rng(uint64(0x6e70 + 16*g + w))
			for range reads / g {
				per[w] = append(per[w], seqKey(r.Uint64N(uint64(n))))
			}
		}
		p := env.Progress(fmt.Sprintf("gets, %d goroutine(s)", g), int64(reads))
		elapsed, found, err := parallel(ctx, per, func(keys [][]byte) (int, error) {
			f, err := db.Get(BucketName, keys)
			p.Add(int64(len(keys)))
			return f, err
		})
		p.Done()
		if err != nil {
			return err
		}
		if want := g * (reads / g); found != want {
			return fmt.Errorf("gets found %d of %d keys that were loaded", found, want)
		}
		env.Scalar(fmt.Sprintf("gets/s, %d goroutine(s)", g), UnitRate, Higher, float64(found)/elapsed.Seconds())
	}

	// Range scans start anywhere a full scanLen pairs follow.
	scans := max(reads/scanLen, 1)
	r := env.rng(0x5ca7)
	starts := make([][]byte, scans)
	for i := range starts {
		starts[i] = seqKey(r.Uint64N(uint64(n - scanLen + 1)))
	}
	p := env.Progress("10-key scans", int64(scans))
	elapsed, pairs, err := parallel(ctx, [][][]byte{starts}, func(chunk [][]byte) (int, error) {
		k, err := db.Scan(BucketName, chunk, scanLen)
		p.Add(int64(len(chunk)))
		return k, err
	})
	p.Done()
	if err != nil {
		return err
	}
	if pairs != scans*scanLen {
		return fmt.Errorf("scans read %d pairs, want %d", pairs, scans*scanLen)
	}
	env.Scalar("10-key scans/s", UnitRate, Higher, float64(scans)/elapsed.Seconds())
	return nil
}

// parallel runs one goroutine per element of work; each feeds its keys to
// op readTxnOps at a time. It returns the wall time and the sum of op's
// counts.
func parallel(ctx context.Context, work [][][]byte, op func(keys [][]byte) (int, error)) (time.Duration, int, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		first error
	)
	start := time.Now()
	for _, keys := range work {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum := 0
			var err error
			for i := 0; i < len(keys) && err == nil; i += readTxnOps {
				if err = ctx.Err(); err != nil {
					break
				}
				var k int
				k, err = op(keys[i:min(i+readTxnOps, len(keys))])
				sum += k
			}
			mu.Lock()
			total += sum
			if first == nil {
				first = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return time.Since(start), total, first
}

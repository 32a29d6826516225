package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// readersUnderWriter measures short read transactions while a writer grows
// the file (bbolt #967: reads stalled for 300 ms to 20 s). bbolt maps its
// file once and remaps it when the file outgrows the map (each doubling up
// to 1 GiB, then every GiB); a remap takes an exclusive lock that waits for
// every open read transaction to end and holds back every new one. rivet's
// map reserves address space ahead and old maps live until their last
// reader ends, so growing never waits for readers. The database holds
// --keys/10 keys (a small file, so the writer makes it outgrow its map
// several times); readersGoroutines goroutines then make read transactions
// (one Get of a random key, or a 10-key cursor scan from one, alternately)
// while one goroutine commits growing transactions (growTxnKeys new keys of
// growValueSize bytes), for --duration in each of readerModes.
var readersUnderWriter = Workload{
	Name:    "readers-under-writer",
	Summary: "bbolt #967: 64 goroutines making short read transactions (a Get or a 10-key scan; paced, then saturating) while one goroutine commits 256 KiB transactions that grow the file, --duration each: read latency p50/p99/p99.9/max, writer commits/s",
	Run:     runReadersUnderWriter,
}

// readersGoroutines is the number of reading goroutines.
const readersGoroutines = 64

// Shape of the growing writer's transactions: 64 new keys of 4 KiB, 256 KiB
// per commit, so the file grows steadily.
const (
	growTxnKeys   = 64
	growValueSize = 4096
)

// scanKeys is the length of the readers' cursor scans.
const scanKeys = 10

// readerModes are the two settings readers-under-writer measures, each
// for --duration: readers that pause readerPause after every transaction
// (64,000 transactions/s offered, far below what two cores serve, so a
// latency is the engine's own waiting: locks, remaps), and readers that
// never pause (the machine saturated: latencies include waiting for a CPU,
// and the writer competes with 64 busy goroutines).
var readerModes = []struct {
	name  string
	pause time.Duration
}{{"paced", readerPause}, {"saturating", 0}}

// readerPause is the pause of a paced reader between transactions.
const readerPause = time.Millisecond

func runReadersUnderWriter(ctx context.Context, env *Env) error {
	const name = "readers.db"
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	defer db.Close()
	n := max(env.Config.Keys/10, scanKeys)
	if err := load(ctx, db, sequence(n), env.Progress("load", int64(n))); err != nil {
		return err
	}
	for _, mode := range readerModes {
		before, err := fileSize(env.Path(name))
		if err != nil {
			return err
		}
		p := env.Progress(mode.name+" readers and a writer", int64(env.Config.Duration/time.Millisecond))
		reads, commits, elapsed, err := readersAndWriter(ctx, env, db, uint64(n), mode.pause)
		p.Add(int64(elapsed / time.Millisecond))
		p.Done()
		if err != nil {
			return err
		}
		after, err := fileSize(env.Path(name))
		if err != nil {
			return err
		}
		pre := mode.name + ": "
		recordTail(env, pre+"read latency", reads)
		env.Scalar(pre+"reads/s", UnitRate, Higher, float64(len(reads))/elapsed.Seconds())
		env.Scalar(pre+"reads over 10ms", UnitCount, Lower, float64(countOver(reads, 10*time.Millisecond)))
		env.Scalar(pre+"writer commits/s", UnitRate, Higher, float64(len(commits))/elapsed.Seconds())
		recordTail(env, pre+"writer commit latency", commits)
		env.Scalar(pre+"file growth", UnitBytes, Neither, float64(after-before))
	}
	return nil
}

// readersAndWriter runs readersGoroutines readers (pausing for pause
// after each transaction) and one growing writer on db for --duration,
// and returns the readers' latencies, the writer's, and how long they ran.
func readersAndWriter(ctx context.Context, env *Env, db DB, n uint64, pause time.Duration) (reads, commits []time.Duration, elapsed time.Duration, err error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	lat := make([][]time.Duration, readersGoroutines)
	errs := make([]error, readersGoroutines+1)
	for g := range readersGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[g], errs[g] = readLoop(db, env.rng(uint64(0x7ead0000+g)), n, pause, stop)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		commits, _, errs[readersGoroutines] = growLoop(db, stop)
	}()
	start := time.Now()
	select {
	case <-time.After(env.Config.Duration):
	case <-ctx.Done():
	}
	close(stop)
	wg.Wait()
	elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, nil, 0, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, 0, err
	}
	return slices.Concat(lat...), commits, elapsed, nil
}

// readLoop makes read transactions until stop is closed, at least one: a
// Get of a random key below n, then a scan of scanKeys keys from one, and
// so on, pausing for pause after each. It returns their latencies.
func readLoop(db DB, rng interface{ Uint64N(uint64) uint64 }, n uint64, pause time.Duration, stop <-chan struct{}) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, 1<<14)
	keys := [][]byte{nil}
	for i := 0; ; i++ {
		if i > 0 {
			if pause > 0 {
				select {
				case <-stop:
					return lat, nil
				case <-time.After(pause):
				}
			}
			select {
			case <-stop:
				return lat, nil
			default:
			}
		}
		keys[0] = seqKey(rng.Uint64N(n))
		t0 := time.Now()
		var got int
		var err error
		if i%2 == 0 {
			got, err = db.Get(BucketName, keys)
		} else {
			got, err = db.Scan(BucketName, keys, scanKeys)
		}
		lat = append(lat, time.Since(t0))
		if err != nil {
			return nil, fmt.Errorf("reader: %w", err)
		}
		if got == 0 {
			return nil, fmt.Errorf("reader: key %x not found", keys[0])
		}
	}
}

// growLoop commits growing transactions until stop is closed, at least
// one, and returns their latencies and when each ended.
func growLoop(db DB, stop <-chan struct{}) (lat []time.Duration, ends []time.Time, err error) {
	batch := make([]KV, growTxnKeys)
	for i := 0; ; i++ {
		if i > 0 {
			select {
			case <-stop:
				return lat, ends, nil
			default:
			}
		}
		for j := range batch {
			id := uint64(i*growTxnKeys + j)
			k := make([]byte, 13)
			copy(k, "grow-")
			binary.BigEndian.PutUint64(k[5:], id)
			batch[j] = KV{Key: k, Value: valueOf(id, growValueSize)}
		}
		t0 := time.Now()
		if err := db.Update(BucketName, batch); err != nil {
			return nil, nil, fmt.Errorf("writer: %w", err)
		}
		end := time.Now()
		lat, ends = append(lat, end.Sub(t0)), append(ends, end)
	}
}

// valueOf returns the size-byte value of the i-th growing key: a window of
// the value pool, as value is for the loaded keys.
func valueOf(i uint64, size int) []byte {
	off := mix(i^0x6a09e667) % uint64(len(valuePool)-size)
	return valuePool[off : off+uint64(size) : off+uint64(size)]
}

// recordTail records the p50, p99, p99.9 and maximum of ds as scalars
// named after figure: one value per run, so the report shows their median
// over runs, as it does for every scalar.
func recordTail(env *Env, figure string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	// Nearest rank, as Percentile: a latency some operation really had.
	at := func(p float64) float64 {
		rank := int(math.Ceil(p / 100 * float64(len(s))))
		return float64(s[min(max(rank, 1), len(s))-1])
	}
	env.Scalar(figure+" p50", UnitDuration, Lower, at(50))
	env.Scalar(figure+" p99", UnitDuration, Lower, at(99))
	env.Scalar(figure+" p99.9", UnitDuration, Lower, at(99.9))
	env.Scalar(figure+" max", UnitDuration, Lower, float64(s[len(s)-1]))
}

// countOver returns how many of ds exceed limit.
func countOver(ds []time.Duration, limit time.Duration) int {
	n := 0
	for _, d := range ds {
		if d > limit {
			n++
		}
	}
	return n
}

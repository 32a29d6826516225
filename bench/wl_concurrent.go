package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/rivetkv/rivet"
)

// concurrentDurable measures group commit: many goroutines each making
// durable one-key commits. An engine with group commit lets concurrent
// commits share a flush, so throughput grows with the goroutines; one that
// flushes per commit stays flat. bbolt's answer is DB.Batch, which merges
// callers' functions into one transaction; it is measured as a mode of its
// own for every engine that has it ("batch"), next to plain Update
// ("update"), and for rivet also with DB.MaxBatchDelay 0 ("batch, no
// delay"), where a batch starts at once when none runs.
var concurrentDurable = Workload{
	Name:    "concurrent-durable",
	Summary: "1, 4, 16, 64 goroutines of durable one-key commits (Update and Batch), each setting for --duration/4",
	Run:     runConcurrentDurable,
}

// concurrentGoroutines are the goroutine counts measured.
var concurrentGoroutines = []int{1, 4, 16, 64}

// concurrentMinSetting is the shortest a setting runs, whatever --duration.
const concurrentMinSetting = 100 * time.Millisecond

func runConcurrentDurable(ctx context.Context, env *Env) error {
	db, err := env.Open("concurrent.db")
	if err != nil {
		return err
	}
	defer db.Close()
	per := max(env.Config.Duration/4, concurrentMinSetting)
	type mode struct {
		name   string
		commit func(kvs []KV) error
		// setup, if not nil, runs before the mode's settings and
		// returns what restores the DB after them.
		setup func() (restore func())
	}
	modes := []mode{{name: "update", commit: func(kvs []KV) error { return db.Update(BucketName, kvs) }}}
	if b, ok := db.(Batcher); ok {
		batch := func(kvs []KV) error { return b.Batch(BucketName, kvs) }
		modes = append(modes, mode{name: "batch", commit: batch})
		if s, ok := db.(BatchDelaySetter); ok {
			modes = append(modes, mode{name: "batch, no delay", commit: batch, setup: func() func() {
				s.SetBatchDelay(0)
				return func() { s.SetBatchDelay(rivet.DefaultMaxBatchDelay) }
			}})
		}
	}
	for _, m := range modes {
		restore := func() {}
		if m.setup != nil {
			restore = m.setup()
		}
		for _, g := range concurrentGoroutines {
			label := fmt.Sprintf("%s, %d goroutine(s)", m.name, g)
			p := env.Progress(label, int64(per/time.Millisecond))
			c0 := db.Counters()
			lat, elapsed, err := concurrentCommits(ctx, g, per, m.commit, p)
			p.Done()
			if err != nil {
				return err
			}
			dc := db.Counters().Sub(c0)
			n := float64(len(lat))
			if n == 0 {
				return fmt.Errorf("%s: no commit finished within %s", label, per)
			}
			env.Scalar("commits/s, "+label, UnitRate, Higher, n/elapsed.Seconds())
			env.Latencies("latency, "+label, lat)
			if commit, checkpoint, ok := commitFlushes(dc); ok {
				env.Scalar("flushes per 1000 commits, "+label, UnitCount, Lower, 1000*float64(commit)/n)
				if checkpoint > 0 {
					env.Scalar("checkpoint flushes per 1000 commits, "+label, UnitCount, Lower, 1000*float64(checkpoint)/n)
				}
			}
		}
		restore()
	}
	return nil
}

// concurrentCommits runs g goroutines making one-key commits with commit
// until d has passed and returns every commit's latency and the wall time.
// Keys are distinct across goroutines and commits, so every commit inserts.
// Progress is reported in milliseconds of the setting's duration.
func concurrentCommits(ctx context.Context, g int, d time.Duration, commit func([]KV) error, p Progress) ([]time.Duration, time.Duration, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   []time.Duration
		first error
	)
	start := time.Now()
	deadline := start.Add(d)
	stopTicker, tickerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(tickerDone)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		var reported int64
		for {
			select {
			case <-stopTicker:
				return
			case now := <-t.C:
				ms := min(int64(now.Sub(start)/time.Millisecond), int64(d/time.Millisecond))
				p.Add(ms - reported)
				reported = ms
			}
		}
	}()
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var err error
			for i := uint64(0); time.Now().Before(deadline); i++ {
				if err = ctx.Err(); err != nil {
					break
				}
				key := make([]byte, KeySize)
				binary.BigEndian.PutUint64(key, uint64(w)<<40|i)
				binary.BigEndian.PutUint64(key[8:], mix(uint64(start.UnixNano())^i))
				t0 := time.Now()
				if err = commit([]KV{{Key: key, Value: value(i)}}); err != nil {
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			if first == nil {
				first = err
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopTicker)
	<-tickerDone
	return all, elapsed, first
}

package bench

import (
	"context"
	"fmt"
	"time"
)

// modeLatency is what one durability mode costs a single writer: one
// goroutine making one-key commits for a fixed time on a fresh DB. Run it
// on the durability variants (DurabilityEngines) to compare rivet's Full,
// Barrier, Periodic and None with bbolt default and bbolt NoSync; on a
// default engine it is the 1-goroutine Update setting of
// concurrent-durable on a fresh file.
//
// It runs for a time rather than for --commits: a commit that does not
// flush takes tens of microseconds, and a thousand of them would be over
// before the machine's noise averages out. The modes that defer flushes pay
// for them at Close (rivet's final sync point), which is reported too.
var modeLatency = Workload{
	Name:    "mode-latency",
	Summary: "one goroutine of one-key commits for --duration/4 on a fresh DB; meant for the durability variants (--engines " + RivetEngine + "," + RivetBarrierEngine + ",...," + BoltNoSyncEngine + ")",
	Run:     runModeLatency,
}

func runModeLatency(ctx context.Context, env *Env) error {
	db, err := env.Open("modes.db")
	if err != nil {
		return err
	}
	per := max(env.Config.Duration/4, concurrentMinSetting)
	p := env.Progress("one-key commits, 1 goroutine", int64(per/time.Millisecond))
	c0 := db.Counters()
	lat, elapsed, err := concurrentCommits(ctx, 1, per, func(kvs []KV) error { return db.Update(BucketName, kvs) }, p)
	p.Done()
	dc := db.Counters().Sub(c0)
	if err != nil {
		_ = db.Close()
		return err
	}
	t0 := time.Now()
	if err := db.Close(); err != nil {
		return err
	}
	closed := time.Since(t0)
	n := float64(len(lat))
	if n == 0 {
		return fmt.Errorf("no commit finished within %s", per)
	}
	env.Scalar("commits/s", UnitRate, Higher, n/elapsed.Seconds())
	env.Latencies("commit latency", lat)
	env.Scalar("commits", UnitCount, Neither, n)
	if commit, checkpoint, ok := commitFlushes(dc); ok {
		env.Scalar("flushes per 1000 commits", UnitCount, Lower, 1000*float64(commit)/n)
		if checkpoint > 0 {
			env.Scalar("checkpoint flushes per 1000 commits", UnitCount, Lower, 1000*float64(checkpoint)/n)
		}
	}
	env.Latencies("close", []time.Duration{closed})
	return nil
}

package bench

import (
	"context"
	"fmt"
	"time"
)

// batchSlasher is the write shape of Lighthouse's slasher database (seed
// 001): a few large tables updated together, each commit a batch of
// thousands of writes spread over all of them. Three buckets get updates of
// random existing keys (the slasher's min/max target chunks); the fourth
// gets new keys in ascending order (attestations indexed as they arrive).
// The figures are commit throughput and what a commit writes.
var batchSlasher = Workload{
	Name:    "batch-slasher",
	Summary: "--slasher-keys keys over 4 buckets, then commits of 5000 updates spread over them (the batch shape of a slashing-protection store)",
	Run:     runBatchSlasher,
}

const (
	// slasherBuckets is the number of tables.
	slasherBuckets = 4
	// slasherBatch is the writes per commit, spread evenly over the buckets.
	slasherBatch = 5000
)

// slasherBucket returns the name of bucket i.
func slasherBucket(i int) []byte { return fmt.Appendf(nil, "slasher-%d", i) }

func runBatchSlasher(ctx context.Context, env *Env) error {
	const name = "slasher.db"
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()
	perBucket := uint64(env.Config.SlasherKeys / slasherBuckets)

	// Load every bucket with perBucket sequential keys, slasherBatch pairs
	// per transaction (a quarter in each bucket).
	p := env.Progress("load", int64(perBucket)*slasherBuckets)
	step := uint64(slasherBatch / slasherBuckets)
	for start := uint64(0); start < perBucket; start += step {
		if err := ctx.Err(); err != nil {
			p.Done()
			return err
		}
		end := min(start+step, perBucket)
		batches := make([]BucketKVs, slasherBuckets)
		for b := range batches {
			batches[b].Bucket = slasherBucket(b)
			for id := start; id < end; id++ {
				batches[b].KVs = append(batches[b].KVs, KV{Key: seqKey(id), Value: value(id + uint64(b)<<48)})
			}
		}
		if err := db.UpdateBuckets(batches); err != nil {
			p.Done()
			return err
		}
		p.Add(int64(end-start) * slasherBuckets)
	}
	p.Done()
	loaded, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar("file size after load", UnitBytes, Neither, float64(loaded))

	// Each batch is built off the clock, just before its commit (building
	// them all up front would hold millions of pairs in memory); the rate
	// is over the time spent committing.
	commits := env.Config.Commits
	r := env.rng(0x51a5)
	next := perBucket // next new key of the append-only bucket
	batches := make([]BucketKVs, slasherBuckets)
	for b := range batches {
		batches[b] = BucketKVs{Bucket: slasherBucket(b), KVs: make([]KV, step)}
	}

	pc := env.Progress("batch commits", int64(commits))
	defer pc.Done()
	lat := make([]time.Duration, 0, commits)
	io0, ioOK := ReadProcIO()
	c0 := db.Counters()
	var elapsed time.Duration
	for c := 0; c < commits && elapsed < env.Config.Duration; c++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		for b := range batches {
			for i := range batches[b].KVs {
				var id uint64
				if b == slasherBuckets-1 {
					id, next = next, next+1
				} else {
					id = r.Uint64N(perBucket)
				}
				batches[b].KVs[i] = KV{Key: seqKey(id), Value: value(id ^ mix(uint64(c)+uint64(b)<<32))}
			}
		}
		t0 := time.Now()
		if err := db.UpdateBuckets(batches); err != nil {
			return err
		}
		d := time.Since(t0)
		elapsed += d
		lat = append(lat, d)
		pc.Add(1)
	}
	io1, _ := ReadProcIO()
	dc := db.Counters().Sub(c0)
	done := float64(len(lat))
	if done == 0 {
		return fmt.Errorf("no commit finished within %s", env.Config.Duration)
	}
	env.Latencies("commit latency", lat)
	env.Scalar("commits/s", UnitRate, Higher, done/elapsed.Seconds())
	env.Scalar("updates/s", UnitRate, Higher, done*float64(step*slasherBuckets)/elapsed.Seconds())
	env.Scalar("commits", UnitCount, Neither, done)
	if ioOK {
		d := io1.Sub(io0)
		env.Scalar("wchar/commit", UnitBytes, Lower, float64(d.Wchar)/done)
		env.Scalar("write_bytes/commit", UnitBytes, Lower, float64(d.WriteBytes)/done)
	}
	if v, ok := dc[CtrBytesWritten]; ok {
		env.Scalar("engine bytes/commit", UnitBytes, Lower, float64(v)/done)
	}
	if v, ok := dc[CtrWriteCalls]; ok {
		env.Scalar("engine write calls/commit", UnitCount, Lower, float64(v)/done)
	}
	err = db.Close()
	db = nil
	if err != nil {
		return err
	}
	final, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar("file size at end", UnitBytes, Lower, float64(final))
	return nil
}

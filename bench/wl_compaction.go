package bench

import (
	"context"
	"fmt"
	"time"
)

// compaction measures giving space back: a file grown to --size
// and then emptied to 100 keys (as in fragmented), and one with half of its
// keys deleted at random, each compacted offline into a new file — the only
// way bbolt gives space back. Figures: the file size before and after, and
// the time the compaction took. Engines that compact online (rivet) add
// rows for the same file shrunk in place while a reader (one-key Gets at
// random) and a writer (one-key durable commits) run: time, size, and the
// p99 latencies of both with and without a compaction running.
var compaction = Workload{
	Name:    "compaction",
	Summary: "grow to --size, delete all but 100 keys (and, separately, half the keys at random), then compact offline into a new file, and online in place with a reader and a writer running",
	Run:     runCompaction,
}

// compactionTxMaxSize is the transaction size both engines' Compact use.
const compactionTxMaxSize = 64 << 20

func runCompaction(ctx context.Context, env *Env) error {
	c, ok := env.Engine.(OfflineCompactor)
	if !ok {
		return nil // LMDB: no offline compaction through this harness
	}
	for _, shape := range []string{"emptied to 100 keys", "half deleted"} {
		const name = "compaction.db"
		var before int64
		var err error
		n := fragmentedKeys(env.Config.Size)
		if shape == "emptied to 100 keys" {
			_, _, before, err = buildFragmented(ctx, env, name)
		} else {
			before, err = buildHalfDeleted(ctx, env, name)
		}
		if err != nil {
			return err
		}
		dst := env.Path("compacted.db")
		p := env.Progress("compact ("+shape+")", 1)
		start := time.Now()
		err = c.CompactFile(env.Path(name), dst, compactionTxMaxSize)
		elapsed := time.Since(start)
		p.Add(1)
		p.Done()
		if err != nil {
			return fmt.Errorf("compact %s: %w", shape, err)
		}
		after, err := fileSize(dst)
		if err != nil {
			return err
		}
		env.Scalar(shape+": file size before", UnitBytes, Neither, float64(before))
		env.Scalar(shape+": offline compact, file size after", UnitBytes, Lower, float64(after))
		env.Scalar(shape+": offline compact, time", UnitDuration, Lower, float64(elapsed))
		if err := compactOnline(ctx, env, name, shape, n); err != nil {
			return fmt.Errorf("online compaction (%s): %w", shape, err)
		}
		for _, f := range []string{name, "compacted.db"} {
			if err := env.discardDB(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// buildHalfDeleted grows a file as fragmented does and deletes every other
// key in a random order of transactions, so free pages are spread through
// the whole file; it returns the file's size after the deletes.
func buildHalfDeleted(ctx context.Context, env *Env, name string) (size int64, err error) {
	db, err := env.Open(name)
	if err != nil {
		return 0, err
	}
	n := fragmentedKeys(env.Config.Size)
	if err := load(ctx, db, sequence(int(n)), env.Progress("grow", int64(n))); err != nil {
		_ = db.Close()
		return 0, err
	}
	ids := sequence(int(n))
	env.rng(0xc0).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ids = ids[:n/2]
	p := env.Progress("delete half", int64(len(ids)))
	for start := 0; start < len(ids); start += fragmentedDeleteTxn {
		if err := ctx.Err(); err != nil {
			_ = db.Close()
			return 0, err
		}
		keys := make([][]byte, 0, fragmentedDeleteTxn)
		for _, id := range ids[start:min(start+fragmentedDeleteTxn, len(ids))] {
			keys = append(keys, seqKey(id))
		}
		if err := db.Delete(BucketName, keys); err != nil {
			_ = db.Close()
			return 0, err
		}
		p.Add(int64(len(keys)))
	}
	p.Done()
	if err := db.Close(); err != nil {
		return 0, err
	}
	return fileSize(env.Path(name))
}

// onlineBaseline is how long the reader and writer run without a
// compaction, for the latencies to compare with.
const onlineBaseline = 3 * time.Second

// compactOnline shrinks the file called name in place, if the engine can,
// with a reader and a writer running, and records the figures; the reader
// and writer first run onlineBaseline alone on the same file.
func compactOnline(ctx context.Context, env *Env, name, shape string, n uint64) error {
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	oc, ok := db.(OnlineCompactor)
	if !ok {
		return db.Close()
	}
	closed := false
	defer func() {
		if !closed {
			_ = db.Close()
		}
	}()
	p := env.Progress("online compact ("+shape+"): baseline", 1)
	quiet, err := runTraffic(ctx, env, db, n, func() error {
		select {
		case <-time.After(onlineBaseline):
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	p.Add(1)
	p.Done()
	if err != nil {
		return err
	}
	p = env.Progress("online compact ("+shape+")", 1)
	var released int64
	var elapsed time.Duration
	busy, err := runTraffic(ctx, env, db, n, func() error {
		start := time.Now()
		var err error
		released, err = oc.CompactOnline(ctx)
		elapsed = time.Since(start)
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		return nil
	})
	p.Add(1)
	p.Done()
	if err != nil {
		return err
	}
	inUse, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	closed = true
	if err := db.Close(); err != nil {
		return err
	}
	after, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	pre := shape + ": online compact"
	env.Scalar(pre+", time", UnitDuration, Lower, float64(elapsed))
	env.Scalar(pre+", bytes given back", UnitBytes, Higher, float64(released))
	env.Scalar(pre+", file size right after", UnitBytes, Lower, float64(inUse))
	env.Scalar(pre+", file size after close", UnitBytes, Lower, float64(after))
	env.Latencies(pre+": reader Get, without compaction", quiet.reads)
	env.Latencies(pre+": reader Get, during compaction", busy.reads)
	env.Latencies(pre+": writer commit, without compaction", quiet.commits)
	env.Latencies(pre+": writer commit, during compaction", busy.commits)
	ratio := func(during, without []time.Duration) float64 {
		return Percentile(durationsToFloat(during), 99) / Percentile(durationsToFloat(without), 99)
	}
	env.Scalar(pre+": reader p99, during / without", UnitCount, Lower, ratio(busy.reads, quiet.reads))
	env.Scalar(pre+": writer p99, during / without", UnitCount, Lower, ratio(busy.commits, quiet.commits))
	return nil
}

// traffic is what runTraffic's reader and writer measured.
type traffic struct {
	reads, commits []time.Duration
}

// runTraffic runs a reader (one-key Gets of random keys below n, each in
// its own read transaction) and a writer (one-key durable commits, each
// overwriting one of 1,000 keys) while fn runs, each at least until its
// first sample, and returns their latencies.
func runTraffic(ctx context.Context, env *Env, db DB, n uint64, fn func() error) (traffic, error) {
	var out traffic
	stop := make(chan struct{})
	errs := make(chan error, 2)
	rng := env.rng(0xc1)
	go func() {
		keys := [][]byte{nil}
		for {
			if stopped(stop, len(out.reads)) {
				errs <- nil
				return
			}
			keys[0] = seqKey(rng.Uint64N(n))
			t0 := time.Now()
			if _, err := db.Get(BucketName, keys); err != nil {
				errs <- fmt.Errorf("reader: %w", err)
				return
			}
			out.reads = append(out.reads, time.Since(t0))
		}
	}()
	go func() {
		kv := []KV{{}}
		for i := 0; ; i++ {
			if stopped(stop, len(out.commits)) {
				errs <- nil
				return
			}
			// Overwrites among 1,000 keys: the live data stays what
			// the file held, so its size after compaction compares
			// with the offline copy's.
			kv[0] = KV{Key: fmt.Appendf(nil, "online-%04d", i%1000), Value: value(uint64(i))}
			t0 := time.Now()
			if err := db.Update(BucketName, kv); err != nil {
				errs <- fmt.Errorf("writer: %w", err)
				return
			}
			out.commits = append(out.commits, time.Since(t0))
		}
	}()
	err := fn()
	close(stop)
	for range 2 {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return out, err
}

// stopped reports whether a runTraffic goroutine with samples measured so
// far should stop: once stop is closed, but not before its first sample (a
// tiny file compacts faster than one durable commit).
func stopped(stop <-chan struct{}, samples int) bool {
	if samples == 0 {
		return false
	}
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

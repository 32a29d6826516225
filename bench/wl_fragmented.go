package bench

import (
	"context"
	"fmt"
	"time"
)

// fragmented reproduces buildkit's report (moby/buildkit #6882): a metadata DB that
// once grew large and was then garbage-collected down to a few live keys.
// bbolt rewrites its whole freelist on every commit, so each one-key commit
// on such a file writes megabytes; NoFreelistSync avoids that but makes Open
// rebuild the freelist by scanning. The workload measures both sides of that
// trade: the reopen time and what a one-key commit costs afterwards.
var fragmented = Workload{
	Name:    "fragmented",
	Summary: "grow a DB to --size (as bbolt lays it out), delete all but 100 keys, reopen, then one-key durable commits",
	Run:     runFragmented,
}

const (
	// fragmentedLive is how many keys survive the "garbage collection".
	fragmentedLive = 100
	// fragmentedDeleteTxn is the keys deleted per transaction. It is larger
	// than TxnKeys because the deletion is setup, not a measured phase,
	// and each bbolt commit in it rewrites an ever larger freelist.
	fragmentedDeleteTxn = 10 * TxnKeys
	// fragmentedBytesPerKey is the file bytes bbolt v1.5 spends per pair of
	// this workload when loading in key order with 4 KiB pages (leaves split
	// half full): 256 MiB holds about 916k pairs. Measured, not derived.
	fragmentedBytesPerKey = 293
	// fragmentedOpens is how often the reopen is timed; the first open
	// after the deletion may find a colder page cache than the rest, and the
	// median of several is steadier than any single one.
	fragmentedOpens = 5
)

// fragmentedKeys is the number of pairs that grows bbolt to about size.
func fragmentedKeys(size Size) uint64 {
	return max(uint64(size)/fragmentedBytesPerKey, 10*fragmentedLive)
}

func runFragmented(ctx context.Context, env *Env) error {
	const name = "fragmented.db"
	n, loaded, deleted, err := buildFragmented(ctx, env, name)
	if err != nil {
		return err
	}
	env.Scalar("keys loaded", UnitCount, Neither, float64(n))
	env.Scalar("file size after load", UnitBytes, Neither, float64(loaded))
	env.Scalar("file size after delete", UnitBytes, Lower, float64(deleted))

	var db DB
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()
	// Reopen: the cost NoFreelistSync moves from every commit to Open.
	opens := make([]time.Duration, 0, fragmentedOpens)
	for i := range fragmentedOpens {
		t0 := time.Now()
		d, err := env.Open(name)
		if err != nil {
			return fmt.Errorf("reopen: %w", err)
		}
		opens = append(opens, time.Since(t0))
		if i == fragmentedOpens-1 {
			db = d
		} else if err := d.Close(); err != nil {
			return err
		}
	}
	env.Latencies("open", opens)

	_, err = commitLoop(ctx, env, db, env.Config.Commits, env.Config.Duration, func(i int) []byte {
		return fmt.Appendf(nil, "probe-%08d", i)
	})
	return err
}

// buildFragmented creates the file called name the way the seed report's
// file came to be and closes it: grow with the same N sequential keys for
// every engine, in TxnKeys-key transactions, then delete all but
// fragmentedLive of them. N is chosen so that bbolt, the reference, ends
// with a file of about --size; giving every engine the same history (rather
// than growing each to the same file size) keeps the comparison about what a
// commit costs after the same garbage collection, whatever each engine's
// file growth and preallocation policy is. It returns N and the file sizes
// after the load and after the deletes.
func buildFragmented(ctx context.Context, env *Env, name string) (n uint64, loaded, deleted int64, err error) {
	path := env.Path(name)
	db, err := env.Open(name)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			deleted, err = fileSize(path)
		}
	}()
	n = fragmentedKeys(env.Config.Size)
	if err := load(ctx, db, sequence(int(n)), env.Progress("grow", int64(n))); err != nil {
		return 0, 0, 0, err
	}
	if loaded, err = fileSize(path); err != nil {
		return 0, 0, 0, err
	}
	// "Garbage-collect": delete all but fragmentedLive keys.
	if err := deleteAllBut(ctx, db, n, env.Progress("delete", int64(n))); err != nil {
		return 0, 0, 0, err
	}
	return n, loaded, 0, nil
}

// deleteAllBut deletes keys 0..n-1 except fragmentedLive of them, spread
// evenly over the key space so the survivors sit all over the old file.
func deleteAllBut(ctx context.Context, db DB, n uint64, p Progress) error {
	defer p.Done()
	stride := max(n/fragmentedLive, 1)
	dels := make([][]byte, 0, fragmentedDeleteTxn)
	for i := uint64(0); i < n; i++ {
		if i%stride != 0 {
			dels = append(dels, seqKey(i))
		}
		if len(dels) == fragmentedDeleteTxn || (i == n-1 && len(dels) > 0) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := db.Delete(BucketName, dels); err != nil {
				return err
			}
			p.Add(int64(len(dels)))
			dels = dels[:0]
		}
	}
	return nil
}

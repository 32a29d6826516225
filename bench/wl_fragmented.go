package bench

import (
	"context"
	"fmt"
	"time"
)

// fragmented reproduces the buildkit report (seed 000): a metadata DB that
// once grew large and was then garbage-collected down to a few live keys.
// bbolt rewrites its whole freelist on every commit, so each one-key commit
// on such a file writes megabytes; NoFreelistSync avoids that but makes Open
// rebuild the freelist by scanning. The workload measures both sides of that
// trade: the reopen time and what a one-key commit costs afterwards.
var fragmented = Workload{
	Name:    "fragmented",
	Summary: "grow a DB to --size, delete all but 100 keys, reopen, then one-key durable commits",
	Run:     runFragmented,
}

const (
	// fragmentedLive is how many keys survive the "garbage collection".
	fragmentedLive = 100
	// fragmentedDeleteTxn is the keys deleted per transaction. It is larger
	// than TxnKeys because the deletion is setup, not a measured phase,
	// and each bbolt commit in it rewrites an ever larger freelist.
	fragmentedDeleteTxn = 10 * TxnKeys
	// fragmentedOpens is how often the reopen is timed; the first open
	// after the deletion may find a colder page cache than the rest, and the
	// median of several is steadier than any single one.
	fragmentedOpens = 5
)

func runFragmented(ctx context.Context, env *Env) error {
	const name = "fragmented.db"
	path := env.Path(name)
	target := int64(env.Config.Size)
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()

	// Grow: sequential keys in TxnKeys-key transactions until the file
	// reaches the target size, as the engine itself lays it out. The key
	// cap (the raw bytes of keys and values alone filling the target) ends
	// the loop for an engine whose file grows differently, say one that
	// preallocates; "keys loaded" then shows the difference.
	maxKeys := uint64(target/(KeySize+ValueSize)) + TxnKeys
	p := env.Progress("grow", target)
	var n uint64
	var size int64
	batch := make([]KV, 0, TxnKeys)
	for size < target && n < maxKeys {
		if err := ctx.Err(); err != nil {
			p.Done()
			return err
		}
		batch = batch[:0]
		for range TxnKeys {
			batch = append(batch, KV{Key: seqKey(n), Value: value(n)})
			n++
		}
		if err := db.Update(BucketName, batch); err != nil {
			p.Done()
			return err
		}
		s, err := fileSize(path)
		if err != nil {
			p.Done()
			return err
		}
		p.Add(s - size)
		size = s
	}
	p.Done()
	peak := size

	// "Garbage-collect": delete all but fragmentedLive keys, spread evenly
	// over the key space so the survivors sit all over the old file.
	stride := max(n/fragmentedLive, 1)
	p = env.Progress("delete", int64(n))
	var dels [][]byte
	for i := uint64(0); i < n; i++ {
		if i%stride != 0 {
			dels = append(dels, seqKey(i))
		}
		if len(dels) == fragmentedDeleteTxn || (i == n-1 && len(dels) > 0) {
			if err := ctx.Err(); err != nil {
				p.Done()
				return err
			}
			if err := db.Delete(BucketName, dels); err != nil {
				p.Done()
				return err
			}
			p.Add(int64(len(dels)))
			dels = dels[:0]
		}
	}
	p.Done()
	err = db.Close()
	db = nil
	if err != nil {
		return err
	}
	if size, err = fileSize(path); err != nil {
		return err
	}
	env.Scalar("keys loaded", UnitCount, Neither, float64(n))
	env.Scalar("peak file size", UnitBytes, Neither, float64(peak))
	env.Scalar("file size after delete", UnitBytes, Lower, float64(size))

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

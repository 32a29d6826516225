package bench

import (
	"context"
	"strings"
	"time"
)

// bulkLoad measures filling a DB with keys in ascending and in random
// order, once in TxnKeys-key transactions and once in a single transaction.
// Random order is the B+tree's hard case (every transaction dirties pages
// all over the tree) and the file size it ends with shows how well pages are
// packed after splits. The single transaction is the import case: one commit
// at the end, so it measures the tree building and the final write, not
// per-commit flushes.
var bulkLoad = Workload{
	Name:    "bulk-load",
	Summary: "--keys keys (16-byte keys, 100-byte values), sequential and random order, in 1000-key txns; and --one-txn-keys keys in one txn",
	Run:     runBulkLoad,
}

func runBulkLoad(ctx context.Context, env *Env) error {
	n := env.Config.Keys
	seq := sequence(n)
	rnd := sequence(n)
	env.rng(0xb1).Shuffle(len(rnd), func(i, j int) { rnd[i], rnd[j] = rnd[j], rnd[i] })
	n1 := env.Config.OneTxnKeys
	if n1 == 0 {
		n1 = n
	}
	seq1 := sequence(n1)
	rnd1 := sequence(n1)
	env.rng(0xb2).Shuffle(len(rnd1), func(i, j int) { rnd1[i], rnd1[j] = rnd1[j], rnd1[i] })
	env.Scalar("one-txn keys", UnitCount, Neither, float64(n1))
	for _, c := range []struct {
		name   string
		ids    []uint64
		oneTxn bool
	}{
		{"sequential", seq, false},
		{"random", rnd, false},
		{"sequential one-txn", seq1, true},
		{"random one-txn", rnd1, true},
	} {
		file := strings.ReplaceAll(c.name, " ", "-") + ".db"
		db, err := env.Open(file)
		if err != nil {
			return err
		}
		var kvs []KV
		if c.oneTxn {
			// Built before the clock starts: the pairs are the input, as
			// they would be for an import.
			kvs = make([]KV, len(c.ids))
			for i, id := range c.ids {
				kvs[i] = KV{Key: seqKey(id), Value: value(id)}
			}
		}
		start := time.Now()
		if c.oneTxn {
			p := env.Progress(c.name+" load", int64(len(kvs)))
			err = db.Update(BucketName, kvs)
			if err == nil {
				p.Add(int64(len(kvs)))
			}
			p.Done()
		} else {
			err = load(ctx, db, c.ids, env.Progress(c.name+" load", int64(n)))
		}
		elapsed := time.Since(start)
		kvs = nil
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		size, err := fileSize(env.Path(file))
		if err != nil {
			return err
		}
		env.Scalar(c.name+" keys/s", UnitRate, Higher, float64(len(c.ids))/elapsed.Seconds())
		env.Scalar(c.name+" time", UnitDuration, Lower, float64(elapsed))
		env.Scalar(c.name+" file size", UnitBytes, Lower, float64(size))
		// The files are not needed afterwards; at 10M keys four of them
		// would take several GiB.
		if err := env.discardDB(file); err != nil {
			return err
		}
	}
	return nil
}

package bench

import (
	"context"
	"time"
)

// bulkLoad measures filling a DB in TxnKeys-key transactions, with keys in
// ascending and in random order. Random order is the B+tree's hard case
// (every transaction dirties pages all over the tree) and the file size it
// ends with shows how well pages are packed after splits.
var bulkLoad = Workload{
	Name:    "bulk-load",
	Summary: "--keys keys (16-byte keys, 100-byte values) in 1000-key txns, sequential and random order",
	Run:     runBulkLoad,
}

func runBulkLoad(ctx context.Context, env *Env) error {
	n := env.Config.Keys
	seq := sequence(n)
	rnd := sequence(n)
	env.rng(0xb1).Shuffle(len(rnd), func(i, j int) { rnd[i], rnd[j] = rnd[j], rnd[i] })
	for _, order := range []struct {
		name string
		ids  []uint64
	}{{"sequential", seq}, {"random", rnd}} {
		file := order.name + ".db"
		db, err := env.Open(file)
		if err != nil {
			return err
		}
		start := time.Now()
		err = load(ctx, db, order.ids, env.Progress(order.name+" load", int64(n)))
		elapsed := time.Since(start)
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
		env.Scalar(order.name+" keys/s", UnitRate, Higher, float64(n)/elapsed.Seconds())
		env.Scalar(order.name+" time", UnitDuration, Lower, float64(elapsed))
		env.Scalar(order.name+" file size", UnitBytes, Lower, float64(size))
	}
	return nil
}

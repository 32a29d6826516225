package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"time"
)

// shortTxns measures the fixed cost of a read transaction: an empty View,
// a View with one Get, and a View with one cursor First or Last. A raft log
// store pays the last two on every append and election (FirstIndex,
// LastIndex), and a small lookup in any program is mostly this cost.
var shortTxns = Workload{
	Name:    "short-txns",
	Summary: "--reads read transactions of each shape on a 10,000-key bucket: empty View, View + Get, View + cursor First, View + cursor Last; time and allocations per transaction",
	Run:     runShortTxns,
}

// ShortTxner is implemented by engines whose adapter can run the short
// transaction shapes (rivet and bbolt).
type ShortTxner interface {
	ShortTxns(shape string, bucket, key []byte, n int) error
}

func runShortTxns(ctx context.Context, env *Env) error {
	db, err := env.Open("short.db")
	if err != nil {
		return err
	}
	defer db.Close()
	st, ok := db.(ShortTxner)
	if !ok {
		return fmt.Errorf("engine %s cannot run short transactions", env.Engine.Name())
	}
	const keys = 10_000
	kvs := make([]KV, keys)
	for i := range kvs {
		k := make([]byte, 8)
		binary.BigEndian.PutUint64(k, uint64(i))
		kvs[i] = KV{Key: k, Value: make([]byte, 100)}
	}
	if err := db.Update(BucketName, kvs); err != nil {
		return err
	}
	probe := kvs[keys/2].Key
	n := env.Config.Reads
	for _, shape := range []string{ShortEmpty, ShortGet, ShortFirst, ShortLast} {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Warm up: the first transactions fault the pages in and size the
		// engine's pools.
		if err := st.ShortTxns(shape, BucketName, probe, min(n, 1000)); err != nil {
			return err
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		if err := st.ShortTxns(shape, BucketName, probe, n); err != nil {
			return err
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		env.Scalar(shape+": time", UnitDuration, Lower, float64(elapsed)/float64(n))
		env.Scalar(shape+": allocs", UnitCount, Lower, float64(after.Mallocs-before.Mallocs)/float64(n))
		env.Scalar(shape+": bytes allocated", UnitBytes, Lower, float64(after.TotalAlloc-before.TotalAlloc)/float64(n))
	}
	return nil
}

package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// space measures what real bbolt users' data costs on disk: each shape is
// loaded into a fresh file with default options and the file closed; the
// figures are the file's size (what stat reports) and the load time. The
// shapes are users' data shapes, at their sizes when --keys is 100,000
// (the demo preset) and scaled with --keys otherwise; "small service" is
// always 4,000 values.
var space = Workload{
	Name:    "space",
	Summary: "file size and load time of users' data shapes: many small nested buckets, mid-size values in order and at random, small values, a small file",
	Run:     runSpace,
}

// spaceShape is one data shape of the space workload.
type spaceShape struct {
	name string
	// n values (or buckets) of size bytes, perTx per transaction.
	n, size, perTx int
	random         bool
	// buckets: n nested buckets under one parent, each with two small keys.
	buckets bool
}

// spaceShapes returns the shapes at scale keys/100,000.
func spaceShapes(keys int) []spaceShape {
	scale := func(n int) int { return max(100, n*keys/100_000) }
	return []spaceShape{
		{name: "small buckets", n: scale(100_000), perTx: 1_000, buckets: true},
		{name: "1000 B in order", n: scale(100_000), size: 1_000, perTx: 500},
		{name: "1500 B random", n: scale(40_000), size: 1_500, perTx: 500, random: true},
		{name: "5000 B random", n: scale(12_000), size: 5_000, perTx: 500, random: true},
		{name: "100 B random", n: scale(300_000), size: 100, perTx: 1_000, random: true},
		{name: "small service", n: 4_000, size: 100, perTx: 100, random: true},
	}
}

// spaceKey returns the i-th key of a shape: 16 bytes, in i's order unless
// random, where the first 8 bytes are mixed from i.
func spaceKey(i int, random bool) []byte {
	k := make([]byte, 16)
	x := uint64(i)
	if random {
		x = mix(x)
	}
	binary.BigEndian.PutUint64(k, x)
	binary.BigEndian.PutUint64(k[8:], uint64(i))
	return k
}

// spaceValue returns a size-byte value for the i-th key (a window into the
// shared random pool, so nothing compresses).
func spaceValue(i, size int) []byte {
	off := int(mix(uint64(i)^0x51ace) % uint64(len(valuePool)-size))
	return valuePool[off : off+size : off+size]
}

func runSpace(ctx context.Context, env *Env) error {
	for _, s := range spaceShapes(env.Config.Keys) {
		file := "space.db"
		db, err := env.Open(file)
		if err != nil {
			return err
		}
		nested, ok := db.(NestedUpdater)
		if s.buckets && !ok {
			// LMDB has no nested buckets: nothing to measure.
			if err := db.Close(); err != nil {
				return err
			}
			if err := env.discardDB(file); err != nil {
				return err
			}
			continue
		}
		p := env.Progress("space: "+s.name, int64(s.n))
		start := time.Now()
		for i := 0; i < s.n && err == nil; i += s.perTx {
			if err = ctx.Err(); err != nil {
				break
			}
			end := min(i+s.perTx, s.n)
			if s.buckets {
				batches := make([]BucketKVs, 0, end-i)
				for j := i; j < end; j++ {
					batches = append(batches, BucketKVs{
						Bucket: spaceKey(j, false),
						KVs: []KV{
							{Key: []byte("size"), Value: []byte(fmt.Sprintf("%08d", j))},
							{Key: []byte("parent"), Value: spaceKey(j/10, false)},
						},
					})
				}
				err = nested.UpdateNested([]byte("space"), batches)
			} else {
				kvs := make([]KV, 0, end-i)
				for j := i; j < end; j++ {
					kvs = append(kvs, KV{Key: spaceKey(j, s.random), Value: spaceValue(j, s.size)})
				}
				err = db.Update(BucketName, kvs)
			}
			p.Add(int64(end - i))
		}
		elapsed := time.Since(start)
		p.Done()
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("space %s: %w", s.name, err)
		}
		size, err := fileSize(env.Path(file))
		if err != nil {
			return err
		}
		env.Scalar(s.name+" file size", UnitBytes, Lower, float64(size))
		env.Scalar(s.name+" load time", UnitDuration, Lower, float64(elapsed))
		if err := env.discardDB(file); err != nil {
			return err
		}
	}
	return nil
}

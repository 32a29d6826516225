package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"
)

// Workload is a named measurement. Run drives env.Engine in env.Dir and
// records figures through env; it must return promptly once ctx is done.
type Workload struct {
	Name string
	// Summary is one line for --help and listings.
	Summary string
	Run     func(ctx context.Context, env *Env) error
	// OnlyWhenNamed keeps the workload out of runs that name no
	// workloads: it needs much memory or mostly waits out a deadline.
	OnlyWhenNamed bool
}

// Workloads returns every workload in the order a full run executes them.
// A new workload is a file defining a Workload value plus one line here.
func Workloads() []Workload {
	return []Workload{fragmented, durableWrites, bulkLoad, randomReads,
		openScaling, updateLocality, batchSlasher, memory, concurrentDurable, modeLatency, space, compaction, shortTxns,
		largeValueWorkload, readersUnderWriter, longRead, hostileCheck, compactionScale}
}

// WorkloadNames returns the names of Workloads().
func WorkloadNames() []string {
	var names []string
	for _, w := range Workloads() {
		names = append(names, w.Name)
	}
	return names
}

// OnlyWhenNamedWorkloads returns the names of the workloads that run only
// when named.
func OnlyWhenNamedWorkloads() []string {
	var names []string
	for _, w := range Workloads() {
		if w.OnlyWhenNamed {
			names = append(names, w.Name)
		}
	}
	return names
}

// Shapes shared by the workloads, fixed by the benchmark brief so results
// stay comparable across versions.
const (
	// TxnKeys is the number of keys of a loading transaction.
	TxnKeys = 1000
	// KeySize and ValueSize are the sizes of generated keys and values.
	KeySize   = 16
	ValueSize = 100
)

// seqKey returns the i-th key of a sorted key space: i big-endian, then 8
// bytes mixed from i, so keys sort by i without being mostly zero bytes.
func seqKey(i uint64) []byte {
	k := make([]byte, KeySize)
	binary.BigEndian.PutUint64(k, i)
	binary.BigEndian.PutUint64(k[8:], mix(i))
	return k
}

// mix is SplitMix64's finaliser: a cheap bijection that spreads bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// valuePool backs every generated value. Values are windows into one
// random buffer: no allocation per value, and no run of zero bytes that a
// file system with compression would make unrealistically cheap to write.
var valuePool = func() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// value returns the ValueSize-byte value stored under the i-th key.
func value(i uint64) []byte {
	off := mix(i^0x5bd1e995) % uint64(len(valuePool)-ValueSize)
	return valuePool[off : off+ValueSize : off+ValueSize]
}

// rng returns the random source of a run. Seeding with the run number
// gives every engine the same sequence within a run and different ones
// across runs.
func (e *Env) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(e.Run)+1, stream))
}

// load writes the keys ids[i] (with their values) in TxnKeys-key
// transactions, reporting progress in keys.
func load(ctx context.Context, db DB, ids []uint64, p Progress) error {
	defer p.Done()
	batch := make([]KV, 0, TxnKeys)
	for start := 0; start < len(ids); start += TxnKeys {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch = batch[:0]
		for _, id := range ids[start:min(start+TxnKeys, len(ids))] {
			batch = append(batch, KV{Key: seqKey(id), Value: value(id)})
		}
		if err := db.Update(BucketName, batch); err != nil {
			return err
		}
		p.Add(int64(len(batch)))
	}
	return nil
}

// sequence returns 0..n-1.
func sequence(n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	return ids
}

// fileSize returns the size of the file at path.
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// commitLoop makes up to n one-key durable commits, stopping early after
// maxDur, and records what they cost: latency, rate, bytes handed to the
// kernel and sent to storage per commit (/proc/self/io), and the engine's own
// counters per commit. key(i) gives the i-th commit's key. It returns the
// time the commits took.
func commitLoop(ctx context.Context, env *Env, db DB, n int, maxDur time.Duration, key func(i int) []byte) (time.Duration, error) {
	p := env.Progress("one-key commits", int64(n))
	defer p.Done()
	lat := make([]time.Duration, 0, n)
	io0, ioOK := ReadProcIO()
	c0 := db.Counters()
	start := time.Now()
	kv := []KV{{}}
	for i := 0; i < n && time.Since(start) < maxDur; i++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		kv[0] = KV{Key: key(i), Value: value(uint64(i))}
		t0 := time.Now()
		if err := db.Update(BucketName, kv); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t0))
		p.Add(1)
	}
	elapsed := time.Since(start)
	io1, _ := ReadProcIO()
	dc := db.Counters().Sub(c0)
	commits := float64(len(lat))
	if commits == 0 {
		return 0, fmt.Errorf("no commit finished within %s", maxDur)
	}

	env.Latencies("commit latency", lat)
	env.Scalar("commits/s", UnitRate, Higher, commits/elapsed.Seconds())
	env.Scalar("commits", UnitCount, Neither, commits)
	if ioOK {
		d := io1.Sub(io0)
		env.Scalar("wchar/commit", UnitBytes, Lower, float64(d.Wchar)/commits)
		env.Scalar("write_bytes/commit", UnitBytes, Lower, float64(d.WriteBytes)/commits)
	}
	names := make([]string, 0, len(dc))
	for name := range dc {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		u := UnitCount
		if name == CtrBytesWritten {
			u = UnitBytes
		}
		env.Scalar("engine "+name+"/commit", u, Lower, float64(dc[name])/commits)
	}
	return elapsed, nil
}

// discardDB removes the database file name, which a workload no longer
// needs, and the lock file some engines keep next to it (LMDB's "-lock").
// With Config.Keep it is renamed instead (name.1, name.2, ...), which frees
// the name for the workload's next use as removal would.
func (e *Env) discardDB(name string) error {
	path := e.Path(name)
	if !e.Config.Keep {
		return removeDB(path)
	}
	for i := 1; ; i++ {
		kept := fmt.Sprintf("%s.%d", path, i)
		if _, err := os.Stat(kept); os.IsNotExist(err) {
			return os.Rename(path, kept)
		}
	}
}

// removeDB removes a database file and the lock file some engines keep
// next to it (LMDB's "-lock").
func removeDB(path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	if err := os.Remove(path + "-lock"); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

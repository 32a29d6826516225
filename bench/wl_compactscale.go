package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// compactionScale measures giving space back at etcd's scale, etcd being
// bbolt's largest user. etcd keeps every revision of every key in bucket
// "key" (17-byte keys: the main revision, '_', the sub revision, so new
// revisions append at the end), records its consistent index in bucket
// "meta" in every transaction, batches up to 10,000 puts per bbolt
// transaction, and compacts its history by deleting the oldest revisions,
// 10,000 per transaction. The file keeps its size; etcd then defragments
// by copying every bucket into a new file, 10,000 keys per transaction,
// while the member can neither read nor write (etcd #9222, #20952).
//
// The workload grows a file so to about --size, deletes the oldest half of
// the revisions, then runs one writer (one-revision durable commits) and
// one reader (Gets of random live revisions) for --duration. Engines that
// compact online (rivet's DB.Compact) then compact with the same writer
// and reader running; bbolt defragments as etcd does, with both stopped:
// its commits and Gets per second during the defragmentation are 0, and
// the one commit and Get that would wait for it take its wall time. After
// that: the file's size over the bytes of its keys and values, right after
// compaction and after a close and reopen; and a cold restart: the page
// cache dropped (root only), Open, and one cursor pass reading every value
// of bucket "key", with the process's major page faults.
var compactionScale = Workload{
	Name:          "compaction-scale",
	Summary:       "etcd's shape at --size (revision keys, 512 B–8 KiB values, 10,000 puts per txn, oldest half deleted): a writer and a reader for --duration, then rivet's online Compact under them vs bbolt's etcd-style defrag (both stopped); file ÷ live bytes, cold Open and pass (drops the page cache as root)",
	Run:           runCompactionScale,
	OnlyWhenNamed: true,
}

// The etcd shape.
const (
	// etcdTxnOps is the puts of a loading transaction and the deletes of
	// a compaction transaction (etcd's batch limit and compaction batch),
	// and the keys per transaction of bbolt's defragmentation copy (etcd's
	// defragLimit).
	etcdTxnOps = 10_000
	// etcdRevKeySize is a revision key: 8-byte main revision, '_', 8-byte
	// sub revision.
	etcdRevKeySize = 17
	// Values are 512 B to 8 KiB, uniformly.
	etcdValueMin = 512
	etcdValueMax = 8 << 10
	// etcdBytesPerRev is the file bytes bbolt v1.5 spends per revision of
	// this shape when loading it (default options, 4 KiB pages): the
	// revision count is --size divided by it, the same for every engine,
	// so that engines share one history. Measured, not derived.
	etcdBytesPerRev = 5_600
	// etcdMinRevisions keeps a tiny --size meaningful.
	etcdMinRevisions = 1_000
)

// Buckets and the meta key of the etcd shape.
var (
	etcdKeyBucket       = []byte("key")
	etcdMetaBucket      = []byte("meta")
	etcdConsistentIndex = []byte("consistent_index")
)

// etcdRevisions returns how many revisions the workload loads for a file
// of about size bytes, at least etcdMinRevisions.
func etcdRevisions(size Size) uint64 {
	return max(uint64(size)/etcdBytesPerRev, etcdMinRevisions)
}

// etcdRevKey returns the key of revision main/sub.
func etcdRevKey(dst []byte, main, sub uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], main)
	dst = append(dst, '_')
	return binary.BigEndian.AppendUint64(dst, sub)
}

// etcdKeyspace is the content of bucket "key" as the workload wrote it:
// one put per main revision (sub revision 0), as etcd's one-key Put
// requests make, with revisions first..last live. It knows every value,
// so the workload can check what the engines read back without keeping
// any key in memory.
type etcdKeyspace struct {
	seed  uint64
	first uint64        // oldest live revision
	last  atomic.Uint64 // newest committed revision
}

// value returns the value of revision rev: 512 B to 8 KiB, a window of
// the value pool, both chosen by rev and the run's seed.
func (ks *etcdKeyspace) value(rev uint64) []byte {
	off, n := ks.window(rev)
	return valuePool[off : off+n : off+n]
}

// window returns where the value of rev starts in the value pool and its
// length.
func (ks *etcdKeyspace) window(rev uint64) (off, n uint64) {
	x := mix(rev ^ ks.seed)
	n = etcdValueMin + x%(etcdValueMax-etcdValueMin+1)
	off = mix(x^0x0ff5e7) % (uint64(len(valuePool)) - n + 1)
	return off, n
}

// valuePoolPrefix[i] is the sum of the first i bytes of the value pool, so
// the sum of any value's bytes costs two lookups.
var valuePoolPrefix = sync.OnceValue(func() []uint64 {
	p := make([]uint64, len(valuePool)+1)
	for i, b := range valuePool {
		p[i+1] = p[i] + uint64(b)
	}
	return p
})

// expected returns the live revisions, the sum of their value bytes, and
// the live bytes of the whole database (keys and values of bucket "key"
// and the meta key).
func (ks *etcdKeyspace) expected() (revs int64, valueSum uint64, live int64) {
	prefix := valuePoolPrefix()
	for rev := ks.first; rev <= ks.last.Load(); rev++ {
		off, n := ks.window(rev)
		valueSum += prefix[off+n] - prefix[off]
		live += int64(etcdRevKeySize + n)
		revs++
	}
	return revs, valueSum, live + int64(len(etcdConsistentIndex)) + 8
}

// metaPut is the meta bucket's part of a transaction that ends at
// revision rev: etcd records its consistent index in every transaction.
func metaPut(rev uint64) BucketKVs {
	return BucketKVs{Bucket: etcdMetaBucket, KVs: []KV{{Key: etcdConsistentIndex, Value: binary.BigEndian.AppendUint64(nil, rev)}}}
}

func runCompactionScale(ctx context.Context, env *Env) error {
	const name = "etcd.db"
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()
	mixed, okMixed := db.(MixedUpdater)
	_, okOnline := db.(OnlineCompactor)
	defragger, okDefrag := env.Engine.(EtcdDefragmenter)
	if !okMixed || (!okOnline && !okDefrag) {
		env.Note("skipped: the engine has neither online compaction nor etcd's defragmentation in this harness")
		return nil
	}

	ks := &etcdKeyspace{seed: mix(uint64(env.Run) + 0xe7cd)}
	n := etcdRevisions(env.Config.Size)
	start := time.Now()
	if err := loadRevisions(ctx, env, db, ks, n); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	env.Scalar("revisions loaded", UnitCount, Neither, float64(n))
	env.Scalar("build time", UnitDuration, Lower, float64(time.Since(start)))
	if err := recordFileSize(env, name, "file size after build", Neither); err != nil {
		return err
	}
	start = time.Now()
	if err := deleteOldestHalf(ctx, env, mixed, ks); err != nil {
		return fmt.Errorf("deleting the oldest half: %w", err)
	}
	env.Scalar("delete time (oldest half)", UnitDuration, Lower, float64(time.Since(start)))
	if err := recordFileSize(env, name, "file size after deletes", Neither); err != nil {
		return err
	}

	// Before: the writer and the reader alone.
	p := env.Progress("writer and reader", int64(env.Config.Duration/time.Millisecond))
	before, err := etcdTraffic(ctx, env, db, ks, func() error {
		select {
		case <-time.After(env.Config.Duration):
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	p.Add(int64(before.elapsed / time.Millisecond))
	p.Done()
	if err != nil {
		return fmt.Errorf("before compaction: %w", err)
	}
	before.record(env, "before")

	// Compaction.
	var during etcdLoad
	var wall time.Duration
	var steps, pages int64
	var rightAfter int64
	p = env.Progress("compaction", 1)
	if okOnline {
		during, wall, steps, pages, rightAfter, err = compactUnderTraffic(ctx, env, name, db, ks)
	} else {
		start := time.Now()
		steal := startStealMeter()
		var st DefragStats
		var fresh DB
		fresh, st, err = defragger.DefragEtcd(db, etcdTxnOps)
		wall = time.Since(start)
		db = fresh
		steps, pages = st.Txns, st.PagesWritten
		if err == nil {
			rightAfter, err = fileSize(env.Path(name))
		}
		// etcd holds its batch transaction's and read transaction's locks
		// for the whole defragmentation: the writer's next commit and the
		// reader's next Get each wait for all of it.
		during = blockedLoad(wall)
		steal.stop(&during)
		env.Note("writer and reader are stopped during the defragmentation, as in etcd: their rates during it are 0, and the one commit and Get that wait for it take its wall time")
	}
	p.Add(1)
	p.Done()
	if err != nil {
		return fmt.Errorf("compaction: %w", err)
	}
	env.Scalar("compaction wall time", UnitDuration, Lower, float64(wall))
	during.record(env, "during (bbolt: stopped)")
	if during.stolen > 0 {
		env.Note(fmt.Sprintf("the hypervisor took %v of CPU time from this machine during compaction (steal): it stops every virtual CPU, the reader's and writer's included, for as long as it takes them, so their longest waits may be the machine's, not the engine's", during.stolen))
	}
	ratio := func(figure string, b Better, d, x float64) {
		env.Scalar(figure+", during ÷ before", UnitCount, b, d/x)
	}
	ratio("writer commits/s", Higher, during.commitRate(), before.commitRate())
	ratio("writer commit p99", Lower, during.commits.percentile(99), before.commits.percentile(99))
	ratio("reader Gets/s", Higher, during.readRate(), before.readRate())
	ratio("reader Get p99", Lower, during.reads.percentile(99), before.reads.percentile(99))
	env.Scalar("pages moved (rivet: CompactPagesRewritten; bbolt: pages of the copy)", UnitCount, Lower, float64(pages))
	env.Scalar("compaction transactions (rivet: CompactSteps; bbolt: copy commits)", UnitCount, Neither, float64(steps))

	// After: the file against the bytes it holds, counted on the reopened
	// file once the writer has stopped.
	err = db.Close()
	db = nil
	if err != nil {
		return err
	}
	fresh, err := env.Open(name)
	if err != nil {
		return err
	}
	db = fresh
	reopened, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	counter, ok := db.(SpaceCounter)
	if !ok {
		return fmt.Errorf("%s cannot count its live bytes", env.Engine.Name())
	}
	live, err := counter.LiveBytes()
	if err != nil {
		return err
	}
	revs, valueSum, wantLive := ks.expected()
	if live != wantLive {
		return fmt.Errorf("the database holds %d bytes of keys and values, want %d", live, wantLive)
	}
	env.Scalar("live bytes at end", UnitBytes, Neither, float64(live))
	env.Scalar("live revisions at end", UnitCount, Neither, float64(revs))
	env.Scalar("file size right after compaction", UnitBytes, Lower, float64(rightAfter))
	env.Scalar("file ÷ live, right after compaction", UnitCount, Lower, float64(rightAfter)/float64(live))
	env.Scalar("file size after close + reopen", UnitBytes, Lower, float64(reopened))
	env.Scalar("file ÷ live, after close + reopen", UnitCount, Lower, float64(reopened)/float64(live))

	err = db.Close()
	db = nil
	if err != nil {
		return err
	}
	if err := coldPass(env, name, revs, valueSum); err != nil {
		return err
	}
	return env.discardDB(name)
}

// recordFileSize records the size of the file called name.
func recordFileSize(env *Env, name, figure string, b Better) error {
	size, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar(figure, UnitBytes, b, float64(size))
	return nil
}

// loadRevisions appends revisions 1..n to bucket "key", etcdTxnOps per
// transaction, each transaction also putting the meta key.
func loadRevisions(ctx context.Context, env *Env, db DB, ks *etcdKeyspace, n uint64) error {
	p := env.Progress("build", int64(n))
	defer p.Done()
	kvs := make([]KV, 0, etcdTxnOps)
	keys := make([]byte, etcdTxnOps*etcdRevKeySize)
	for first := uint64(1); first <= n; first += etcdTxnOps {
		if err := ctx.Err(); err != nil {
			return err
		}
		last := min(first+etcdTxnOps-1, n)
		kvs = kvs[:0]
		for rev := first; rev <= last; rev++ {
			i := int(rev-first) * etcdRevKeySize
			kvs = append(kvs, KV{Key: etcdRevKey(keys[i:i:i+etcdRevKeySize], rev, 0), Value: ks.value(rev)})
		}
		if err := db.UpdateBuckets([]BucketKVs{{Bucket: etcdKeyBucket, KVs: kvs}, metaPut(last)}); err != nil {
			return err
		}
		ks.last.Store(last)
		p.Add(int64(len(kvs)))
	}
	ks.first = 1
	return nil
}

// deleteOldestHalf deletes the oldest half of the live revisions,
// etcdTxnOps per transaction, each transaction also putting the meta key,
// as etcd's compaction does.
func deleteOldestHalf(ctx context.Context, env *Env, db MixedUpdater, ks *etcdKeyspace) error {
	last := ks.last.Load()
	end := ks.first + (last-ks.first+1)/2 // first revision kept
	p := env.Progress("delete the oldest half", int64(end-ks.first))
	defer p.Done()
	keys := make([][]byte, 0, etcdTxnOps)
	buf := make([]byte, etcdTxnOps*etcdRevKeySize)
	for first := ks.first; first < end; first += etcdTxnOps {
		if err := ctx.Err(); err != nil {
			return err
		}
		keys = keys[:0]
		for rev := first; rev < min(first+etcdTxnOps, end); rev++ {
			i := int(rev-first) * etcdRevKeySize
			keys = append(keys, etcdRevKey(buf[i:i:i+etcdRevKeySize], rev, 0))
		}
		if err := db.UpdateMixed([]BucketDeletes{{Bucket: etcdKeyBucket, Keys: keys}}, []BucketKVs{metaPut(last)}); err != nil {
			return err
		}
		p.Add(int64(len(keys)))
	}
	ks.first = end
	return nil
}

// etcdLoad is what etcdTraffic's writer and reader did.
type etcdLoad struct {
	commits, reads latencyHist
	elapsed        time.Duration
	// stopped marks the load of a defragmentation: the writer and reader
	// made nothing during it, and their one sample each is the wait for
	// all of it.
	stopped bool
	// stolen is the CPU time the hypervisor took from the machine while
	// the load ran (stolenCPU); stolenKnown is false where that is not
	// reported.
	stolen      time.Duration
	stolenKnown bool
}

// stealMeter measures the CPU time the hypervisor takes between its start
// and the call of stop.
type stealMeter struct {
	start time.Duration
	ok    bool
}

func startStealMeter() stealMeter {
	s, ok := stolenCPU()
	return stealMeter{start: s, ok: ok}
}

// stop stores what was stolen since start in l.
func (m stealMeter) stop(l *etcdLoad) {
	end, ok := stolenCPU()
	if !m.ok || !ok {
		return
	}
	l.stolen, l.stolenKnown = max(end-m.start, 0), true
}

// blockedLoad returns the load of writer and reader that wait for all of
// a defragmentation that took wall.
func blockedLoad(wall time.Duration) etcdLoad {
	l := etcdLoad{elapsed: wall, stopped: true}
	l.commits.add(wall)
	l.reads.add(wall)
	return l
}

// done returns how many operations of h were made during the load.
func (l *etcdLoad) done(h *latencyHist) uint64 {
	if l.stopped {
		return 0
	}
	return h.count()
}

func (l *etcdLoad) commitRate() float64 { return float64(l.done(&l.commits)) / l.elapsed.Seconds() }
func (l *etcdLoad) readRate() float64   { return float64(l.done(&l.reads)) / l.elapsed.Seconds() }

// record records the load's rates, counts and latency tails under prefix.
func (l *etcdLoad) record(env *Env, prefix string) {
	env.Scalar(prefix+": writer commits/s", UnitRate, Higher, l.commitRate())
	env.Scalar(prefix+": writer commits", UnitCount, Neither, float64(l.done(&l.commits)))
	l.commits.record(env, prefix+": writer commit")
	env.Scalar(prefix+": reader Gets/s", UnitRate, Higher, l.readRate())
	env.Scalar(prefix+": reader Gets", UnitCount, Neither, float64(l.done(&l.reads)))
	l.reads.record(env, prefix+": reader Get")
	if l.stolenKnown {
		env.Scalar(prefix+": CPU time stolen by the hypervisor (all CPUs)", UnitDuration, Neither, float64(l.stolen))
	}
}

// etcdTraffic runs fn while one goroutine commits new revisions back to
// back (each a one-revision durable transaction that also puts the meta
// key) and another Gets random live revisions (one per read transaction),
// each until fn has returned and it has made at least one (a small file
// compacts faster than one durable commit).
func etcdTraffic(ctx context.Context, env *Env, db DB, ks *etcdKeyspace, fn func() error) (etcdLoad, error) {
	var out etcdLoad
	stop := make(chan struct{})
	stopped := func(done uint64) bool {
		if done == 0 {
			return false
		}
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	var wg sync.WaitGroup
	var werr, rerr error
	start := time.Now()
	steal := startStealMeter()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stopped(out.commits.count()) {
			rev := ks.last.Load() + 1
			kvs := []BucketKVs{
				{Bucket: etcdKeyBucket, KVs: []KV{{Key: etcdRevKey(nil, rev, 0), Value: ks.value(rev)}}},
				metaPut(rev),
			}
			t0 := time.Now()
			if err := db.UpdateBuckets(kvs); err != nil {
				werr = fmt.Errorf("writer: %w", err)
				return
			}
			out.commits.add(time.Since(t0))
			ks.last.Store(rev)
		}
	}()
	go func() {
		defer wg.Done()
		rng := env.rng(0xe7cd)
		keys := [][]byte{make([]byte, 0, etcdRevKeySize)}
		for !stopped(out.reads.count()) {
			rev := ks.first + rng.Uint64N(ks.last.Load()-ks.first+1)
			keys[0] = etcdRevKey(keys[0], rev, 0)
			t0 := time.Now()
			found, err := db.Get(etcdKeyBucket, keys)
			out.reads.add(time.Since(t0))
			if err != nil {
				rerr = fmt.Errorf("reader: %w", err)
				return
			}
			if found != 1 {
				rerr = fmt.Errorf("reader: live revision %d not found", rev)
				return
			}
		}
	}()
	err := fn()
	close(stop)
	wg.Wait()
	out.elapsed = time.Since(start)
	steal.stop(&out)
	return out, errors.Join(err, werr, rerr)
}

// compactUnderTraffic compacts db online with etcdTraffic's writer and
// reader running, and returns their load, the compaction's wall time,
// the compaction transactions and pages rewritten the engine counted, and
// the file's size as Compact returned.
func compactUnderTraffic(ctx context.Context, env *Env, name string, db DB, ks *etcdKeyspace) (load etcdLoad, wall time.Duration, steps, pages, size int64, err error) {
	oc := db.(OnlineCompactor)
	counter, counts := db.(CompactionCounter)
	var steps0, pages0 int64
	if counts {
		steps0, pages0 = counter.CompactionCounts()
	}
	load, err = etcdTraffic(ctx, env, db, ks, func() error {
		start := time.Now()
		_, err := oc.CompactOnline(ctx)
		wall = time.Since(start)
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		size, err = fileSize(env.Path(name))
		return err
	})
	if counts {
		s, p := counter.CompactionCounts()
		steps, pages = s-steps0, p-pages0
	} else {
		env.Note("the engine does not count its compaction's transactions and pages: those rows are 0")
	}
	return load, wall, steps, pages, size, err
}

// coldPass drops the page cache, opens the file called name and reads
// every value of bucket "key" with a cursor, recording the times, the
// time per key and the major page faults; it checks that the pass saw the
// revs live revisions and value bytes summing to valueSum. Without root
// (or off Linux) it records nothing but a note.
func coldPass(env *Env, name string, revs int64, valueSum uint64) error {
	if err := dropPageCache(); err != nil {
		env.Note(fmt.Sprintf("cold restart rows skipped: %v", err))
		return nil
	}
	p := env.Progress("cold Open and pass", 1)
	defer p.Done()
	faults0, faultsOK := majorFaults()
	start := time.Now()
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	opened := time.Since(start)
	scanner, ok := db.(ValueScanner)
	if !ok {
		_ = db.Close()
		return fmt.Errorf("%s cannot scan values", env.Engine.Name())
	}
	start = time.Now()
	pairs, sum, err := scanner.SumValues(etcdKeyBucket)
	passed := time.Since(start)
	faults1, _ := majorFaults()
	p.Add(1)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if pairs != revs || sum != valueSum {
		return fmt.Errorf("cold pass read %d revisions with value bytes summing to %d, want %d and %d", pairs, sum, revs, valueSum)
	}
	env.Scalar("cold: Open", UnitDuration, Lower, float64(opened))
	env.Scalar("cold: pass over bucket key", UnitDuration, Lower, float64(passed))
	env.Scalar("cold: pass per key", UnitDuration, Lower, float64(passed)/float64(pairs))
	env.Scalar("cold: keys passed", UnitCount, Neither, float64(pairs))
	if faultsOK {
		env.Scalar("cold: major faults (Open and pass)", UnitCount, Lower, float64(faults1-faults0))
	}
	return nil
}

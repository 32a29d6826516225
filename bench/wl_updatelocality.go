package bench

import (
	"context"
	"fmt"
	"time"
)

// updateLocality measures Voron's "seeks per flush": random updates of existing keys in 100-key transactions on a
// large DB. Each transaction dirties ~100 leaves all over the tree; where
// the engine puts their copies decides how many separate write runs (seeks,
// on a disk that has them) a commit needs and how many bytes it writes.
var updateLocality = Workload{
	Name:    "update-locality",
	Summary: "random updates of existing keys in 100-key txns on a DB of --size: write runs and bytes per commit",
	Run:     runUpdateLocality,
}

// localityTxnKeys is the keys updated per transaction.
const localityTxnKeys = 100

func runUpdateLocality(ctx context.Context, env *Env) error {
	const name = "locality.db"
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	defer func() {
		if db != nil {
			_ = db.Close()
		}
	}()
	// The same key count as fragmented: bbolt's file reaches about --size.
	n := fragmentedKeys(env.Config.Size)
	if err := load(ctx, db, sequence(int(n)), env.Progress("load", int64(n))); err != nil {
		return err
	}
	size, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar("file size after load", UnitBytes, Neither, float64(size))

	// Keys are drawn before the clock starts. A new value per update (the
	// generation is mixed into the value index) so no engine can skip
	// writing an unchanged value.
	commits := env.Config.Commits
	r := env.rng(0x10ca1)
	batches := make([][]KV, commits)
	for c := range batches {
		batch := make([]KV, localityTxnKeys)
		for i := range batch {
			id := r.Uint64N(n)
			batch[i] = KV{Key: seqKey(id), Value: value(id ^ uint64(c+1)<<40)}
		}
		batches[c] = batch
	}

	p := env.Progress("100-key updates", int64(commits))
	defer p.Done()
	lat := make([]time.Duration, 0, commits)
	io0, ioOK := ReadProcIO()
	c0 := db.Counters()
	start := time.Now()
	for _, batch := range batches {
		if time.Since(start) >= env.Config.Duration {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		if err := db.Update(BucketName, batch); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		p.Add(1)
	}
	elapsed := time.Since(start)
	io1, _ := ReadProcIO()
	dc := db.Counters().Sub(c0)
	done := float64(len(lat))
	if done == 0 {
		return fmt.Errorf("no commit finished within %s", env.Config.Duration)
	}
	env.Latencies("commit latency", lat)
	env.Scalar("commits/s", UnitRate, Higher, done/elapsed.Seconds())
	env.Scalar("commits", UnitCount, Neither, done)
	if ioOK {
		d := io1.Sub(io0)
		env.Scalar("write syscalls/commit", UnitCount, Lower, float64(d.Syscw)/done)
		env.Scalar("wchar/commit", UnitBytes, Lower, float64(d.Wchar)/done)
		env.Scalar("write_bytes/commit", UnitBytes, Lower, float64(d.WriteBytes)/done)
	}
	// rivet: WriteRuns are coalesced runs, i.e. seeks. bbolt: TxStats.Write
	// counts one write call per page (plus the meta); it does not coalesce.
	if v, ok := dc[CtrWriteCalls]; ok {
		env.Scalar("engine write runs/commit", UnitCount, Lower, float64(v)/done)
	}
	if v, ok := dc[CtrBytesWritten]; ok {
		env.Scalar("engine bytes/commit", UnitBytes, Lower, float64(v)/done)
	}
	if v, ok := dc[CtrPagesWritten]; ok {
		env.Scalar("engine pages/commit", UnitCount, Lower, float64(v)/done)
	}
	if v, ok := dc[CtrFlushes]; ok {
		env.Scalar("engine flushes/commit", UnitCount, Lower, float64(v)/done)
	}
	// The runs a commit's flush waits for: a journaled commit (rivet in
	// Full mode) waits for its journal write, one run shared with the
	// commits of its group; one without a record waits for a sync point of
	// the file. bbolt's commit waits for every page it writes.
	if jw, ok := dc[CtrJournalWrites]; ok && jw > 0 {
		unjournaled := done - float64(dc[CtrJournalRecords])
		fileRuns := 0.0
		if unjournaled > 0 && dc[CtrFlushes] > 0 {
			fileRuns = float64(dc[CtrWriteCalls]) / float64(dc[CtrFlushes]) * unjournaled
		}
		env.Scalar("flush-path write runs/commit", UnitCount, Lower, (float64(jw)+fileRuns)/done)
		env.Scalar("journal bytes/commit", UnitBytes, Lower, float64(dc[CtrJournalBytes])/done)
	} else if v, ok := dc[CtrWriteCalls]; ok {
		env.Scalar("flush-path write runs/commit", UnitCount, Lower, float64(v)/done)
	}
	err = db.Close()
	db = nil
	if err != nil {
		return err
	}
	// What the updates cost in space: a copy-on-write engine's file holds
	// the free pages its commits left behind (and, with a locality slack,
	// those it keeps on purpose).
	if size, err = fileSize(env.Path(name)); err != nil {
		return err
	}
	env.Scalar("file size at end", UnitBytes, Lower, float64(size))
	return nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// longRead measures a writer while one read transaction stays open for
// --duration copying the database (bbolt #850: a remap waits for every
// open read transaction, so a writer that grows the file blocks behind a
// long read — a backup — until it ends). The database holds --keys/10
// keys; one read transaction writes it with Tx.WriteTo into a writer
// throttled so that the copy takes --duration, while one goroutine commits
// growing transactions (growTxnKeys new keys of growValueSize bytes). The
// figures are the writer's commit latencies and the commits it completed
// during the copy. The copy must be a valid database holding exactly the
// snapshot's data: it is opened, checked and its bucket's digest compared
// with the source's at the snapshot, or the workload fails.
var longRead = Workload{
	Name:    "long-read",
	Summary: "bbolt #850: one read transaction copies the DB with Tx.WriteTo, throttled to take --duration, while one goroutine commits 256 KiB transactions that grow the file: writer commit latency p99/max, commits during the copy; the copy is opened, checked and compared",
	Run:     runLongRead,
}

func runLongRead(ctx context.Context, env *Env) error {
	const name = "longread.db"
	db, err := env.Open(name)
	if err != nil {
		return err
	}
	defer db.Close()
	snap, ok1 := db.(Snapshotter)
	dig, ok2 := db.(Digester)
	if !ok1 || !ok2 {
		return fmt.Errorf("engine %s cannot copy a snapshot or digest a bucket", env.Engine.Name())
	}
	n := max(env.Config.Keys/10, 1)
	if err := load(ctx, db, sequence(n), env.Progress("load", int64(n))); err != nil {
		return err
	}
	// Nothing commits between this digest and the snapshot: the writer
	// starts once the read transaction has.
	wantPairs, wantSum, err := dig.Digest(BucketName)
	if err != nil {
		return err
	}
	copyPath := env.Path("copy.db")
	out, err := os.Create(copyPath)
	if err != nil {
		return err
	}
	defer out.Close()

	stop := make(chan struct{})
	started := make(chan struct{})
	type result struct {
		commits []time.Duration
		ends    []time.Time
		err     error
	}
	wres := make(chan result, 1)
	throttle := &throttledWriter{w: out, ctx: ctx}
	p := env.Progress("copy while writing", int64(env.Config.Duration/time.Millisecond))
	copyStart := time.Now()
	written, cerr := snap.WriteSnapshot(throttle, func(size int64) {
		throttle.start(size, env.Config.Duration)
		close(started)
		go func() {
			c, ends, err := growLoop(db, stop)
			wres <- result{c, ends, err}
		}()
	})
	copyEnd := time.Now()
	copyTime := copyEnd.Sub(copyStart)
	select {
	case <-started:
		close(stop)
	default:
		// The read transaction never began: no writer to stop.
		close(stop)
		wres <- result{}
	}
	w := <-wres
	p.Add(int64(copyTime / time.Millisecond))
	p.Done()
	if cerr != nil {
		return fmt.Errorf("copy: %w", cerr)
	}
	if w.err != nil {
		return w.err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// Commits that finished while the copy ran; the last one may have
	// ended after it (growLoop makes at least one commit).
	during := 0
	for _, end := range w.ends {
		if !end.After(copyEnd) {
			during++
		}
	}
	env.Scalar("copy time", UnitDuration, Neither, float64(copyTime))
	env.Scalar("copy size", UnitBytes, Neither, float64(written))
	env.Scalar("writer commits during the copy", UnitCount, Higher, float64(during))
	recordTail(env, "writer commit latency", w.commits)
	size, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar("file size at end", UnitBytes, Neither, float64(size))
	if err := verifyCopy(env, copyPath, wantPairs, wantSum); err != nil {
		return fmt.Errorf("the copy taken during writes: %w", err)
	}
	env.Scalar("copy opens, checks and matches the snapshot", UnitCount, Higher, 1)
	return nil
}

// verifyCopy opens the copy at path with the run's engine, runs its Check
// and compares its bucket with the snapshot's digest.
func verifyCopy(env *Env, path string, wantPairs int, wantSum [32]byte) error {
	if ins, ok := env.Engine.(Inspector); ok {
		var problems []error
		n, err := ins.Check(path, func(p error) { problems = append(problems, p) })
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("check found %d problems: %w", n, errors.Join(problems...))
		}
	}
	c, err := env.Engine.Open(path, OpenOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer c.Close()
	dig, ok := c.(Digester)
	if !ok {
		return fmt.Errorf("engine %s cannot digest a bucket", env.Engine.Name())
	}
	pairs, sum, err := dig.Digest(BucketName)
	if err != nil {
		return err
	}
	if pairs != wantPairs || sum != wantSum {
		return fmt.Errorf("it holds %d pairs (digest %x), the snapshot %d (%x)", pairs, sum[:8], wantPairs, wantSum[:8])
	}
	return nil
}

// throttledWriter passes writes through at the rate that makes a copy of
// a given size take a given time, sleeping after each write that got ahead
// of it: the slow consumer of a backup (a network link, a throttled
// upload) that keeps its read transaction open.
type throttledWriter struct {
	w     io.Writer
	ctx   context.Context
	rate  float64 // bytes per second; 0: not started, no throttling
	begin time.Time
	n     int64
}

// start sets the rate so that size bytes take d, counting from now.
func (t *throttledWriter) start(size int64, d time.Duration) {
	t.rate = float64(size) / d.Seconds()
	t.begin = time.Now()
}

// Write implements io.Writer.
func (t *throttledWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.n += int64(n)
	if err != nil || t.rate == 0 {
		return n, err
	}
	due := time.Duration(float64(t.n) / t.rate * float64(time.Second))
	if wait := due - time.Since(t.begin); wait > 0 {
		select {
		case <-time.After(wait):
		case <-t.ctx.Done():
			return n, t.ctx.Err()
		}
	}
	return n, nil
}

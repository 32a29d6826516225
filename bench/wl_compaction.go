package bench

import (
	"context"
	"fmt"
	"time"
)

// compaction measures giving space back (issue 11): a file grown to --size
// and then emptied to 100 keys (as in fragmented), and one with half of its
// keys deleted at random, each compacted offline into a new file — the only
// way bbolt, and for now rivet, give space back. Figures: the file size
// before and after, and the time the compaction took. (Online compaction,
// when rivet has it, adds its own rows: the same file shrunk in place while
// a reader and a writer run.)
var compaction = Workload{
	Name:    "compaction",
	Summary: "grow to --size, delete all but 100 keys (and, separately, half the keys at random), then compact offline into a new file",
	Run:     runCompaction,
}

// compactionTxMaxSize is the transaction size both engines' Compact use.
const compactionTxMaxSize = 64 << 20

func runCompaction(ctx context.Context, env *Env) error {
	c, ok := env.Engine.(OfflineCompactor)
	if !ok {
		return nil // LMDB: no offline compaction through this harness
	}
	for _, shape := range []string{"emptied to 100 keys", "half deleted"} {
		const name = "compaction.db"
		var before int64
		var err error
		if shape == "emptied to 100 keys" {
			_, _, before, err = buildFragmented(ctx, env, name)
		} else {
			before, err = buildHalfDeleted(ctx, env, name)
		}
		if err != nil {
			return err
		}
		dst := env.Path("compacted.db")
		p := env.Progress("compact ("+shape+")", 1)
		start := time.Now()
		err = c.CompactFile(env.Path(name), dst, compactionTxMaxSize)
		elapsed := time.Since(start)
		p.Add(1)
		p.Done()
		if err != nil {
			return fmt.Errorf("compact %s: %w", shape, err)
		}
		after, err := fileSize(dst)
		if err != nil {
			return err
		}
		env.Scalar(shape+": file size before", UnitBytes, Neither, float64(before))
		env.Scalar(shape+": offline compact, file size after", UnitBytes, Lower, float64(after))
		env.Scalar(shape+": offline compact, time", UnitDuration, Lower, float64(elapsed))
		for _, f := range []string{name, "compacted.db"} {
			if err := removeDB(env.Path(f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// buildHalfDeleted grows a file as fragmented does and deletes every other
// key in a random order of transactions, so free pages are spread through
// the whole file; it returns the file's size after the deletes.
func buildHalfDeleted(ctx context.Context, env *Env, name string) (size int64, err error) {
	db, err := env.Open(name)
	if err != nil {
		return 0, err
	}
	n := fragmentedKeys(env.Config.Size)
	if err := load(ctx, db, sequence(int(n)), env.Progress("grow", int64(n))); err != nil {
		_ = db.Close()
		return 0, err
	}
	ids := sequence(int(n))
	env.rng(0xc0).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	ids = ids[:n/2]
	p := env.Progress("delete half", int64(len(ids)))
	for start := 0; start < len(ids); start += fragmentedDeleteTxn {
		if err := ctx.Err(); err != nil {
			_ = db.Close()
			return 0, err
		}
		keys := make([][]byte, 0, fragmentedDeleteTxn)
		for _, id := range ids[start:min(start+fragmentedDeleteTxn, len(ids))] {
			keys = append(keys, seqKey(id))
		}
		if err := db.Delete(BucketName, keys); err != nil {
			_ = db.Close()
			return 0, err
		}
		p.Add(int64(len(keys)))
	}
	p.Done()
	if err := db.Close(); err != nil {
		return 0, err
	}
	return fileSize(env.Path(name))
}

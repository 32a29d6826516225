package bench

import (
	"context"
	"fmt"
	"time"
)

// openScaling measures how Open's cost grows with the file. bbolt reads its
// whole freelist at Open (default) or rebuilds it by walking every page
// (NoFreelistSync), so its Open grows with the file and, on a fragmented
// file, with the free space; rivet reads its metas only and should stay
// flat. Each size is built once by loading keys (the "plain" file) and then
// fragmented by deleting all but fragmentedLive keys, and Open is timed on
// both states.
var openScaling = Workload{
	Name:    "open-scaling",
	Summary: "Open time (median of 5) on files of each --open-sizes, plain and fragmented; rivet's pages read at Open",
	Run:     runOpenScaling,
}

// openTimings is how many opens (each followed by a close) are timed per
// file state.
const openTimings = 5

func runOpenScaling(ctx context.Context, env *Env) error {
	for _, size := range env.Config.OpenSizes {
		name := fmt.Sprintf("open-%s.db", size)
		db, err := env.Open(name)
		if err != nil {
			return err
		}
		n := fragmentedKeys(size)
		err = load(ctx, db, sequence(int(n)), env.Progress(fmt.Sprintf("grow %s", size), int64(n)))
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := timeOpens(env, name, fmt.Sprintf("%s plain", size)); err != nil {
			return err
		}

		db, err = env.Open(name)
		if err != nil {
			return err
		}
		err = deleteAllBut(ctx, db, n, env.Progress(fmt.Sprintf("fragment %s", size), int64(n)))
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := timeOpens(env, name, fmt.Sprintf("%s fragmented", size)); err != nil {
			return err
		}
		// The files of one size are no longer needed; at 4 GiB keeping them
		// would multiply the disk a full run needs.
		if err := env.discardDB(name); err != nil {
			return err
		}
	}
	return nil
}

// timeOpens opens and closes the file called name openTimings times and
// records the open latencies, the file size, and the engine's pages read
// during Open (the first open's count; every open reads the same).
func timeOpens(env *Env, name, label string) error {
	size, err := fileSize(env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar("file size, "+label, UnitBytes, Neither, float64(size))
	opens := make([]time.Duration, 0, openTimings)
	for i := range openTimings {
		t0 := time.Now()
		db, err := env.Open(name)
		if err != nil {
			return err
		}
		opens = append(opens, time.Since(t0))
		if i == 0 {
			if pr, ok := db.Counters()[CtrPagesRead]; ok {
				env.Scalar("pages read at open, "+label, UnitCount, Lower, float64(pr))
			}
		}
		if err := db.Close(); err != nil {
			return err
		}
	}
	env.Latencies("open, "+label, opens)
	return nil
}

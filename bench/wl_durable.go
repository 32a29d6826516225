package bench

import "context"

// durableWrites is the plain cost of durability: one key per transaction,
// each commit durable before the next starts, on a fresh DB. It is the
// number that decides whether users can leave fsync on (containerd
// users turn durability off because of it).
var durableWrites = Workload{
	Name:    "durable-writes",
	Summary: "--commits one-key durable commits (16-byte random keys, 100-byte values) on a fresh DB",
	Run:     runDurableWrites,
}

func runDurableWrites(ctx context.Context, env *Env) error {
	db, err := env.Open("durable.db")
	if err != nil {
		return err
	}
	r := env.rng(0xd0)
	// No time cap: the figure is "n commits", and a slow disk must show as a
	// slow result, not as fewer commits.
	const noCap = 1 << 62
	elapsed, err := commitLoop(ctx, env, db, env.Config.Commits, noCap, func(int) []byte {
		k := make([]byte, KeySize)
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		return k
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		env.Scalar("total time", UnitDuration, Lower, float64(elapsed))
	}
	return err
}

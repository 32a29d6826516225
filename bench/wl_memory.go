package bench

import (
	"context"
	"fmt"
	"strconv"
)

// memory measures the peak resident memory of a process that opens the
// fragmented file and makes one-key durable commits (the seed report's
// steady state). The process's whole RSS is the honest figure — it counts
// the pages of the memory map an engine touches, its freelist in memory and
// the Go heap — but it can only be measured per process: so the parent
// builds the file and runs a child process (child.go) for each engine; the
// child does the work and reports its peak RSS.
var memory = Workload{
	Name:    "memory",
	Summary: "peak RSS of a child process that opens the fragmented file and makes --commits one-key commits",
	Run:     runMemory,
}

var _ = registerChild("memory", memoryChild)

// memoryChild is the child's whole life: open args["path"] with
// args["engine"], make args["commits"] one-key commits, close. With no
// path it does nothing: the idle baseline.
func memoryChild(args map[string]string) (childResult, error) {
	e, err := LookupEngine(args["engine"])
	if err != nil {
		return childResult{}, err
	}
	if args["path"] == "" {
		return childResult{}, nil
	}
	n, err := strconv.Atoi(args["commits"])
	if err != nil {
		return childResult{}, fmt.Errorf("commits: %w", err)
	}
	db, err := e.Open(args["path"], OpenOptions{})
	if err != nil {
		return childResult{}, err
	}
	kv := []KV{{}}
	for i := range n {
		kv[0] = KV{Key: fmt.Appendf(nil, "probe-%08d", i), Value: value(uint64(i))}
		if err := db.Update(BucketName, kv); err != nil {
			_ = db.Close()
			return childResult{}, err
		}
	}
	return childResult{}, db.Close()
}

func runMemory(ctx context.Context, env *Env) error {
	const name = "memory.db"
	if _, _, _, err := buildFragmented(ctx, env, name); err != nil {
		return err
	}
	idle, err := runMemoryChild(ctx, env, "")
	if err != nil {
		return err
	}
	rss, err := runMemoryChild(ctx, env, env.Path(name))
	if err != nil {
		return err
	}
	env.Scalar("peak RSS", UnitBytes, Lower, float64(rss))
	env.Scalar("peak RSS above an idle child", UnitBytes, Lower, float64(rss-idle))
	env.Scalar("peak RSS of an idle child", UnitBytes, Neither, float64(idle))
	return nil
}

// runMemoryChild runs the child on path (or idle, for an empty path) and
// returns its peak RSS in bytes.
func runMemoryChild(ctx context.Context, env *Env, path string) (int64, error) {
	p := env.Progress("child process", 1)
	res, err := runChild(ctx, "memory", map[string]string{
		"engine": env.Engine.Name(), "path": path, "commits": strconv.Itoa(env.Config.Commits),
	}, 0)
	p.Add(1)
	p.Done()
	if err != nil {
		return 0, fmt.Errorf("memory child: %w", err)
	}
	return res.PeakRSS, nil
}

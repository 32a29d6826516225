package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// memory measures the peak resident memory of a process that opens the
// fragmented file and makes one-key durable commits (the seed report's
// steady state). The process's whole RSS is the honest figure — it counts
// the pages of the memory map an engine touches, its freelist in memory and
// the Go heap — but it can only be measured per process: so the parent
// builds the file and re-executes its own binary as a child for each engine;
// the child does the work, then prints its peak RSS on stdout for the
// parent to record.
//
// The child reports its own high-water mark (VmHWM in /proc/self/status on
// Linux) rather than letting the parent read ru_maxrss from wait4: on
// Linux a child's ru_maxrss is never below the RSS its parent had when it
// forked (the kernel carries the pre-exec address space's high-water mark
// over exec), so a parent that just built a 256 MiB file would see every
// child use 256 MiB. Where /proc is missing the child falls back to its
// own getrusage, which macOS and the BSDs do not inflate that way.
//
// The child is recognised by environment variables, checked in this
// package's init function, so every binary linking the package can serve as
// a child without help from main.
var memory = Workload{
	Name:    "memory",
	Summary: "peak RSS of a child process that opens the fragmented file and makes --commits one-key commits",
	Run:     runMemory,
}

// Environment variables of the memory child.
const (
	childEnvEngine  = "RIVET_BENCH_CHILD_ENGINE"  // engine name; its presence makes the process a child
	childEnvPath    = "RIVET_BENCH_CHILD_PATH"    // database file; empty: do nothing (idle baseline)
	childEnvCommits = "RIVET_BENCH_CHILD_COMMITS" // one-key commits to make
)

func init() {
	engine, ok := os.LookupEnv(childEnvEngine)
	if !ok {
		return
	}
	if err := memoryChild(engine, os.Getenv(childEnvPath), os.Getenv(childEnvCommits)); err != nil {
		fmt.Fprintln(os.Stderr, "rivet bench memory child:", err)
		os.Exit(2)
	}
	rss, ok := ownPeakRSS()
	if !ok {
		fmt.Fprintln(os.Stderr, "rivet bench memory child:", errNoChildRSS)
		os.Exit(2)
	}
	fmt.Printf("%s%d\n", childRSSPrefix, rss)
	os.Exit(0)
}

// memoryChild is the child's whole life: open path with engine, commit,
// close. Engines register from variable initialisers, which run before any
// init function, so every engine linked in can be looked up here.
func memoryChild(engine, path, commits string) error {
	e, err := LookupEngine(engine)
	if err != nil {
		return err
	}
	if path == "" {
		return nil
	}
	n, err := strconv.Atoi(commits)
	if err != nil {
		return fmt.Errorf("commits: %w", err)
	}
	db, err := e.Open(path, OpenOptions{})
	if err != nil {
		return err
	}
	kv := []KV{{}}
	for i := range n {
		kv[0] = KV{Key: fmt.Appendf(nil, "probe-%08d", i), Value: value(uint64(i))}
		if err := db.Update(BucketName, kv); err != nil {
			_ = db.Close()
			return err
		}
	}
	return db.Close()
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

// errNoChildRSS is returned where the OS does not report a process's peak
// RSS.
var errNoChildRSS = errors.New("the OS does not report a process's peak RSS here")

// childRSSPrefix starts the child's one line of output.
const childRSSPrefix = "peak-rss-bytes "

// ownPeakRSS returns this process's peak RSS since its exec: VmHWM where
// /proc/self/status has it, getrusage elsewhere.
func ownPeakRSS() (int64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return peakRSS()
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kib * 1024, true
	}
	return peakRSS()
}

// runMemoryChild runs the child on path (or idle, for an empty path) and
// returns its peak RSS in bytes.
func runMemoryChild(ctx context.Context, env *Env, path string) (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		childEnvEngine+"="+env.Engine.Name(),
		childEnvPath+"="+path,
		childEnvCommits+"="+strconv.Itoa(env.Config.Commits),
	)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	p := env.Progress("child process", 1)
	err = cmd.Run()
	p.Add(1)
	p.Done()
	if err != nil {
		return 0, fmt.Errorf("memory child: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	// The last line is the child's; a binary whose main printed something
	// before (it cannot: init exits first) would not confuse the parse.
	out := strings.TrimSpace(stdout.String())
	line := out[strings.LastIndexByte(out, '\n')+1:]
	v, ok := strings.CutPrefix(line, childRSSPrefix)
	if !ok {
		return 0, fmt.Errorf("memory child printed %q, not its peak RSS", out)
	}
	return strconv.ParseInt(v, 10, 64)
}

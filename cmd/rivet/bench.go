package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rivetkv/rivet/bench"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// benchFlags are the bench command's options. Sizes start from a preset and
// only the flags the user gave override it.
type benchFlags struct {
	preset     string
	vs         []string
	engines    []string
	workloads  []string
	size       bench.Size
	keys       int
	oneTxnKeys int
	reads      int
	commits    int
	duration   time.Duration
	runs       int
	openSizes  []string
	slasher    int
	valueSizes []string
	dir        string
	keep       bool
	json       bool
	quiet      bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure rivet on this machine's disk, optionally side by side with bbolt",
		Long: `Runs rivet's benchmark workloads on the disk holding --dir (default: the OS
temp dir) and prints a table of medians, p99 latencies and, with --vs bbolt,
ratios to bbolt. The default "demo" preset finishes in about a minute on a
two-core machine for rivet alone; "--preset full" is the documented run
(1 GiB fragmented file, 1M keys, 3 runs).

Workloads:
` + workloadHelp() + `
Figures named wchar and write_bytes come from /proc/self/io (Linux only):
wchar is what the engine handed to write calls, write_bytes what reached the
storage layer. Databases are created in a fresh directory inside --dir and
removed afterwards.

Durability modes: the engines rivet-barrier, rivet-periodic (Periodic
1s), rivet-none and bbolt-nosync run only when named (--engines, or
"--vs modes" for all of them with rivet and bbolt); the workloads that
compare them are concurrent-durable and mode-latency.

Locality: the engines rivet-slack25 and rivet-slack50 are rivet with
Options.LocalitySlack 0.25 and 0.5 and also run only when named; compare
them on update-locality (write runs per commit, file size at end).`,
		Example: `  go -C cmd/rivet run . bench
  go -C cmd/rivet run . bench --vs bbolt
  go -C cmd/rivet run . bench --vs bbolt --workloads fragmented --size 1GiB --duration 10s
  go -C cmd/rivet run . bench --vs modes --workloads mode-latency,concurrent-durable --duration 8s
  go -C cmd/rivet run . bench --preset full --vs bbolt --json > results.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.preset, "preset", "demo", "sizes to start from: tiny, demo or full (the flags below override)")
	fl.StringSliceVar(&f.vs, "vs", nil, `engines to compare with; "bbolt" means bbolt and bbolt-nofreelistsync, "modes" rivet's durability modes, bbolt and bbolt-nosync`)
	fl.StringSliceVar(&f.engines, "engines", nil, "exact engines to run, replacing the default (rivet) and --vs: "+strings.Join(bench.EngineNames(), ", "))
	fl.StringSliceVar(&f.workloads, "workloads", nil, "workloads to run (default all but "+strings.Join(bench.OnlyWhenNamedWorkloads(), " and ")+"): "+strings.Join(bench.WorkloadNames(), ", "))
	fl.Var(&f.size, "size", "file size the fragmented workload grows to, e.g. 256MiB or 1GiB (default from preset)")
	fl.IntVar(&f.keys, "keys", 0, "keys loaded by bulk-load and random-reads (default from preset)")
	fl.IntVar(&f.oneTxnKeys, "one-txn-keys", 0, "keys of bulk-load's single-transaction loads; 0 = --keys (default from preset)")
	fl.IntVar(&f.reads, "reads", 0, "random Gets per goroutine setting in random-reads (default from preset)")
	fl.IntVar(&f.commits, "commits", 0, "one-key commits of durable-writes; cap of the fragmented loop (default from preset)")
	fl.DurationVar(&f.duration, "duration", 0, "time cap of the commit loops; concurrent-durable runs each setting, and mode-latency its loop, for a quarter of it (default from preset)")
	fl.StringSliceVar(&f.openSizes, "open-sizes", nil, "file sizes open-scaling builds and opens, e.g. 16MiB,1GiB,4GiB (default from preset)")
	fl.IntVar(&f.slasher, "slasher-keys", 0, "keys batch-slasher spreads over its 4 buckets (default from preset)")
	fl.StringSliceVar(&f.valueSizes, "value-sizes", nil, "value sizes large-value stores, e.g. 300MiB,1GiB (default from preset)")
	fl.IntVar(&f.runs, "runs", 0, "repetitions; medians are taken over runs (default from preset)")
	fl.StringVar(&f.dir, "dir", "", "directory on the disk to measure (default the OS temp dir)")
	fl.BoolVar(&f.keep, "keep", false, "keep the databases the workloads made (in a rivet-bench-* directory inside --dir) instead of removing them")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON instead of a table")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print no progress to stderr")
	return cmd
}

func workloadHelp() string {
	var b strings.Builder
	for _, w := range bench.Workloads() {
		only := ""
		if w.OnlyWhenNamed {
			only = " (only when named)"
		}
		fmt.Fprintf(&b, "  %-20s %s%s\n", w.Name, w.Summary, only)
	}
	return b.String()
}

// engineList resolves the engines to run: --engines verbatim, else rivet
// plus whatever --vs names, with "bbolt" standing for both bbolt
// configurations (bbolt's default and bbolt without a freelist sync, the
// pair bbolt users compare with), and "modes" for the durability
// comparison: rivet in every durability mode, bbolt default and bbolt with
// NoSync.
func engineList(f *benchFlags) []string {
	if len(f.engines) > 0 {
		return f.engines
	}
	out := []string{bench.RivetEngine}
	for _, v := range f.vs {
		add := []string{v}
		switch {
		case strings.EqualFold(v, bench.BaselineEngine):
			add = []string{bench.BaselineEngine, bench.BoltNoFreelistSyncEngine}
		case strings.EqualFold(v, modesAlias):
			add = bench.DurabilityEngines
		}
		for _, a := range add {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// modesAlias is the --vs value that stands for bench.DurabilityEngines.
const modesAlias = "modes"

func runBench(cmd *cobra.Command, f *benchFlags) error {
	cfg, err := bench.Preset(f.preset)
	if err != nil {
		return err
	}
	cfg.Engines, cfg.Workloads, cfg.Dir, cfg.Keep = engineList(f), f.workloads, f.dir, f.keep
	fl := cmd.Flags()
	if fl.Changed("size") {
		cfg.Size = f.size
	}
	if fl.Changed("keys") {
		cfg.Keys = f.keys
	}
	if fl.Changed("one-txn-keys") {
		cfg.OneTxnKeys = f.oneTxnKeys
	}
	if fl.Changed("reads") {
		cfg.Reads = f.reads
	}
	if fl.Changed("commits") {
		cfg.Commits = f.commits
	}
	if fl.Changed("duration") {
		cfg.Duration = f.duration
	}
	if fl.Changed("runs") {
		cfg.Runs = f.runs
	}
	if fl.Changed("open-sizes") {
		cfg.OpenSizes = nil
		for _, s := range f.openSizes {
			z, err := bench.ParseSize(s)
			if err != nil {
				return err
			}
			cfg.OpenSizes = append(cfg.OpenSizes, z)
		}
	}
	if fl.Changed("slasher-keys") {
		cfg.SlasherKeys = f.slasher
	}
	if fl.Changed("value-sizes") {
		cfg.ValueSizes = nil
		for _, s := range f.valueSizes {
			z, err := bench.ParseSize(s)
			if err != nil {
				return err
			}
			cfg.ValueSizes = append(cfg.ValueSizes, z)
		}
	}

	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if !f.quiet {
		cfg.Log = stderr
		if isTerminal(stdout) && isTerminal(stderr) {
			cfg.Progress = progressBars(stderr)
		}
	}
	rep, err := bench.Run(cmd.Context(), cfg)
	var interrupted *bench.InterruptedError
	if err != nil && !errors.As(err, &interrupted) {
		return err
	}
	// On Ctrl-C the workloads that finished are still reported, then the
	// interruption is the command's error (exit 1).
	if interrupted != nil && interrupted.Finished == 0 {
		return err
	}
	if f.keep {
		fmt.Fprintf(stderr, "databases kept in %s\n", rep.Host.Dir)
	}
	if f.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err == nil && interrupted != nil {
		err = fmt.Errorf("%w; the results above are those of the finished workloads", interrupted)
	}
	return err
}

// progressBars draws one bar per long phase on w, erased when the phase
// ends so the table below stays clean.
func progressBars(w io.Writer) bench.ProgressFunc {
	return func(label string, total int64) bench.Progress {
		return phaseBar{progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
		)}
	}
}

// phaseBar adapts a progress bar to bench.Progress.
type phaseBar struct{ bar *progressbar.ProgressBar }

// Add implements bench.Progress. A bar that cannot draw is not worth
// failing a benchmark for, so its errors are dropped.
func (p phaseBar) Add(n int64) { _ = p.bar.Add64(n) }

// Done implements bench.Progress; the bar fills and is erased.
func (p phaseBar) Done() { _ = p.bar.Finish() }

// benchEngines lists the engines "rivet bench" can run, for "rivet
// version".
func benchEngines() string { return strings.Join(bench.EngineNames(), ", ") }

// Command rivet-bench runs rivet's side-by-side benchmarks against bbolt.
//
// It is the scriptable front end of package bench (stdlib flags, no
// terminal UI); the rivet command's "bench" subcommand is the friendly one.
// Defaults are the "full" preset on every registered engine but the
// durability variants (rivet-barrier, rivet-periodic, rivet-none,
// bbolt-nosync), which run when named:
//
//	go -C bench run ./cmd/rivet-bench                          # full run, ~GiB of disk
//	go -C bench run ./cmd/rivet-bench --preset demo --json     # quicker, JSON on stdout
//	go -C bench run ./cmd/rivet-bench --workloads fragmented --engines bbolt,bbolt-nofreelistsync
//	go -C bench run ./cmd/rivet-bench --preset demo --workloads mode-latency,concurrent-durable --duration 8s \
//	    --engines rivet,rivet-barrier,rivet-periodic,rivet-none,bbolt,bbolt-nosync
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/rivetkv/rivet/bench"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rivet-bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("rivet-bench", flag.ContinueOnError)
	preset := fs.String("preset", "full", "sizes to start from: tiny, demo or full (flags below override)")
	workloads := fs.String("workloads", "", "comma-separated workloads (default all but "+strings.Join(bench.OnlyWhenNamedWorkloads(), " and ")+"): "+strings.Join(bench.WorkloadNames(), ", "))
	engines := fs.String("engines", "", "comma-separated engines (default all but the durability variants "+strings.Join(variants(), ", ")+"): "+strings.Join(bench.EngineNames(), ", "))
	var size bench.Size
	fs.Var(&size, "size", "file size the fragmented workload grows to, e.g. 256MiB, 1GiB (default from preset)")
	keys := fs.Int("keys", 0, "keys of bulk-load and random-reads (default from preset)")
	oneTxnKeys := fs.Int("one-txn-keys", 0, "keys of bulk-load's single-transaction loads; 0 = --keys (default from preset)")
	reads := fs.Int("reads", 0, "random Gets per goroutine setting (default from preset)")
	commits := fs.Int("commits", 0, "one-key commits of durable-writes, cap of the fragmented loop (default from preset)")
	duration := fs.Duration("duration", 0, "time cap of the commit loops; concurrent-durable runs each setting, and mode-latency its loop, for a quarter of it (default from preset)")
	openSizes := fs.String("open-sizes", "", "comma-separated file sizes of open-scaling, e.g. 16MiB,1GiB,4GiB (default from preset)")
	slasher := fs.Int("slasher-keys", 0, "keys batch-slasher spreads over its 4 buckets (default from preset)")
	valueSizes := fs.String("value-sizes", "", "comma-separated value sizes of large-value, e.g. 300MiB,1GiB (default from preset)")
	runs := fs.Int("runs", 0, "repetitions; medians are over runs (default from preset)")
	dir := fs.String("dir", "", "directory for the databases (default the OS temp dir); files are removed afterwards")
	jsonOut := fs.Bool("json", false, "print the report as JSON instead of a table")
	quiet := fs.Bool("q", false, "do not print progress lines to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	cfg, err := bench.Preset(*preset)
	if err != nil {
		return err
	}
	cfg.Workloads, cfg.Engines, cfg.Dir = bench.SplitList(*workloads), bench.SplitList(*engines), *dir
	// A flag overrides the preset only when given, so "--preset demo
	// --keys 5000" changes exactly one number.
	var visitErr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "open-sizes":
			cfg.OpenSizes = nil
			for _, s := range bench.SplitList(*openSizes) {
				z, err := bench.ParseSize(s)
				if err != nil {
					visitErr = err
					return
				}
				cfg.OpenSizes = append(cfg.OpenSizes, z)
			}
		case "value-sizes":
			cfg.ValueSizes = nil
			for _, s := range bench.SplitList(*valueSizes) {
				z, err := bench.ParseSize(s)
				if err != nil {
					visitErr = err
					return
				}
				cfg.ValueSizes = append(cfg.ValueSizes, z)
			}
		case "slasher-keys":
			cfg.SlasherKeys = *slasher
		case "size":
			cfg.Size = size
		case "keys":
			cfg.Keys = *keys
		case "one-txn-keys":
			cfg.OneTxnKeys = *oneTxnKeys
		case "reads":
			cfg.Reads = *reads
		case "commits":
			cfg.Commits = *commits
		case "duration":
			cfg.Duration = *duration
		case "runs":
			cfg.Runs = *runs
		}
	})
	if visitErr != nil {
		return visitErr
	}
	if !*quiet {
		cfg.Log = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *jsonOut {
		return rep.WriteJSON(os.Stdout)
	}
	return rep.WriteTable(os.Stdout)
}

// variants names the engines that run only when named.
func variants() []string {
	var out []string
	for _, e := range bench.Engines() {
		if _, ok := e.(bench.Variant); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

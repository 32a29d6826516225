package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Env is what a workload gets for one run on one engine.
type Env struct {
	Config *Config
	Engine Engine
	// Dir is an empty directory of its own, removed after the run.
	Dir string
	// Run is the 0-based run number. Workloads seed their random number
	// generators with it, so every engine sees the same keys in a run.
	Run int

	workload string
	rec      *recorder
}

// Path returns the path of a database file called name in the run's
// directory.
func (e *Env) Path(name string) string { return filepath.Join(e.Dir, name) }

// Open opens (creating) the database file called name with default options.
func (e *Env) Open(name string) (DB, error) { return e.Engine.Open(e.Path(name), OpenOptions{}) }

// Scalar records one value of a figure for this run.
func (e *Env) Scalar(figure string, u Unit, b Better, v float64) { e.rec.scalar(figure, u, b, v) }

// Latencies records latency samples of a figure for this run; the report
// gives their median and p99.
func (e *Env) Latencies(figure string, ds []time.Duration) { e.rec.latencies(figure, ds) }

// Progress starts reporting a long phase of the run.
func (e *Env) Progress(phase string, total int64) Progress {
	if e.Config.Progress == nil {
		return nopProgress{}
	}
	return e.Config.Progress(fmt.Sprintf("%s/%s: %s", e.workload, e.Engine.Name(), phase), total)
}

// Run executes every selected workload on every selected engine cfg.Runs
// times and returns the report. Within a run the engines take turns, and the
// turn order rotates from run to run, so a machine that drifts (page cache
// filling, another tenant's I/O) does not always favour the same engine.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	wls, err := selectWorkloads(cfg.Workloads)
	if err != nil {
		return nil, err
	}
	engines, err := selectEngines(cfg.Engines)
	if err != nil {
		return nil, err
	}
	cfg.Workloads, cfg.Engines = nil, nil
	for _, w := range wls {
		cfg.Workloads = append(cfg.Workloads, w.Name)
	}
	for _, e := range engines {
		cfg.Engines = append(cfg.Engines, e.Name())
	}

	parent := cfg.Dir
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, err
		}
	}
	base, err := os.MkdirTemp(parent, "rivet-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)

	rep := &Report{
		Started:  time.Now(),
		Host:     Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Dir: base},
		Baseline: BaselineEngine,
	}
	if _, ok := ReadProcIO(); !ok {
		rep.Notes = append(rep.Notes, "/proc/self/io is not available: wchar and write_bytes figures are left out")
	}
	var agg aggregator
	for _, w := range wls {
		for run := range cfg.Runs {
			for i := range engines {
				e := engines[(i+run)%len(engines)]
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if cfg.Log != nil {
					fmt.Fprintf(cfg.Log, "%s on %s, run %d/%d\n", w.Name, e.Name(), run+1, cfg.Runs)
				}
				rec, err := runOne(ctx, &cfg, w, e, run, base)
				if err != nil {
					return nil, fmt.Errorf("%s on %s, run %d: %w", w.Name, e.Name(), run+1, err)
				}
				agg.add(w.Name, e.Name(), rec)
			}
		}
	}
	rep.Config = cfg
	rep.Results = agg.results(cfg.Engines, BaselineEngine)
	rep.Elapsed = time.Since(rep.Started)
	if rss, ok := PeakRSS(); ok {
		rep.PeakRSS = rss
	}
	return rep, nil
}

// runOne runs workload w once on engine e in a directory of its own, which
// it removes afterwards: a full run leaves several GiB behind otherwise.
func runOne(ctx context.Context, cfg *Config, w Workload, e Engine, run int, base string) (*recorder, error) {
	dir, err := os.MkdirTemp(base, w.Name+"-"+e.Name()+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Start every run from a collected heap, so one engine's garbage is not
	// collected on the next engine's clock.
	runtime.GC()
	env := &Env{Config: cfg, Engine: e, Dir: dir, Run: run, workload: w.Name, rec: &recorder{}}
	if err := w.Run(ctx, env); err != nil {
		return nil, err
	}
	return env.rec, nil
}

func selectEngines(names []string) ([]Engine, error) {
	if len(names) == 0 {
		return DefaultEngines(), nil
	}
	var out []Engine
	for _, n := range names {
		e, err := LookupEngine(n)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(out, func(x Engine) bool { return x.Name() == e.Name() }) {
			out = append(out, e)
		}
	}
	return out, nil
}

func selectWorkloads(names []string) ([]Workload, error) {
	all := Workloads()
	if len(names) == 0 {
		return all, nil
	}
	var out []Workload
	for _, n := range names {
		i := slices.IndexFunc(all, func(w Workload) bool { return strings.EqualFold(w.Name, n) })
		if i < 0 {
			return nil, fmt.Errorf("unknown workload %q; available: %s", n, strings.Join(WorkloadNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(w Workload) bool { return w.Name == all[i].Name }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

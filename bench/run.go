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

// Note records a remark about this run that no figure can carry (an
// engine that crashed, a check that did not finish); the report lists each
// distinct note once, naming the workload and engine.
func (e *Env) Note(text string) { e.rec.notes = append(e.rec.notes, text) }

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
		// A mistyped --dir must not be created silently: the run would
		// measure whatever disk that new path lands on.
		fi, err := os.Stat(parent)
		if err != nil {
			return nil, fmt.Errorf("benchmark directory %s: %w (create it first, on the disk to measure)", parent, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("benchmark directory %s is not a directory", parent)
		}
	}
	base, err := os.MkdirTemp(parent, "rivet-bench-")
	if err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(base)
	}

	rep := &Report{
		Started:  time.Now(),
		Host:     Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Dir: base},
		Baseline: BaselineEngine,
	}
	if _, ok := ReadProcIO(); !ok {
		rep.Notes = append(rep.Notes, "/proc/self/io is not available: wchar and write_bytes figures are left out")
	}
	var agg aggregator
	var interrupted error
	finished := 0
workloads:
	for _, w := range wls {
		type done struct {
			engine string
			rec    *recorder
		}
		var runs []done
		for run := range cfg.Runs {
			for i := range engines {
				e := engines[(i+run)%len(engines)]
				if err := ctx.Err(); err != nil {
					interrupted = err
					break workloads
				}
				if cfg.Log != nil {
					fmt.Fprintf(cfg.Log, "%s on %s, run %d/%d\n", w.Name, e.Name(), run+1, cfg.Runs)
				}
				rec, err := runOne(ctx, &cfg, w, e, run, base)
				if err != nil && ctx.Err() != nil {
					interrupted = ctx.Err()
					break workloads
				}
				if err != nil {
					return nil, fmt.Errorf("%s on %s, run %d: %w", w.Name, e.Name(), run+1, err)
				}
				runs = append(runs, done{e.Name(), rec})
			}
		}
		for _, d := range runs {
			agg.add(w.Name, d.engine, d.rec)
			for _, n := range d.rec.notes {
				note := fmt.Sprintf("%s on %s: %s", w.Name, d.engine, n)
				if !slices.Contains(rep.Notes, note) {
					rep.Notes = append(rep.Notes, note)
				}
			}
		}
		finished++
	}
	rep.Config = cfg
	rep.Results = agg.results(cfg.Engines, BaselineEngine)
	if interrupted != nil {
		// The workloads that finished every run are kept: an hour of
		// results is not thrown away by a Ctrl-C during the last one.
		rep.Config.Workloads = rep.Config.Workloads[:finished]
		rep.Notes = append(rep.Notes, fmt.Sprintf("interrupted: %d of %d workloads finished; the rest were not run", finished, len(wls)))
		rep.Elapsed = time.Since(rep.Started)
		return rep, &InterruptedError{Finished: finished, Total: len(wls), Err: interrupted}
	}
	rep.Elapsed = time.Since(rep.Started)
	if rss, ok := PeakRSS(); ok {
		rep.PeakRSS = rss
	}
	return rep, nil
}

// InterruptedError is Run's error when its context ended before every
// workload finished; Run then also returns a report of the workloads that
// did.
type InterruptedError struct {
	Finished, Total int   // workloads finished, and selected
	Err             error // the context's error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted after %d of %d workloads: %v", e.Finished, e.Total, e.Err)
}

// Unwrap returns the context's error.
func (e *InterruptedError) Unwrap() error { return e.Err }

// runOne runs workload w once on engine e in a directory of its own, which
// it removes afterwards: a full run leaves several GiB behind otherwise.
func runOne(ctx context.Context, cfg *Config, w Workload, e Engine, run int, base string) (*recorder, error) {
	dir, err := os.MkdirTemp(base, w.Name+"-"+e.Name()+"-")
	if err != nil {
		return nil, err
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
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
		return slices.DeleteFunc(all, func(w Workload) bool { return w.OnlyWhenNamed }), nil
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

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Better says which direction of a figure is an improvement, so a ratio can
// be labelled without the reader knowing every figure.
type Better string

// Directions of improvement.
const (
	Lower  Better = "lower"
	Higher Better = "higher"
	// Neither marks informational figures (keys loaded, commits made).
	Neither Better = ""
)

// Result is one row of a report: one figure of one workload on one engine,
// aggregated over all runs.
type Result struct {
	Workload string `json:"workload"`
	Engine   string `json:"engine"`
	Figure   string `json:"figure"`
	Unit     Unit   `json:"unit"`
	Better   Better `json:"better,omitempty"`
	// Median is the median over runs for a scalar figure, and over all
	// samples of all runs for a distribution.
	Median float64 `json:"median"`
	// P99 is set for distributions (latencies) only.
	P99 float64 `json:"p99,omitempty"`
	// Min and Max bound the per-run values of a scalar figure and the
	// samples of a distribution; their distance is the spread shown for
	// scalars when there was more than one run.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Runs is how many runs produced the figure; Samples how many samples a
	// distribution has (0 for scalars).
	Runs    int `json:"runs"`
	Samples int `json:"samples,omitempty"`
	// Ratio is Median divided by the baseline engine's (bbolt's) median of
	// the same figure; 0 when it could not be computed (no baseline in the
	// run, baseline zero, or this is the baseline).
	Ratio float64 `json:"ratio,omitempty"`
}

// IsDistribution reports whether the row summarises latency samples.
func (r Result) IsDistribution() bool { return r.Samples > 0 }

// Host describes where a report was produced: ratios travel between
// machines, absolute figures do not.
type Host struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	Dir       string `json:"dir"`
}

// Report is the outcome of Run.
type Report struct {
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Host     Host          `json:"host"`
	Config   Config        `json:"config"`
	Results  []Result      `json:"results"`
	Baseline string        `json:"baseline"`
	// PeakRSS is the process's peak resident set size over the whole
	// report, in bytes; 0 where the OS does not report it.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
	// Notes explain figures that are missing or need care in reading.
	Notes []string `json:"notes,omitempty"`
}

// recorder collects the figures of one workload run on one engine.
type recorder struct {
	figures []figure
	notes   []string
}

type figure struct {
	name    string
	unit    Unit
	better  Better
	value   float64   // scalar
	samples []float64 // distribution, when non-nil
}

func (r *recorder) scalar(name string, u Unit, b Better, v float64) {
	r.figures = append(r.figures, figure{name: name, unit: u, better: b, value: v})
}

func (r *recorder) latencies(name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	r.figures = append(r.figures, figure{name: name, unit: UnitDuration, better: Lower, samples: durationsToFloat(ds)})
}

// aggregator merges the recorders of all runs into Results, keeping the
// order in which workloads, figures and engines first appeared: that order
// is the order the workload author chose to tell the story in.
type aggregator struct {
	rows  []*accum
	index map[[3]string]*accum
}

type accum struct {
	workload, engine string
	fig              figure
	values           []float64 // per-run scalars
	samples          []float64 // pooled distribution samples
	runs             int
}

func (a *aggregator) add(workload, engine string, rec *recorder) {
	if a.index == nil {
		a.index = map[[3]string]*accum{}
	}
	for _, f := range rec.figures {
		key := [3]string{workload, engine, f.name}
		acc := a.index[key]
		if acc == nil {
			acc = &accum{workload: workload, engine: engine, fig: f}
			a.index[key] = acc
			a.rows = append(a.rows, acc)
		}
		acc.runs++
		if f.samples != nil {
			acc.samples = append(acc.samples, f.samples...)
		} else {
			acc.values = append(acc.values, f.value)
		}
	}
}

// results turns the accumulated figures into rows grouped by workload, then
// figure, then engine in the order given, with ratios to baseline.
func (a *aggregator) results(engines []string, baseline string) []Result {
	var out []Result
	type fkey struct{ workload, figure string }
	var order []fkey
	byFig := map[fkey][]*accum{}
	for _, acc := range a.rows {
		k := fkey{acc.workload, acc.fig.name}
		if _, ok := byFig[k]; !ok {
			order = append(order, k)
		}
		byFig[k] = append(byFig[k], acc)
	}
	// Keep each workload's figures together even if a later run of another
	// engine introduced a figure the first did not have.
	rank := map[string]int{}
	for _, k := range order {
		if _, ok := rank[k.workload]; !ok {
			rank[k.workload] = len(rank)
		}
	}
	slices.SortStableFunc(order, func(x, y fkey) int { return rank[x.workload] - rank[y.workload] })
	for _, k := range order {
		accs := byFig[k]
		slices.SortStableFunc(accs, func(x, y *accum) int {
			return slices.Index(engines, x.engine) - slices.Index(engines, y.engine)
		})
		var base *Result
		var group []Result
		for _, acc := range accs {
			r := Result{Workload: acc.workload, Engine: acc.engine, Figure: acc.fig.name,
				Unit: acc.fig.unit, Better: acc.fig.better, Runs: acc.runs}
			xs := acc.values
			if acc.samples != nil {
				xs = acc.samples
				r.Samples = len(xs)
				r.P99 = Percentile(xs, 99)
			}
			r.Median = Median(xs)
			r.Min, r.Max = slices.Min(xs), slices.Max(xs)
			group = append(group, r)
		}
		for i := range group {
			if group[i].Engine == baseline {
				base = &group[i]
			}
		}
		for i := range group {
			if base != nil && group[i].Engine != baseline && base.Median != 0 {
				if q := group[i].Median / base.Median; !math.IsNaN(q) && !math.IsInf(q, 0) {
					group[i].Ratio = q
				}
			}
		}
		out = append(out, group...)
	}
	return out
}

// spread renders the p99 of a distribution or the run-to-run spread of a
// scalar (half the min–max range relative to the median).
func (r Result) spread() string {
	if r.IsDistribution() {
		return "p99 " + r.Unit.Format(r.P99)
	}
	if r.Runs < 2 || r.Median == 0 {
		return "-"
	}
	return fmt.Sprintf("±%.1f%%", 100*(r.Max-r.Min)/2/math.Abs(r.Median))
}

// ratio renders Ratio with its reading: "(better)" or "(worse)" when the
// figure has a direction and the engines differ by more than 2%, which is
// below what one run on a shared machine can resolve.
func (r Result) ratio() string {
	if r.Ratio == 0 {
		return ""
	}
	s := fmt.Sprintf("%.3g×", r.Ratio)
	const noise = 0.02
	switch {
	case r.Better == Neither || math.Abs(r.Ratio-1) <= noise:
	case (r.Ratio < 1) == (r.Better == Lower):
		s += " better"
	default:
		s += " worse"
	}
	return s
}

// TableHeader is the column header line of WriteTable's output; tests and
// scripts look for it. The last column appears only when some row has a
// ratio to the baseline.
var TableHeader = []string{"WORKLOAD", "FIGURE", "ENGINE", "MEDIAN", "P99/SPREAD", "VS BBOLT"}

// WriteTable prints the report for people: a header naming the machine and
// sizes, then one aligned row per result.
func (rep *Report) WriteTable(w io.Writer) error {
	c := rep.Config
	fmt.Fprintf(w, "rivet bench: %s/%s, %d CPUs, %s, dir %s\n", rep.Host.OS, rep.Host.Arch, rep.Host.CPUs, rep.Host.GoVersion, rep.Host.Dir)
	fmt.Fprintf(w, "size %s, keys %d, reads %d, commits %d, duration %s, runs %d; took %s\n\n",
		c.Size, c.Keys, c.Reads, c.Commits, c.Duration, c.Runs, rep.Elapsed.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := slices.Clone(TableHeader)
	header[len(header)-1] = "VS " + strings.ToUpper(rep.Baseline)
	// Without a baseline in the run the ratio column would be empty.
	withRatio := slices.ContainsFunc(rep.Results, func(r Result) bool { return r.Ratio != 0 })
	if !withRatio {
		header = header[:len(header)-1]
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	prevW, prevF := "", ""
	for _, r := range rep.Results {
		wl, fig := r.Workload, r.Figure
		if wl == prevW {
			wl = ""
			if fig == prevF {
				fig = ""
			}
		}
		prevW, prevF = r.Workload, r.Figure
		row := []string{wl, fig, r.Engine, r.Unit.Format(r.Median), r.spread()}
		if withRatio {
			row = append(row, r.ratio())
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.PeakRSS > 0 {
		fmt.Fprintf(w, "\npeak RSS of the whole process: %s\n", formatBytes(float64(rep.PeakRSS)))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// WriteJSON writes the report as indented JSON for scripts and for keeping
// results next to the commit that produced them.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// ReadReport decodes the JSON report (as written with --json) at path.
func ReadReport(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r Report
	if err := json.NewDecoder(f).Decode(&r); err != nil {
		return nil, fmt.Errorf("reading report %s: %w", path, err)
	}
	return &r, nil
}

// Command targets reads rivet-bench JSON reports and prints rivet's
// performance targets as a Markdown table: each target's figure for rivet and for the
// engine it is compared with, their ratio, and MET or MISSED. Reports are
// merged (a later report's row replaces an earlier one's), so the full run
// may be made in parts:
//
//	go -C bench run ./cmd/rivet-bench --preset full --json > full.json
//	go -C bench run ./cmd/targets full.json [more.json ...]
//
// The ratios are computed from the medians in the reports; nothing is
// re-measured here.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rivetkv/rivet/bench"
)

// target is one line of the target list.
type target struct {
	name     string
	workload string
	figure   string
	// against is the engine rivet is compared with.
	against string
	// limit bounds the ratio rivet/against: at most limit when atMost,
	// else at least limit.
	limit  float64
	atMost bool
}

var targets = []target{
	{"fragmented bytes/commit (wchar) ≤ 1/100 of bbolt", "fragmented", "wchar/commit", "bbolt", 0.01, true},
	{"fragmented bytes/commit (storage write_bytes) ≤ 1/100 of bbolt", "fragmented", "write_bytes/commit", "bbolt", 0.01, true},
	{"fragmented bytes/commit (wchar) ≤ 1.5× bbolt-NoFreelistSync", "fragmented", "wchar/commit", "bbolt-nofreelistsync", 1.5, true},
	{"fragmented commit latency ≤ 0.5×", "fragmented", "commit latency", "bbolt", 0.5, true},
	{"Open of the fragmented file ≤ 1/20 of bbolt-NoFreelistSync", "fragmented", "open", "bbolt-nofreelistsync", 0.05, true},
	{"durable one-key commit latency ≤ 0.6×", "durable-writes", "commit latency", "bbolt", 0.6, true},
	{"random Gets/s, 1 goroutine ≥ 0.9×", "random-reads", "gets/s, 1 goroutine(s)", "bbolt", 0.9, false},
	{"random Gets/s, 2 goroutines ≥ 0.9×", "random-reads", "gets/s, 2 goroutine(s)", "bbolt", 0.9, false},
	{"10-key range scans/s ≥ 0.9×", "random-reads", "10-key scans/s", "bbolt", 0.9, false},
	{"bulk load, sequential, 1000-key txns ≥ 1.0×", "bulk-load", "sequential keys/s", "bbolt", 1, false},
	{"bulk load, random, 1000-key txns ≥ 1.0×", "bulk-load", "random keys/s", "bbolt", 1, false},
	{"bulk load, sequential, one txn ≥ 1.0×", "bulk-load", "sequential one-txn keys/s", "bbolt", 1, false},
	{"bulk load, random, one txn ≥ 1.0×", "bulk-load", "random one-txn keys/s", "bbolt", 1, false},
	{"memory on the fragmented file (peak RSS) ≤ 0.5×", "memory", "peak RSS", "bbolt", 0.5, true},
}

type key struct{ workload, engine, figure string }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: targets report.json [report.json ...]")
		os.Exit(2)
	}
	rows := map[key]bench.Result{}
	var cfgs []string
	for _, path := range os.Args[1:] {
		r, err := bench.ReadReport(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cfgs = append(cfgs, fmt.Sprintf("%s: size %s, keys %d, runs %d, started %s", path, r.Config.Size, r.Config.Keys, r.Config.Runs, r.Started.Format(time.DateTime)))
		for _, res := range r.Results {
			rows[key{res.Workload, res.Engine, res.Figure}] = res
		}
	}
	writeTable(os.Stdout, rows, cfgs)
}

func writeTable(w io.Writer, rows map[key]bench.Result, cfgs []string) {
	for _, c := range cfgs {
		fmt.Fprintf(w, "<!-- %s -->\n", c)
	}
	fmt.Fprintln(w, "| target | rivet | compared with | ratio | runs | status |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
	for _, t := range targets {
		r, ok1 := rows[key{t.workload, "rivet", t.figure}]
		o, ok2 := rows[key{t.workload, t.against, t.figure}]
		if !ok1 || !ok2 || o.Median == 0 {
			fmt.Fprintf(w, "| %s | — | — | — | — | not measured |\n", t.name)
			continue
		}
		ratio := r.Median / o.Median
		met := ratio >= t.limit
		if t.atMost {
			met = ratio <= t.limit
		}
		status := "MISSED"
		if met {
			status = "MET"
		}
		fmt.Fprintf(w, "| %s | %s | %s: %s | %s | %d | %s |\n", t.name, format(r), t.against, format(o), formatRatio(ratio), min(r.Runs, o.Runs), status)
	}
	writeOpenScaling(w, rows)
}

// writeOpenScaling adds the "flat from 16 MiB to 4 GiB" target: rivet's
// Open on the fragmented files of every size open-scaling measured, and the
// largest over the smallest.
func writeOpenScaling(w io.Writer, rows map[key]bench.Result) {
	type point struct {
		size  string
		bytes float64
		open  bench.Result
		pages float64
	}
	var pts []point
	for k, res := range rows {
		if k.workload != "open-scaling" || k.engine != "rivet" || !strings.HasPrefix(k.figure, "open, ") || !strings.HasSuffix(k.figure, " fragmented") {
			continue
		}
		label := strings.TrimSuffix(strings.TrimPrefix(k.figure, "open, "), " fragmented")
		fs := rows[key{"open-scaling", "rivet", "file size, " + label + " fragmented"}]
		pr := rows[key{"open-scaling", "rivet", "pages read at open, " + label + " fragmented"}]
		pts = append(pts, point{label, fs.Median, res, pr.Median})
	}
	if len(pts) < 2 {
		fmt.Fprintln(w, "| rivet Open flat across file sizes (fragmented) | — | — | — | — | not measured |")
		return
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].bytes < pts[j].bytes })
	var figs []string
	for _, p := range pts {
		figs = append(figs, fmt.Sprintf("%s: %s, %.0f pages", p.size, format(p.open), p.pages))
	}
	first, last := pts[0], pts[len(pts)-1]
	ratio := last.open.Median / first.open.Median
	// "Flat": the largest file opens within 2x of the smallest and reads
	// no more pages.
	status := "MISSED"
	if ratio <= 2 && last.pages <= first.pages {
		status = "MET"
	}
	fmt.Fprintf(w, "| rivet Open flat from %s to %s (fragmented; ≤ 2× and no more pages) | %s | | %s | %d | %s |\n",
		first.size, last.size, strings.Join(figs, "; "), formatRatio(ratio), last.open.Runs, status)
}

func formatRatio(r float64) string {
	if r < 0.1 {
		return fmt.Sprintf("%.4f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func format(r bench.Result) string {
	v := r.Median
	switch r.Unit {
	case bench.UnitBytes:
		switch {
		case v >= 1<<20:
			return fmt.Sprintf("%.2f MiB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.1f KiB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f B", v)
	case bench.UnitDuration:
		return time.Duration(v).Round(time.Microsecond).String()
	case bench.UnitRate:
		if v >= 1000 {
			return fmt.Sprintf("%.1fk/s", v/1000)
		}
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.3g", v)
}

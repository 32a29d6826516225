// Command chart draws the fragmented and open-scaling results of a bench
// JSON report as two SVG bar charts (standard library only):
//
//	go -C bench run ./cmd/rivet-bench --preset demo --json > report.json
//	go -C bench run ./cmd/chart -in report.json -out ../docs
//
// writes bench-fragmented.svg (bytes per commit, commit latency and Open
// time on the fragmented file) and bench-open.svg (Open time by file size,
// plain and fragmented). Each panel has its own linear scale starting at
// zero, and every bar is labelled with its value, so no figure depends on
// reading the axis.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rivetkv/rivet/bench"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	in := fs.String("in", "", "bench JSON report, or several separated by commas whose results are merged (default stdin)")
	out := fs.String("out", ".", "directory for bench-fragmented.svg and bench-open.svg")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rep bench.Report
	if *in == "" {
		if err := json.NewDecoder(os.Stdin).Decode(&rep); err != nil {
			return fmt.Errorf("reading report: %w", err)
		}
	} else {
		// A full run may be made in parts (one report per workload);
		// their results are merged, the first report giving the rest.
		for i, path := range strings.Split(*in, ",") {
			part, err := bench.ReadReport(path)
			if err != nil {
				return err
			}
			if i == 0 {
				rep = *part
			} else {
				rep.Results = append(rep.Results, part.Results...)
			}
		}
	}
	charts := map[string][]panel{
		"bench-fragmented.svg": fragmentedPanels(&rep),
		"bench-open.svg":       openPanels(&rep),
	}
	for name, panels := range charts {
		if len(panels) == 0 {
			return fmt.Errorf("%s: the report has no rows for it", name)
		}
		title := "rivet vs bbolt: fragmented file (" + rep.Config.Size.String() + " grown, all but 100 keys deleted)"
		if name == "bench-open.svg" {
			title = "Open time by file size (median of 5 opens)"
		}
		svg := render(title, subtitle(&rep), panels)
		if err := os.WriteFile(filepath.Join(*out, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// subtitle names the machine and the runs: absolute figures only mean
// something next to them.
func subtitle(rep *bench.Report) string {
	return fmt.Sprintf("%s/%s, %d CPUs, %s; preset sizes: %s, %d run(s); bars are medians",
		rep.Host.OS, rep.Host.Arch, rep.Host.CPUs, rep.Host.GoVersion, rep.Config.Size, rep.Config.Runs)
}

// bar is one engine's value; group a labelled set of bars; panel a titled
// set of groups sharing one scale.
type bar struct {
	engine string
	value  float64
	unit   bench.Unit
}

type group struct {
	label string
	bars  []bar
}

type panel struct {
	title  string
	groups []group
}

// rows returns the rows of one figure in the report's engine order.
func rows(rep *bench.Report, workload, figure string) []bar {
	var out []bar
	for _, r := range rep.Results {
		if r.Workload == workload && r.Figure == figure {
			out = append(out, bar{engine: r.Engine, value: r.Median, unit: r.Unit})
		}
	}
	return out
}

func fragmentedPanels(rep *bench.Report) []panel {
	var ps []panel
	for _, f := range []struct{ title, figure string }{
		{"bytes handed to write() per one-key commit (wchar)", "wchar/commit"},
		{"commit latency (median)", "commit latency"},
		{"Open on the fragmented file (median)", "open"},
	} {
		if bs := rows(rep, "fragmented", f.figure); len(bs) > 0 {
			ps = append(ps, panel{title: f.title, groups: []group{{bars: bs}}})
		}
	}
	return ps
}

func openPanels(rep *bench.Report) []panel {
	var ps []panel
	for _, state := range []string{"plain", "fragmented"} {
		p := panel{title: "Open, " + state + " file"}
		for _, z := range rep.Config.OpenSizes {
			if bs := rows(rep, "open-scaling", fmt.Sprintf("open, %s %s", z, state)); len(bs) > 0 {
				p.groups = append(p.groups, group{label: z.String(), bars: bs})
			}
		}
		if len(p.groups) > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// Layout, in pixels.
const (
	width     = 860
	labelW    = 190 // engine names
	groupW    = 70  // group labels
	barH      = 16
	barGap    = 4
	groupGap  = 10
	panelHead = 34
	panelGap  = 18
	valueW    = 90 // room right of the longest bar for its label
)

// palette gives each engine a fixed colour across panels and charts.
var palette = []string{"#1b7837", "#2166ac", "#92c5de", "#b2182b", "#8073ac", "#e08214"}

func render(title, sub string, panels []panel) string {
	var engines []string
	for _, p := range panels {
		for _, g := range p.groups {
			for _, b := range g.bars {
				if !slices.Contains(engines, b.engine) {
					engines = append(engines, b.engine)
				}
			}
		}
	}
	colour := func(e string) string { return palette[slices.Index(engines, e)%len(palette)] }

	var body strings.Builder
	y := 64
	for _, p := range panels {
		fmt.Fprintf(&body, `<text x="16" y="%d" class="panel">%s</text>`+"\n", y+18, html.EscapeString(p.title))
		y += panelHead
		maxV := 0.0
		for _, g := range p.groups {
			for _, b := range g.bars {
				maxV = max(maxV, b.value)
			}
		}
		x0 := 16 + groupW + labelW
		span := float64(width - x0 - valueW)
		for _, g := range p.groups {
			if g.label != "" {
				fmt.Fprintf(&body, `<text x="16" y="%d" class="group">%s</text>`+"\n", y+barH-3, html.EscapeString(g.label))
			}
			for _, b := range g.bars {
				w := 0.0
				if maxV > 0 {
					w = span * b.value / maxV
				}
				fmt.Fprintf(&body, `<text x="%d" y="%d" class="engine" text-anchor="end">%s</text>`+"\n", x0-6, y+barH-3, html.EscapeString(b.engine))
				fmt.Fprintf(&body, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y, max(w, 1), barH, colour(b.engine))
				fmt.Fprintf(&body, `<text x="%.1f" y="%d" class="value">%s</text>`+"\n", float64(x0)+max(w, 1)+5, y+barH-3, html.EscapeString(b.unit.Format(b.value)))
				y += barH + barGap
			}
			y += groupGap
		}
		y += panelGap
	}
	var svg strings.Builder
	fmt.Fprintf(&svg, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, y, width, y)
	svg.WriteString(`<style>
text { font-family: sans-serif; font-size: 12px; fill: #222; }
.title { font-size: 16px; font-weight: bold; }
.sub { fill: #555; }
.panel { font-size: 13px; font-weight: bold; }
.group { fill: #444; }
.value { fill: #333; }
</style>
`)
	fmt.Fprintf(&svg, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, y)
	fmt.Fprintf(&svg, `<text x="16" y="24" class="title">%s</text>`+"\n", html.EscapeString(title))
	fmt.Fprintf(&svg, `<text x="16" y="44" class="sub">%s</text>`+"\n", html.EscapeString(sub))
	svg.WriteString(body.String())
	svg.WriteString("</svg>\n")
	return svg.String()
}

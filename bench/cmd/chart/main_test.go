package main

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet/bench"
)

func TestCharts(t *testing.T) {
	rep := bench.Report{Config: bench.Config{Size: 2 << 20, Runs: 1, OpenSizes: []bench.Size{1 << 20, 4 << 20}}}
	add := func(w, f string, u bench.Unit, vals ...float64) {
		for i, e := range []string{"rivet", "bbolt"} {
			rep.Results = append(rep.Results, bench.Result{Workload: w, Figure: f, Engine: e, Unit: u, Median: vals[i]})
		}
	}
	add("fragmented", "wchar/commit", bench.UnitBytes, 20<<10, 500<<10)
	add("fragmented", "commit latency", bench.UnitDuration, 1e5, 1e6)
	add("fragmented", "open", bench.UnitDuration, 1e5, 5e6)
	for _, z := range rep.Config.OpenSizes {
		add("open-scaling", "open, "+z.String()+" plain", bench.UnitDuration, 1e5, 2e5)
		add("open-scaling", "open, "+z.String()+" fragmented", bench.UnitDuration, 1e5, 3e5)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "r.json")
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-in", in, "-out", dir}); err != nil {
		t.Fatal(err)
	}
	for name, wantBars := range map[string]int{"bench-fragmented.svg": 6, "bench-open.svg": 8} {
		svg, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// Well-formed XML, one rect per bar plus the background.
		dec := xml.NewDecoder(strings.NewReader(string(svg)))
		rects := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
				rects++
			}
		}
		if rects != wantBars+1 {
			t.Errorf("%s: %d rects, want %d bars + background", name, rects, wantBars)
		}
		// The longest bar of a panel is bbolt's 500 KiB; its label is there.
		if name == "bench-fragmented.svg" && !strings.Contains(string(svg), "500 KiB") {
			t.Errorf("%s lacks the value labels", name)
		}
	}
	// A report without the rows is an error, not an empty chart.
	empty := filepath.Join(dir, "e.json")
	_ = os.WriteFile(empty, []byte(`{"results":[]}`), 0o600)
	if err := run([]string{"-in", empty, "-out", dir}); err == nil {
		t.Error("empty report accepted")
	}
}

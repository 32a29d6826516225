package main

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"os"
	"sort"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
	"github.com/spf13/cobra"
)

func init() { registerCommand(newMapCmd) }

// maxMapCells bounds the cells of a map: past it, each cell stands for a
// group of pages. At 256 cells a row and at most ~60 bytes a cell the SVG
// stays under about 4 MB however large the file is.
const maxMapCells = 65536

// maxTitledRects is the most cell rectangles that get a tooltip (<title>):
// past it the tooltips would double the SVG's size.
const maxTitledRects = 16384

// The fixed categories a map colours pages by; top-level buckets follow.
const (
	catMeta = iota
	catRoot
	catFree
	catSlack
	catUnreachable
	catDamaged
	catUnknown
	catOther // buckets past the palette
	catBuckets
)

// fixedCats names and colours the fixed categories.
var fixedCats = [catBuckets]struct{ name, color string }{
	catMeta:        {"metas and region maps", "#404040"},
	catRoot:        {"(root): top-level bucket records", "#8c564b"},
	catFree:        {"free", "#dcdcdc"},
	catSlack:       {"past the high-water mark (growth room)", "#f5f5f0"},
	catUnreachable: {"unreachable (neither reachable nor free)", "#d62728"},
	catDamaged:     {"damaged", "#000000"},
	catUnknown:     {"unknown (free map unreadable)", "#a0a0a0"},
	catOther:       {"other buckets", "#f7b6d2"},
}

// bucketPalette colours the largest top-level buckets, largest first; the
// rest share catOther's colour. No grey, red, black or brown: those are
// the fixed categories'.
var bucketPalette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#17becf", "#bcbd22",
	"#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#9edae5", "#dbdb8d"}

// pageMap is the picture of a file: one category per cell, and totals.
type pageMap struct {
	scan        *pageScan
	filePages   uint64
	perCell     uint64 // pages per cell
	cells       []int32
	catPages    []int64  // pages per category (fixed, then one per top-level bucket)
	bucketNames [][]byte // top-level bucket i is category catBuckets+i
	byName      map[string]int32
	display     []int32 // category -> the category whose colour it shows (buckets past the palette: catOther)
	colors      []string
	names       []string
	order       []int  // top-level buckets, largest first
	tailStart   uint64 // the first page of the free tail: after the last page of data (or inspect.MinPages)
	problems    int

	// the cell being filled, and its page counts per category
	cur    uint64
	counts map[int32]uint64
}

func newPageMap(s *pageScan) *pageMap {
	fp := max(s.filePages(), s.hwm)
	per := max(1, (fp+maxMapCells-1)/maxMapCells)
	return &pageMap{
		scan: s, filePages: fp, perCell: per,
		cells:    make([]int32, 0, (fp+per-1)/per),
		catPages: make([]int64, catBuckets),
		// The metas and region 0's map slots stay in any file.
		tailStart: min(inspect.MinPages, fp),
		byName:    map[string]int32{},
		counts:    map[int32]uint64{},
	}
}

// category returns the category of a use.
func (m *pageMap) category(u rivet.PageUse) int32 {
	switch u.Kind {
	case rivet.PageMeta, rivet.PageRegionMap:
		return catMeta
	case rivet.PageFree:
		return catFree
	case rivet.PageUnreachable:
		return catUnreachable
	case rivet.PageDamaged:
		return catDamaged
	case rivet.PageUnknown:
		return catUnknown
	}
	if len(u.Bucket) == 0 {
		return catRoot
	}
	name := u.Bucket[0]
	c, ok := m.byName[string(name)]
	if !ok {
		c = int32(catBuckets + len(m.bucketNames))
		m.byName[string(name)] = c
		m.bucketNames = append(m.bucketNames, name)
		m.catPages = append(m.catPages, 0)
	}
	return c
}

// add records pages [from, from+n) as category c. Calls come in page order.
func (m *pageMap) add(from, n uint64, c int32) {
	m.catPages[c] += int64(n)
	// Metas and region 0's map slots come first anyway; the map slots of
	// a later region go with it when a shrink drops the region, so they
	// do not hold the tail back.
	if c != catFree && c != catSlack && c != catMeta {
		m.tailStart = from + n
	}
	for n > 0 {
		cell := from / m.perCell
		for m.cur < cell {
			m.flush()
		}
		k := min(n, (cell+1)*m.perCell-from)
		m.counts[c] += k
		from += k
		n -= k
	}
}

// flush ends the current cell: its category is the one most of its pages
// have (ties: the lower category, so metadata and damage win).
func (m *pageMap) flush() {
	best, bestN := int32(catSlack), uint64(0)
	for c, n := range m.counts {
		if n > bestN || (n == bestN && c < best) {
			best, bestN = c, n
		}
	}
	m.cells = append(m.cells, best)
	clear(m.counts)
	m.cur++
}

// finish adds the pages past the high-water mark and closes the last cell,
// then assigns display colours: the palette to the largest buckets.
func (m *pageMap) finish() {
	if m.filePages > m.scan.hwm {
		m.add(m.scan.hwm, m.filePages-m.scan.hwm, catSlack)
	}
	for uint64(len(m.cells)) < (m.filePages+m.perCell-1)/m.perCell {
		m.flush()
	}
	m.display = make([]int32, len(m.catPages))
	for c := range m.display {
		m.display[c] = int32(c)
	}
	order := make([]int, len(m.bucketNames))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return m.catPages[catBuckets+order[a]] > m.catPages[catBuckets+order[b]] })
	m.colors = make([]string, len(m.catPages))
	m.names = make([]string, len(m.catPages))
	for c := 0; c < catBuckets; c++ {
		m.colors[c], m.names[c] = fixedCats[c].color, fixedCats[c].name
	}
	for rank, i := range order {
		c := catBuckets + i
		if rank >= len(bucketPalette) {
			m.display[c] = catOther
			m.catPages[catOther] += m.catPages[c]
			m.colors[c], m.names[c] = fixedCats[catOther].color, fixedCats[catOther].name
			continue
		}
		m.colors[c], m.names[c] = bucketPalette[rank], "bucket "+formatBytes(m.bucketNames[i], fmtAuto)
	}
	m.order = order
}

// legendEntry is one line of a map's legend.
type legendEntry struct {
	Color string
	Name  string
	Pages int64
	Bytes string
	Share string
}

// legend lists the categories shown, the coloured buckets largest first,
// then the fixed ones; categories with no page are left out.
func (m *pageMap) legend() []legendEntry {
	ps := int64(m.scan.pageSize)
	entry := func(c int32, name, color string) legendEntry {
		n := m.catPages[c]
		return legendEntry{Color: color, Name: name, Pages: n, Bytes: sizeString(n * ps), Share: percent(float64(n), float64(m.filePages))}
	}
	var out []legendEntry
	for c := int32(0); c < catBuckets; c++ {
		if m.catPages[c] > 0 {
			out = append(out, entry(c, fixedCats[c].name, fixedCats[c].color))
		}
	}
	var buckets []legendEntry
	for rank, i := range m.order {
		if rank >= len(bucketPalette) {
			break
		}
		c := int32(catBuckets + i)
		buckets = append(buckets, entry(c, m.names[c], m.colors[c]))
	}
	return append(buckets, out...)
}

// xmlEscape returns s escaped for XML text and attributes (invalid
// characters become U+FFFD).
func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// mapTotals are the figures a map reports.
type mapTotals struct {
	FileSize, FreeBytes, SlackBytes, TailBytes int64
	FreePct                                    string
	TailFrom                                   uint64
}

func (m *pageMap) totals() mapTotals {
	ps := int64(m.scan.pageSize)
	t := mapTotals{
		FileSize:   m.scan.fileSize,
		FreeBytes:  m.catPages[catFree] * ps,
		SlackBytes: m.catPages[catSlack] * ps,
		TailFrom:   m.tailStart,
	}
	t.TailBytes = max(0, m.scan.fileSize-int64(m.tailStart)*ps)
	free := m.catPages[catFree] + m.catPages[catSlack]
	pct := 100 * float64(free) / float64(max(1, m.filePages))
	t.FreePct = fmt.Sprintf("%.0f%%", pct)
	if t.FreePct == "100%" && uint64(free) < m.filePages {
		t.FreePct = fmt.Sprintf("%.1f%%", min(pct, 99.9)) // not all: say so
	}
	return t
}

// writeSVG draws the map: a header line, the grid of cells (one rectangle
// per row stretch of one colour), the reclaimable tail hatched over it,
// and the legend.
func (m *pageMap) writeSVG(w io.Writer) error {
	cells := len(m.cells)
	cols := 32
	switch {
	case cells > 16384:
		cols = 256
	case cells > 2048:
		cols = 128
	case cells > 256:
		cols = 64
	}
	px := min(16, 1024/cols)
	rows := (cells + cols - 1) / cols
	const margin, top = 10, 52
	legend := m.legend()
	gridH := rows * px
	width := max(2*margin+cols*px, 720)
	height := top + gridH + 30 + 20*len(legend) + margin
	bw := bufio.NewWriter(w)
	t := m.totals()
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12"`+
		` data-pages="%d" data-cells="%d" data-pages-per-cell="%d" data-cell-size="%d">`+"\n",
		width, height, width, height, m.filePages, cells, m.perCell, px)
	fmt.Fprintf(bw, "<title>rivet map of %s</title>\n", xmlEscape(m.scan.path))
	fmt.Fprintf(bw, `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`+
		`<line x1="0" y1="0" x2="0" y2="6" stroke="#000" stroke-width="2" stroke-opacity="0.5"/></pattern></defs>`+"\n")
	unit := "one page"
	if m.perCell > 1 {
		unit = fmt.Sprintf("%d pages (coloured by what most of them hold)", m.perCell)
	}
	fmt.Fprintf(bw, `<text x="%d" y="18" font-weight="bold">%s: %s, %d pages of %d bytes, transaction %d</text>`+"\n",
		margin, xmlEscape(m.scan.path), sizeString(m.scan.fileSize), m.filePages, m.scan.pageSize, m.scan.txid)
	fmt.Fprintf(bw, `<text x="%d" y="36">one cell = %s, in file order, left to right; %s free or growth room; hatched: the tail a compaction can give back (%s)</text>`+"\n",
		margin, xmlEscape(unit), t.FreePct, sizeString(t.TailBytes))

	// The cells, as stretches of one colour within a row.
	type stretch struct{ row, col, n int }
	var stretches []stretch
	var cats []int32
	for r := 0; r < rows; r++ {
		for c := 0; c < cols && r*cols+c < cells; {
			i := r*cols + c
			d := m.display[m.cells[i]]
			n := 1
			for c+n < cols && i+n < cells && m.display[m.cells[i+n]] == d {
				n++
			}
			stretches = append(stretches, stretch{r, c, n})
			cats = append(cats, m.cells[i])
			c += n
		}
	}
	titled := len(stretches) <= maxTitledRects
	fmt.Fprintf(bw, `<g id="cells" transform="translate(%d,%d)">`+"\n", margin, top)
	for i, s := range stretches {
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"`, s.col*px, s.row*px, s.n*px, px, m.colors[cats[i]])
		if titled {
			first := uint64(s.row*cols+s.col) * m.perCell
			last := min(uint64(s.row*cols+s.col+s.n)*m.perCell, m.filePages) - 1
			fmt.Fprintf(bw, "><title>pages %d-%d: %s</title></rect>\n", first, last, xmlEscape(m.names[cats[i]]))
		} else {
			bw.WriteString("/>\n")
		}
	}
	bw.WriteString("</g>\n")

	// The tail: the cells wholly past the last page in use.
	tc := int((m.tailStart + m.perCell - 1) / m.perCell)
	fmt.Fprintf(bw, `<g id="tail" transform="translate(%d,%d)" fill="url(#hatch)">`+"\n", margin, top)
	if tc < cells {
		r, c := tc/cols, tc%cols
		if c > 0 {
			n := min(cols, cells-r*cols) - c
			fmt.Fprintf(bw, `<rect x="%d" y="%d" width="%d" height="%d"/>`+"\n", c*px, r*px, n*px, px)
			r++
		}
		if full := (cells - r*cols) / cols; full > 0 {
			fmt.Fprintf(bw, `<rect x="0" y="%d" width="%d" height="%d"/>`+"\n", r*px, cols*px, full*px)
			r += full
		}
		if rest := cells - r*cols; rest > 0 {
			fmt.Fprintf(bw, `<rect x="0" y="%d" width="%d" height="%d"/>`+"\n", r*px, rest*px, px)
		}
	}
	bw.WriteString("</g>\n")

	fmt.Fprintf(bw, `<g id="legend" transform="translate(%d,%d)">`+"\n", margin, top+gridH+20)
	for i, e := range legend {
		fmt.Fprintf(bw, `<g class="legend-entry" transform="translate(0,%d)"><rect width="14" height="14" fill="%s" stroke="#888"/>`+
			`<text x="20" y="12">%s: %d pages, %s (%s)</text></g>`+"\n", 20*i, e.Color, xmlEscape(e.Name), e.Pages, e.Bytes, e.Share)
	}
	fmt.Fprintf(bw, `<g class="legend-note" transform="translate(0,%d)"><rect width="14" height="14" fill="url(#hatch)" stroke="#888"/>`+
		`<text x="20" y="12">reclaimable tail: %s from page %d to the end of the file</text></g>`+"\n", 20*len(legend), sizeString(t.TailBytes), t.TailFrom)
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
}

// mapHTML is the page `rivet map --html` writes.
var mapHTML = template.Must(template.New("map").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rivet map of {{.Path}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { padding: 2px 10px; text-align: right; }
td.name, th.name { text-align: left; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #888; vertical-align: middle; }
</style>
</head>
<body>
<h1>{{.Path}}</h1>
<p>{{.Size}} on disk: {{.Pages}} pages of {{.PageSize}} bytes, transaction {{.Txid}}.
Each cell of the picture is {{.PerCell}} page{{if ne .PerCell 1}}s{{end}}, in file order;
the hatched cells are the tail past the last page in use, which compaction gives back.</p>
{{.SVG}}
<h2>Where the bytes are</h2>
<table>
<tr><th class="name">what</th><th>pages</th><th>bytes</th><th>of the file</th></tr>
{{range .Legend}}<tr><td class="name"><span class="swatch" style="background: {{.Color}}"></span> {{.Name}}</td><td>{{.Pages}}</td><td>{{.Bytes}}</td><td>{{.Share}}</td></tr>
{{end}}</table>
<h2>Totals</h2>
<table>
<tr><td class="name">file size</td><td>{{.Size}}</td></tr>
<tr><td class="name">free pages inside the state</td><td>{{.Free}}</td></tr>
<tr><td class="name">growth room past the high-water mark</td><td>{{.Slack}}</td></tr>
<tr><td class="name">reclaimable tail (from page {{.TailFrom}})</td><td>{{.Tail}}</td></tr>
</table>
<p>Free pages below the tail are reused by later writes; <code>rivet compact</code> (or <code>DB.Compact</code>)
moves pages down so that they join the tail, and cuts it.</p>
</body>
</html>
`))

// writeHTML writes the map as an HTML page: the SVG inline, the legend as
// a table with bytes per bucket, and the totals.
func (m *pageMap) writeHTML(w io.Writer) error {
	var svg bytes.Buffer
	if err := m.writeSVG(&svg); err != nil {
		return err
	}
	t := m.totals()
	return mapHTML.Execute(w, map[string]any{
		"Path": m.scan.path, "Size": sizeString(m.scan.fileSize), "Pages": m.filePages, "PageSize": m.scan.pageSize,
		"Txid": m.scan.txid, "PerCell": m.perCell,
		// The SVG is built by writeSVG, which escapes every name it holds.
		"SVG":    template.HTML(svg.String()),
		"Legend": m.legend(),
		"Free":   sizeString(t.FreeBytes), "Slack": sizeString(t.SlackBytes), "Tail": sizeString(t.TailBytes), "TailFrom": t.TailFrom,
	})
}

func newMapCmd() *cobra.Command {
	var output string
	var asHTML bool
	cmd := &cobra.Command{
		Use:   "map FILE -o OUT",
		Short: "Draw a picture of a rivet file (SVG or HTML): pages per bucket, free space, the reclaimable tail",
		Long: `Draws FILE as an SVG picture — the answer to "why is my file this big?". One
cell per page, in file order (a large file gets one cell per group of pages,
coloured by what most of them hold, so the picture stays a few MB at most):
each top-level bucket in its own colour (the twelve largest; the rest share
one), the root's bucket records, metas and region maps, free pages, pages
past the high-water mark (room the file grew ahead of need), and, if any,
unreachable, damaged or unknown pages. The tail past the last page in use —
what compaction gives back — is hatched. A legend says what each colour is,
with pages, bytes and share of the file.

--html writes an HTML page instead: the picture inline, the legend as a
table of bytes per bucket, and the totals (free bytes, growth room, the
reclaimable tail). Prints one line: where it wrote, the pages, the share
free (free pages and growth room) and the reclaimable tail.

Opens FILE read-only and never writes to it; OUT is written (-o - writes
the picture to standard output and the line to standard error). Exits 1 if
some pages have a problem ("rivet pages" lists them); the picture is
written all the same.

` + bboltPagesNote,
		Example: `  rivet map app.db -o map.svg
  rivet map app.db --html -o map.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if output == "" {
				return usagef("-o OUT is required: the file to write the picture to (- for standard output)")
			}
			if output != "-" {
				if a, err := os.Stat(path); err == nil {
					if b, err := os.Stat(output); err == nil && os.SameFile(a, b) {
						return usagef("-o %s is the database file itself", output)
					}
				}
			}
			var m *pageMap
			err := withPages(path, cmd.ErrOrStderr(), func(s *pageScan, tx *rivet.Tx) error {
				m = newPageMap(s)
				stop := showWalkProgress(cmd.ErrOrStderr(), "reading "+path+"'s pages")
				defer stop()
				return tx.WalkPages(func(u rivet.PageUse) error {
					if u.Err != nil {
						m.problems++
					}
					m.add(uint64(u.ID), uint64(u.Pages), m.category(u))
					return nil
				})
			})
			if err != nil {
				return err
			}
			m.finish()
			write := m.writeSVG
			if asHTML {
				write = m.writeHTML
			}
			report := cmd.OutOrStdout()
			if output == "-" {
				if err := write(cmd.OutOrStdout()); err != nil {
					return err
				}
				report = cmd.ErrOrStderr()
			} else {
				f, err := os.Create(output)
				if err != nil {
					return err
				}
				if err := write(f); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			t := m.totals()
			fmt.Fprintf(report, "wrote %s: %s pages, %s free, tail of %s reclaimable\n", output, groupDigits(int64(m.filePages)), t.FreePct, sizeString(t.TailBytes))
			if m.problems > 0 {
				return fmt.Errorf("%s: %d run(s) of pages with a problem (see rivet pages %s)", path, m.problems, path)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "the file to write (- for standard output)")
	cmd.Flags().BoolVar(&asHTML, "html", false, "write an HTML page: the picture, a legend with bytes per bucket, and totals")
	return cmd
}

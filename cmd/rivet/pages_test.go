package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/bench"
)

// pagesFixture builds a rivet file of 4 KiB pages with a bucket "a" (a
// branch root over leaves, a nested bucket "n" with pages of its own, a
// large value "blob"), a bucket whose name is not text ("b\x01") with half
// its keys deleted, and an empty bucket "e"; it returns the path.
func pagesFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.rivet")
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *rivet.Tx) error {
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		for i := 0; i < 2000; i++ {
			if err := a.Put([]byte(fmt.Sprintf("key%05d", i)), bytes.Repeat([]byte{'v'}, 60)); err != nil {
				return err
			}
		}
		if err := a.Put([]byte("blob"), bytes.Repeat([]byte("L"), 40000)); err != nil {
			return err
		}
		n, err := a.CreateBucket([]byte("n"))
		if err != nil {
			return err
		}
		for i := 0; i < 100; i++ {
			if err := n.Put([]byte(fmt.Sprintf("n%03d", i)), bytes.Repeat([]byte{'n'}, 80)); err != nil {
				return err
			}
		}
		b, err := tx.CreateBucket([]byte("b\x01"))
		if err != nil {
			return err
		}
		for i := 0; i < 1000; i++ {
			if err := b.Put([]byte(fmt.Sprintf("b%05d", i)), bytes.Repeat([]byte{'b'}, 100)); err != nil {
				return err
			}
		}
		_, err = tx.CreateBucket([]byte("e"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *rivet.Tx) error {
		b := tx.Bucket([]byte("b\x01"))
		for i := 0; i < 1000; i++ {
			if i%4 != 0 {
				if err := b.Delete([]byte(fmt.Sprintf("b%05d", i))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// pagesJSON is the shape of `rivet pages --json`.
type pagesJSON struct {
	Path     string `json:"path"`
	FileSize int64  `json:"file_size"`
	PageSize int    `json:"page_size"`
	HWM      uint64 `json:"high_water_mark"`
	Runs     []struct {
		ID        uint64   `json:"id"`
		Pages     int      `json:"pages"`
		Kind      string   `json:"kind"`
		Txid      uint64   `json:"txid"`
		Checksum  string   `json:"checksum"`
		Bucket    []string `json:"bucket"`
		BucketHex []string `json:"bucket_hex"`
		Depth     int      `json:"depth"`
		Key       string   `json:"key"`
		Current   bool     `json:"current"`
		Problem   string   `json:"problem"`
	} `json:"runs"`
	Totals map[string]struct {
		Runs  int64 `json:"runs"`
		Pages int64 `json:"pages"`
	} `json:"totals"`
	Problems int `json:"problems"`
}

func readPagesJSON(t *testing.T, path string) pagesJSON {
	t.Helper()
	out, errOut, code := runBin(t, "pages", "--json", path)
	wantCode(t, code, 0, out, errOut)
	var p pagesJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("pages --json is not JSON: %v\n%s", err, out)
	}
	return p
}

// oneErrorLine fails unless stderr is one line (the "rivet: ..." error)
// and nothing looks like a stack trace.
func oneErrorLine(t *testing.T, stdout, stderr string) {
	t.Helper()
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "rivet: ") {
		t.Errorf("want one error line, got:\n%s", stderr)
	}
	if strings.Contains(stdout+stderr, "goroutine ") || strings.Contains(stdout+stderr, ".go:") {
		t.Errorf("stack trace printed:\n%s%s", stdout, stderr)
	}
}

// TestPagesCommand: `rivet pages` lists every page of the state once, in
// order, with kinds, owners and a summary, as text and as JSON; it leaves
// the file unchanged; on a damaged file it lists the damage and exits 1;
// on a bbolt file it says it reads rivet's format only.
func TestPagesCommand(t *testing.T) {
	path := pagesFixture(t)
	before := fileDigest(t, path)

	out, errOut, code := runBin(t, "pages", path)
	wantCode(t, code, 0, out, errOut)
	listing, summary, ok := strings.Cut(out, "\n\n")
	if !ok {
		t.Fatalf("no summary after the listing:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(listing), "\n")
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "ID PAGES KIND TXID CHECKSUM USE" {
		t.Fatalf("header %q", lines[0])
	}
	next := uint64(0)
	kinds := map[string]int{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		id, err1 := strconv.ParseUint(f[0], 10, 64)
		n, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil || id != next {
			t.Fatalf("line %q: want a run starting at page %d", line, next)
		}
		next += n
		kinds[f[2]] += int(n)
	}
	p := readPagesJSON(t, path)
	if next != p.HWM || p.HWM == 0 {
		t.Fatalf("text listing covers %d pages, the high-water mark is %d", next, p.HWM)
	}
	for _, want := range []string{"bucket a, value of blob", "bucket a/n, depth", "bucket 0x6201, depth", "(root): top-level bucket records",
		"meta, current", "region 0 map, current"} {
		if !strings.Contains(listing, want) {
			t.Errorf("listing lacks %q", want)
		}
	}
	for _, k := range []string{"meta", "regionmap", "branch", "leaf", "blob", "free"} {
		if kinds[k] == 0 {
			t.Errorf("no %s pages listed: %v", k, kinds)
		}
	}
	for _, k := range []string{"unreachable", "damaged", "unknown"} {
		if kinds[k] != 0 {
			t.Errorf("healthy file lists %d %s pages", kinds[k], k)
		}
	}
	if !strings.Contains(summary, fmt.Sprintf("free: %d pages", kinds["free"])) || !strings.Contains(summary, "pages: meta 2, regionmap 2,") {
		t.Errorf("summary:\n%s", summary)
	}

	// JSON: the same runs, and the non-text bucket name as hex.
	var covered uint64
	sawHex := false
	for _, r := range p.Runs {
		if r.ID != covered {
			t.Fatalf("JSON run %+v: want one at page %d", r, covered)
		}
		covered += uint64(r.Pages)
		if len(r.BucketHex) == 1 && r.BucketHex[0] == "6201" {
			sawHex = true
		}
		if r.Kind == "blob" && (r.Key != "blob" || len(r.Bucket) != 1 || r.Bucket[0] != "a" || r.Checksum != "ok") {
			t.Errorf("blob run %+v", r)
		}
	}
	if covered != p.HWM || !sawHex || p.Problems != 0 || p.Totals["free"].Pages != int64(kinds["free"]) || p.PageSize != 4096 {
		t.Errorf("JSON: covered %d of %d, hex bucket %t, problems %d, free %d (text %d)", covered, p.HWM, sawHex, p.Problems, p.Totals["free"].Pages, kinds["free"])
	}
	if fileDigest(t, path) != before {
		t.Fatal("pages changed the file")
	}

	// Damage: a leaf's header names another transaction.
	flipLeafByte(t, path)
	out, errOut, code = runBin(t, "pages", path)
	wantCode(t, code, 1, out, errOut)
	oneErrorLine(t, out, errOut)
	if !strings.Contains(out, " damaged ") || !strings.Contains(out, "problem: rivet: corrupt page") || !strings.Contains(errOut, "with a problem") {
		t.Errorf("damaged file:\n%s%s", out, errOut)
	}
	if !strings.Contains(out, "\n\n") {
		t.Error("the listing of a damaged file stops before its summary")
	}

	// A bbolt file: rivet's format only, exit 1, one line.
	bpath := makeDB(t, bench.BaselineEngine)
	for _, args := range [][]string{{"pages", bpath}, {"page", bpath, "2"}, {"map", bpath, "-o", filepath.Join(t.TempDir(), "x.svg")}} {
		out, errOut, code = runBin(t, args...)
		wantCode(t, code, 1, out, errOut)
		oneErrorLine(t, out, errOut)
		if !strings.Contains(errOut, "is a bbolt file: this command reads rivet's format") {
			t.Errorf("%v on a bbolt file: %s", args, errOut)
		}
	}

	out, errOut, code = runBin(t, "pages")
	wantCode(t, code, 2, out, errOut)
}

// TestPageCommand: `rivet page` decodes metas, map slots, branches, leaves
// and blobs, with --format and --raw; bad IDs are command-line errors.
func TestPageCommand(t *testing.T) {
	path := pagesFixture(t)
	before := fileDigest(t, path)
	p := readPagesJSON(t, path)
	first := map[string]uint64{}
	var blob, leafOfA uint64
	for _, r := range p.Runs {
		if _, ok := first[r.Kind]; !ok {
			first[r.Kind] = r.ID
		}
		if r.Kind == "blob" {
			blob = r.ID + 2 // inside the run
		}
		if r.Kind == "leaf" && len(r.Bucket) == 1 && r.Bucket[0] == "a" && leafOfA == 0 {
			leafOfA = r.ID
		}
	}
	id := func(n uint64) string { return strconv.FormatUint(n, 10) }

	out, errOut, code := runBin(t, "page", path, "0", "1", "2", id(first["branch"]), id(leafOfA), id(blob), id(first["free"]))
	wantCode(t, code, 0, out, errOut)
	for _, want := range []string{
		"page 0: meta", "page 1: meta", "hwm        " + id(p.HWM) + " pages", "root       page", "selector", "delta",
		"page 2: regionmap", "region     0 (pages 0-32511), slot A", "free       ",
		"page " + id(first["branch"]) + ": branch", "separator keys and children:", "-> page",
		"page " + id(leafOfA) + ": leaf", "key0", "value of 60 bytes",
		"page " + id(blob) + " (in the run of", "blob       40000 payload bytes", "payload    LLLL",
		"page " + id(first["free"]) + ": free", "not part of the state",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page output lacks %q:\n%s", want, out)
		}
	}
	// The root's leaf: bucket records, a nested one, an empty one.
	var rootLeaf uint64
	for _, r := range p.Runs {
		if r.Kind == "leaf" && r.Bucket != nil && len(r.Bucket) == 0 && r.BucketHex == nil {
			rootLeaf = r.ID
		}
	}
	out, errOut, code = runBin(t, "page", "--format", "hex", path, id(rootLeaf))
	wantCode(t, code, 0, out, errOut)
	for _, want := range []string{"61  bucket: root page", "6201  bucket: root page", "65  empty bucket"} {
		if !strings.Contains(out, want) {
			t.Errorf("root leaf with --format hex lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = runBin(t, "page", "--raw", path, "0")
	wantCode(t, code, 0, out, errOut)
	if !strings.Contains(out, "  00000000  52 49 56 54 ") || !strings.Contains(out, "|RIVT") || !strings.Contains(out, "  *\n") {
		t.Errorf("--raw dump of the meta:\n%s", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"page", path, "x"}, `page ID "x" is not a page number`},
		{[]string{"page", path, "-3"}, "unknown shorthand flag"},
		{[]string{"page", path, id(p.HWM)}, "is not in"},
		{[]string{"page", path, "99999999999"}, "is not in"},
		{[]string{"page", "--format", "json", path, "0"}, "--format"},
		{[]string{"page", path}, "requires at least 2 arg"},
	} {
		out, errOut, code := runBin(t, c.args...)
		wantCode(t, code, 2, out, errOut)
		if first := strings.SplitN(errOut, "\n", 2)[0]; !strings.HasPrefix(first, "rivet: ") || !strings.Contains(first, c.want) {
			t.Errorf("%v: %q, want one line with %q", c.args, errOut, c.want)
		}
	}
	if fileDigest(t, path) != before {
		t.Fatal("page changed the file")
	}
}

// svgDoc is what TestMapCommand reads back from a map's SVG.
type svgDoc struct {
	Pages, Cells, PerCell, CellSize int
	CellArea                        int // cells the rectangles of #cells cover
	Legend                          []string
	Tail                            int // rectangles of #tail
}

// parseSVG decodes the SVG with encoding/xml, failing on anything that is
// not well-formed.
func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	var d svgDoc
	dec := xml.NewDecoder(bytes.NewReader(b))
	attr := func(se xml.StartElement, name string) string {
		for _, a := range se.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	var group []string // ids and classes of the open <g> elements
	inLegend := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		switch se := tok.(type) {
		case xml.StartElement:
			switch se.Name.Local {
			case "svg":
				d.Pages, d.Cells, d.PerCell, d.CellSize = num(attr(se, "data-pages")), num(attr(se, "data-cells")), num(attr(se, "data-pages-per-cell")), num(attr(se, "data-cell-size"))
			case "g":
				group = append(group, attr(se, "id")+attr(se, "class"))
				inLegend = attr(se, "class") == "legend-entry"
			case "rect":
				if len(group) == 0 {
					break
				}
				switch group[len(group)-1] {
				case "cells":
					d.CellArea += num(attr(se, "width")) / d.CellSize * num(attr(se, "height")) / d.CellSize
				case "tail":
					d.Tail++
				}
			}
		case xml.CharData:
			if inLegend && strings.TrimSpace(string(se)) != "" {
				d.Legend = append(d.Legend, string(se))
			}
		case xml.EndElement:
			if se.Name.Local == "g" {
				group = group[:len(group)-1]
				inLegend = false
			}
		}
	}
	return d
}

// TestMapCommand: `rivet map` writes an SVG that parses as XML, with one
// cell per page, a legend entry per colour shown and the free tail
// hatched, and prints a one-line summary; --html wraps it with a legend
// table and totals; bad command lines exit 2; the file is unchanged.
func TestMapCommand(t *testing.T) {
	path := pagesFixture(t)
	before := fileDigest(t, path)
	p := readPagesJSON(t, path)
	dir := t.TempDir()
	svgPath := filepath.Join(dir, "map.svg")
	out, errOut, code := runBin(t, "map", path, "-o", svgPath)
	wantCode(t, code, 0, out, errOut)
	filePages := (p.FileSize + 4095) / 4096
	if !strings.HasPrefix(out, "wrote "+svgPath+": "+groupDigits(int64(filePages))+" pages, ") || !strings.Contains(out, "% free, tail of ") ||
		!strings.HasSuffix(out, " reclaimable\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("summary line %q", out)
	}
	b, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b)
	if d.Pages != int(filePages) || d.Cells != int(filePages) || d.PerCell != 1 || d.CellArea != d.Cells {
		t.Errorf("SVG: %d pages, %d cells of %d pages, rectangles cover %d cells; the file has %d pages", d.Pages, d.Cells, d.PerCell, d.CellArea, filePages)
	}
	// Colours shown: buckets a and b\x01 (e has no page), metas and maps,
	// the root's records, free pages, and growth room if the file is
	// longer than its state.
	want := []string{"bucket a:", "bucket 0x6201:", "metas and region maps:", "(root): top-level bucket records:", "free:"}
	if uint64(filePages) > p.HWM {
		want = append(want, "past the high-water mark")
	}
	if len(d.Legend) != len(want) {
		t.Errorf("legend %q, want %d entries", d.Legend, len(want))
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(d.Legend, "\n"), w) {
			t.Errorf("legend lacks %q: %q", w, d.Legend)
		}
	}
	if uint64(filePages) > p.HWM && d.Tail == 0 {
		t.Error("no tail hatched on a file longer than its state")
	}

	htmlPath := filepath.Join(dir, "map.html")
	out, errOut, code = runBin(t, "map", "--html", path, "-o", htmlPath)
	wantCode(t, code, 0, out, errOut)
	h, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"<!DOCTYPE html>", "<svg ", "</svg>", "bucket a</td>", "bucket 0x6201</td>", "reclaimable tail", "free pages inside the state"} {
		if !bytes.Contains(h, []byte(w)) {
			t.Errorf("HTML lacks %q", w)
		}
	}

	// To standard output: the picture on stdout, the line on stderr.
	out, errOut, code = runBin(t, "map", path, "-o", "-")
	wantCode(t, code, 0, out, errOut)
	if parseSVG(t, []byte(out)).Cells != d.Cells || !strings.HasPrefix(errOut, "wrote -: ") {
		t.Errorf("-o -: stderr %q", errOut)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"map", path}, "-o OUT is required"},
		{[]string{"map", path, "-o", path}, "is the database file itself"},
		{[]string{"map", "-o", svgPath}, "accepts 1 arg"},
	} {
		out, errOut, code := runBin(t, c.args...)
		wantCode(t, code, 2, out, errOut)
		if !strings.Contains(strings.SplitN(errOut, "\n", 2)[0], c.want) {
			t.Errorf("%v: %q, want %q", c.args, errOut, c.want)
		}
	}
	if fileDigest(t, path) != before {
		t.Fatal("map changed the file")
	}
}

// TestMapBounded: a file of 300,000 pages gets at most maxMapCells cells,
// each standing for a group of pages and coloured by the majority, and its
// SVG stays a few MB even when every cell differs from the next.
func TestMapBounded(t *testing.T) {
	const pages = 300000
	s := &pageScan{path: "big.db", fileSize: pages * 4096, pageSize: 4096, hwm: pages, txid: 9}
	m := newPageMap(s)
	m.add(0, 4, catMeta)
	// Alternate between two buckets and free space in stretches of 3
	// pages, so neighbouring cells (5 pages each) differ.
	cats := []rivet.PageUse{
		{Kind: rivet.PageLeaf, Bucket: [][]byte{[]byte("x")}},
		{Kind: rivet.PageFree},
		{Kind: rivet.PageLeaf, Bucket: [][]byte{[]byte("y")}},
	}
	for p, i := uint64(4), 0; p < pages-1000; p, i = p+3, i+1 {
		n := min(3, pages-1000-p)
		m.add(p, n, m.category(cats[i%3]))
	}
	m.add(pages-1000, 1000, catFree)
	m.finish()
	if m.perCell != 5 || len(m.cells) != pages/5 || len(m.cells) > maxMapCells {
		t.Fatalf("%d cells of %d pages", len(m.cells), m.perCell)
	}
	var b bytes.Buffer
	if err := m.writeSVG(&b); err != nil {
		t.Fatal(err)
	}
	d := parseSVG(t, b.Bytes())
	if d.Cells != pages/5 || d.CellArea != d.Cells || d.PerCell != 5 || b.Len() > 5<<20 {
		t.Errorf("SVG of %d bytes: %d cells, rectangles cover %d", b.Len(), d.Cells, d.CellArea)
	}
	if m.tailStart != pages-1000 || d.Tail == 0 {
		t.Errorf("tail from %d, %d tail rectangles", m.tailStart, d.Tail)
	}
	t.Logf("SVG of %d cells: %d bytes", d.Cells, b.Len())

	// The map slots of a later region whose data pages are all free do
	// not hold the tail back: a shrink drops the region with them.
	s2 := &pageScan{path: "two.db", fileSize: 40000 * 4096, pageSize: 4096, hwm: 40000}
	m2 := newPageMap(s2)
	m2.add(0, 4, catMeta)
	m2.add(4, 96, m2.category(rivet.PageUse{Kind: rivet.PageLeaf, Bucket: [][]byte{[]byte("x")}}))
	m2.add(100, 32512-100, catFree)
	m2.add(32512, 2, catMeta)
	m2.add(32514, 40000-32514, catFree)
	m2.finish()
	if tot := m2.totals(); m2.tailStart != 100 || tot.TailBytes != (40000-100)*4096 {
		t.Errorf("tail from page %d (%d bytes), want from page 100", m2.tailStart, tot.TailBytes)
	}
}

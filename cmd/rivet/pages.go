package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
	"github.com/spf13/cobra"
)

// The page commands: pages (every run of pages of a file, with its use),
// page (one page's header and contents) and map (pagemap.go: a picture of
// the file). They read rivet's format only, through Tx.WalkPages.

func init() {
	registerCommand(newPagesCmd)
	registerCommand(newPageCmd)
}

// pageKinds lists the page kinds in the order the summaries print them.
var pageKinds = []rivet.PageKind{rivet.PageMeta, rivet.PageRegionMap, rivet.PageBranch, rivet.PageLeaf, rivet.PageBlob,
	rivet.PageFree, rivet.PageUnreachable, rivet.PageDamaged, rivet.PageUnknown}

// bboltPagesNote is the help text's word on bbolt files.
const bboltPagesNote = `Reads rivet files only: on a bbolt file it says so and exits 1 (bbolt's
own tool, go.etcd.io/bbolt/cmd/bbolt, has "bbolt pages" and "bbolt page").`

// pageScan is what the page commands know about the file being read.
type pageScan struct {
	path     string
	fileSize int64
	pageSize int
	hwm      uint64 // pages in the state
	txid     int
}

// filePages returns the pages the file holds (its length, rounded up).
func (s *pageScan) filePages() uint64 {
	return uint64((s.fileSize + int64(s.pageSize) - 1) / int64(s.pageSize))
}

// withPages opens path read-only (rivet files only) and runs fn in one read
// transaction; on a terminal, a line on w counts the seconds of a walk
// that takes more than one.
func withPages(path string, w io.Writer, fn func(s *pageScan, tx *rivet.Tx) error) error {
	format, err := detectFormat(path)
	if err != nil {
		return err
	}
	if format != formatRivet {
		return fmt.Errorf("%s is a %s file: this command reads rivet's format; see `bbolt pages` (go.etcd.io/bbolt/cmd/bbolt)", path, format)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	db, err := openRivetReadOnly(path, w)
	if err != nil {
		return err
	}
	defer db.Close()
	s := &pageScan{path: path, fileSize: fi.Size(), pageSize: db.Info().PageSize}
	return db.View(func(tx *rivet.Tx) error {
		s.hwm = uint64(tx.Size()) / uint64(s.pageSize)
		s.txid = tx.ID()
		return fn(s, tx)
	})
}

// pageTotals counts runs and pages per kind.
type pageTotals struct {
	runs, pages map[rivet.PageKind]int64
	problems    int
}

func newPageTotals() *pageTotals {
	return &pageTotals{runs: map[rivet.PageKind]int64{}, pages: map[rivet.PageKind]int64{}}
}

func (t *pageTotals) add(u rivet.PageUse) {
	t.runs[u.Kind]++
	t.pages[u.Kind] += int64(u.Pages)
	if u.Err != nil {
		t.problems++
	}
}

// useText describes a run's use in words, for the pages listing.
func useText(u rivet.PageUse, s *pageScan) string {
	var b strings.Builder
	switch u.Kind {
	case rivet.PageMeta:
		b.WriteString("meta")
		if u.Current {
			b.WriteString(", current (this snapshot's)")
		} else if u.Err == nil {
			b.WriteString(", the other slot (not this snapshot's)")
		}
	case rivet.PageRegionMap:
		r := uint64(u.ID) / inspect.RegionPages(s.pageSize)
		fmt.Fprintf(&b, "region %d map", r)
		if u.Current {
			fmt.Fprintf(&b, ", current; the page lists %d free", u.Count)
		} else if u.Checksum == rivet.ChecksumNotStored {
			b.WriteString(", other slot (never written)")
		} else {
			b.WriteString(", other slot (not this snapshot's)")
		}
	case rivet.PageBranch, rivet.PageLeaf, rivet.PageDamaged:
		if u.Bucket == nil {
			break
		}
		if len(u.Bucket) == 0 {
			b.WriteString("(root): top-level bucket records")
		} else {
			b.WriteString("bucket " + pathString(u.Bucket))
		}
		fmt.Fprintf(&b, ", depth %d", u.Depth)
		if u.Key != nil {
			b.WriteString(", value of " + formatBytes(u.Key, fmtAuto))
		}
	case rivet.PageBlob:
		fmt.Fprintf(&b, "bucket %s, value of %s", pathString(u.Bucket), formatBytes(u.Key, fmtAuto))
	case rivet.PageFree:
		b.WriteString("free")
	case rivet.PageUnreachable:
		b.WriteString("neither reachable nor free")
	case rivet.PageUnknown:
		b.WriteString("not reachable; free or not unknown")
	}
	if u.Err != nil {
		if b.Len() > 0 {
			b.WriteString(" \u2014 ")
		}
		b.WriteString("problem: " + oneLine(u.Err))
	}
	return b.String()
}

// pageJSON is one run in `pages --json`.
func pageJSON(u rivet.PageUse) map[string]any {
	m := map[string]any{
		"id":       uint64(u.ID),
		"pages":    u.Pages,
		"kind":     u.Kind.String(),
		"txid":     u.Txid,
		"count":    u.Count,
		"checksum": u.Checksum.String(),
	}
	if u.Bucket != nil {
		text, hexs := true, make([]string, len(u.Bucket))
		names := make([]string, len(u.Bucket))
		for i, n := range u.Bucket {
			text = text && isText(n)
			names[i], hexs[i] = string(n), hex.EncodeToString(n)
		}
		if text {
			m["bucket"] = names
		} else {
			m["bucket_hex"] = hexs
		}
		m["depth"] = u.Depth
	}
	if u.Key != nil {
		jsonBytes(m, "key", u.Key)
	}
	if u.Current {
		m["current"] = true
	}
	if u.Err != nil {
		m["problem"] = u.Err.Error()
	}
	return m
}

func newPagesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pages FILE",
		Short: "List every page of a rivet file: kind, transaction, checksum, owner or free",
		Long: `Lists the pages of FILE's current state, in order, one line per run of pages:
the first page id, the pages in the run, the kind (meta, regionmap, branch,
leaf, blob, free, unreachable, damaged, unknown), the transaction that wrote
it, whether its checksum was verified (ok, bad, or not stored: free pages
have none) and its use: the bucket whose tree holds it and its depth there,
the key of a large value, the region a map slot describes, free. A summary
ends the listing: pages per kind, free pages, the file's size.

Every page below the high-water mark appears exactly once. Damage is listed
where it is (a run that fails validation is "damaged", with the problem)
and the listing goes on; pages that no tree reaches and no free-space map
lists are "unreachable" (leaked, or below a damaged page). Exits 1 if any
run has a problem. Opens FILE read-only and never writes to it.

` + bboltPagesNote,
		Example: `  rivet pages app.db
  rivet pages app.db | grep -c ' free '
  rivet pages --json app.db`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			defer out.Flush()
			tot := newPageTotals()
			err := withPages(path, cmd.ErrOrStderr(), func(s *pageScan, tx *rivet.Tx) error {
				stop := showWalkProgress(cmd.ErrOrStderr(), "reading "+path+"'s pages")
				first := true
				if asJSON {
					head, _ := json.Marshal(map[string]any{"path": path, "format": formatRivet, "file_size": s.fileSize,
						"page_size": s.pageSize, "high_water_mark": s.hwm, "txid": s.txid})
					fmt.Fprintf(out, "%s,\n\"runs\": [\n", head[:len(head)-1])
				} else {
					fmt.Fprintf(out, "%10s %7s  %-11s %8s  %-10s  %s\n", "ID", "PAGES", "KIND", "TXID", "CHECKSUM", "USE")
				}
				err := tx.WalkPages(func(u rivet.PageUse) error {
					if first {
						stop()
					}
					tot.add(u)
					if asJSON {
						b, err := json.Marshal(pageJSON(u))
						if err != nil {
							return err
						}
						if !first {
							out.WriteString(",\n")
						}
						out.Write(b)
					} else {
						txid := "-"
						if u.Txid != 0 {
							txid = strconv.FormatUint(u.Txid, 10)
						}
						fmt.Fprintf(out, "%10d %7d  %-11s %8s  %-10s  %s\n", u.ID, u.Pages, u.Kind, txid, u.Checksum, useText(u, s))
					}
					first = false
					return nil
				})
				if first {
					stop()
				}
				if err != nil {
					return err
				}
				if asJSON {
					return writePagesJSONTail(out, s, tot)
				}
				return writePagesSummary(out, s, tot)
			})
			if err != nil {
				return err
			}
			if tot.problems > 0 {
				out.Flush()
				return fmt.Errorf("%s: %d run(s) of pages with a problem (listed above)", path, tot.problems)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as one JSON object: the file's fields, \"runs\" (one object per run) and \"totals\"")
	return cmd
}

// writePagesSummary prints the pages listing's last lines.
func writePagesSummary(w io.Writer, s *pageScan, tot *pageTotals) error {
	ps := int64(s.pageSize)
	fmt.Fprintf(w, "\n%s: %d pages of %d bytes in the state (%s), file %s", s.path, s.hwm, s.pageSize,
		sizeString(int64(s.hwm)*ps), sizeString(s.fileSize))
	if fp := s.filePages(); fp > s.hwm {
		fmt.Fprintf(w, " (%d pages past the high-water mark: growth room)", fp-s.hwm)
	}
	fmt.Fprintln(w)
	var parts []string
	for _, k := range pageKinds {
		if tot.pages[k] == 0 && k != rivet.PageFree {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", k, tot.pages[k]))
	}
	fmt.Fprintf(w, "pages: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "free: %d pages (%s, %s of the state)\n", tot.pages[rivet.PageFree], sizeString(tot.pages[rivet.PageFree]*ps),
		percent(float64(tot.pages[rivet.PageFree]), float64(s.hwm)))
	return nil
}

// writePagesJSONTail closes the --json object: totals per kind.
func writePagesJSONTail(w io.Writer, s *pageScan, tot *pageTotals) error {
	totals := map[string]any{}
	for _, k := range pageKinds {
		totals[k.String()] = map[string]int64{"runs": tot.runs[k], "pages": tot.pages[k]}
	}
	b, err := json.Marshal(map[string]any{"totals": totals, "problems": tot.problems,
		"free_bytes": tot.pages[rivet.PageFree] * int64(s.pageSize)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\n],\n%s\n", b[1:])
	return err
}

func newPageCmd() *cobra.Command {
	var format string
	var raw bool
	cmd := &cobra.Command{
		Use:   "page FILE ID...",
		Short: "Print pages of a rivet file decoded: header, use, keys, children, free runs",
		Long: `Prints each page ID of FILE: its use in the current state (as "rivet pages"
shows it), its header fields, and its contents decoded by kind:

  branch      the separator keys and the child each leads to (page, txid, checksum)
  leaf        the keys, their value sizes, bucket records (nested and inline
              buckets) and references to large values
  blob        the payload's size, the next extent, the payload's first bytes
  regionmap   the free pages it lists, in runs
  meta        every field: transaction, high-water mark, root, free count,
              selector, delta runs

A page inside a multi-page run is shown as part of that run. Keys and values
print as text when they are printable, else as hex (--format); --raw adds a
hex dump of the run's bytes. Free and unreachable pages hold stale bytes,
which are decoded all the same, marked as such. An ID that is not a page of
the state is a command-line error (exit 2). Opens FILE read-only and never
writes to it.

` + bboltPagesNote,
		Example: `  rivet page app.db 2 57
  rivet page --raw app.db 0
  rivet page --format hex app.db 57`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkChoice("format", format, []string{fmtAuto, fmtASCII, fmtHex}); err != nil {
				return err
			}
			path := args[0]
			var ids []uint64
			for _, a := range args[1:] {
				id, err := strconv.ParseUint(a, 10, 64)
				if err != nil {
					return usagef("page ID %q is not a page number", a)
				}
				ids = append(ids, id)
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			return withPages(path, cmd.ErrOrStderr(), func(s *pageScan, tx *rivet.Tx) error {
				for _, id := range ids {
					if id >= s.hwm {
						return usagef("page %d is not in %s's state, which has pages 0 to %d", id, path, s.hwm-1)
					}
				}
				want := append([]uint64(nil), ids...)
				sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
				uses := map[uint64]rivet.PageUse{}
				i := 0
				stop := showWalkProgress(cmd.ErrOrStderr(), "reading "+path+"'s pages")
				err := tx.WalkPages(func(u rivet.PageUse) error {
					end := uint64(u.ID) + uint64(u.Pages)
					for i < len(want) && want[i] < end {
						uses[want[i]] = u
						i++
					}
					if i == len(want) {
						return errStopWalk
					}
					return nil
				})
				stop()
				if err != nil && !errors.Is(err, errStopWalk) {
					return err
				}
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				for n, id := range ids {
					if n > 0 {
						fmt.Fprintln(out)
					}
					if err := printPage(out, f, s, id, uses[id], format, raw); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", fmtAuto, "how keys and values are printed: auto (text as is, else 0x-prefixed hex), ascii (escaped), hex")
	cmd.Flags().BoolVar(&raw, "raw", false, "also print a hex dump of the run's bytes")
	return cmd
}

// errStopWalk ends a WalkPages early once what was wanted is found.
var errStopWalk = errors.New("stop walk")

// maxDecodePages bounds what page reads to decode a run: nodes are a few
// pages; a blob extent is decoded from its first page (its payload is
// only previewed).
const maxDecodePages = 64

// printPage prints page id, which lies in the run u describes.
func printPage(w io.Writer, f *os.File, s *pageScan, id uint64, u rivet.PageUse, format string, raw bool) error {
	ps := uint64(s.pageSize)
	start := uint64(u.ID)
	stale := u.Kind == rivet.PageFree || u.Kind == rivet.PageUnreachable || u.Kind == rivet.PageUnknown
	switch {
	case stale:
		// A stretch of pages no tree reaches is not one run: the page
		// asked for is decoded on its own.
		fmt.Fprintf(w, "page %d: %s, in a stretch of %d such pages %d-%d\n", id, u.Kind, u.Pages, start, start+uint64(u.Pages)-1)
		u.ID, u.Pages, start = rivet.Pgid(id), 1, id
	case u.Pages > 1:
		fmt.Fprintf(w, "page %d (in the run of %d pages %d-%d): %s at byte %d\n", id, u.Pages, start, start+uint64(u.Pages)-1, u.Kind, start*ps)
	default:
		fmt.Fprintf(w, "page %d: %s at byte %d\n", id, u.Kind, start*ps)
	}
	if text := useText(u, s); text != "" {
		fmt.Fprintf(w, "  use        %s\n", text)
	}
	fmt.Fprintf(w, "  checksum   %s\n", u.Checksum)
	inFile := s.filePages()
	if start >= inFile {
		fmt.Fprintf(w, "  (past the end of the file: no bytes to show)\n")
		return nil
	}
	n := min(uint64(u.Pages), inFile-start)
	buf := make([]byte, min(n, maxDecodePages)*ps)
	if _, err := f.ReadAt(buf, int64(start*ps)); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if stale {
		fmt.Fprintf(w, "  (not part of the state: the bytes below are what an earlier transaction left)\n")
	}
	decodePage(w, buf, s, start, u, format)
	if raw {
		fmt.Fprintf(w, "  raw bytes of pages %d-%d:\n", start, start+n-1)
		return hexDump(w, io.NewSectionReader(f, int64(start*ps), int64(n*ps)))
	}
	return nil
}

// decodePage prints the header and contents of the run in buf (its first
// pages), by what the header says it is.
func decodePage(w io.Writer, buf []byte, s *pageScan, id uint64, u rivet.PageUse, format string) {
	p, err := inspect.DecodePage(buf, id, s.pageSize, s.hwm)
	if err != nil {
		fmt.Fprintf(w, "  contents   not decoded: %v\n", err)
		return
	}
	if id < 2 {
		decodeMeta(w, p, buf[:s.pageSize])
		return
	}
	if p.Zero {
		fmt.Fprintf(w, "  (all zeros)\n")
		return
	}
	h := p.Header
	fmt.Fprintf(w, "  header     type %d (%v), flags %d, count %d, txid %d, page id %d, overflow %d, checksum field %08x\n",
		uint16(h.Type), h.Type, h.Flags, h.Count, h.Txid, h.ID, h.Overflow, h.Checksum)
	if h.ID != id {
		fmt.Fprintf(w, "  note       the header names page %d, not %d\n", h.ID, id)
	}
	switch {
	case p.Err != nil:
		fmt.Fprintf(w, "  contents   do not decode: %s\n", oneLine(p.Err))
	case p.Node != nil:
		decodeNode(w, p.Node, format)
	case p.Blob != nil:
		b := p.Blob
		if b.PagesRead < b.Pages {
			fmt.Fprintf(w, "  blob       %d payload bytes in %d pages (first %d pages shown)\n", b.Length, b.Pages, b.PagesRead)
			preview(w, b.Payload, int(b.Length), format)
			return
		}
		fmt.Fprintf(w, "  blob       %d payload bytes in %d pages\n", b.Length, b.Pages)
		if b.Next.ID != 0 {
			fmt.Fprintf(w, "  next       extent at page %d (%d pages, txid %d, checksum %08x)\n", b.Next.ID, b.Next.Pages, b.Next.Txid, b.Next.Checksum)
		} else {
			fmt.Fprintf(w, "  next       none: the last extent\n")
		}
		preview(w, b.Payload, int(b.Length), format)
	case p.RegionMap != nil:
		decodeRegionMap(w, p.RegionMap, u)
	default:
		fmt.Fprintf(w, "  contents   not a page type rivet writes\n")
	}
}

// preview prints the first bytes of a payload of total bytes.
func preview(w io.Writer, b []byte, total int, format string) {
	const n = 64
	if len(b) > n {
		b = b[:n]
	}
	if len(b) > total {
		b = b[:max(total, 0)]
	}
	more := ""
	if total > len(b) {
		more = fmt.Sprintf(" ... (%d more bytes)", total-len(b))
	}
	fmt.Fprintf(w, "  payload    %s%s\n", formatBytes(b, format), more)
}

// decodeNode prints a branch's or leaf's elements.
func decodeNode(w io.Writer, n *inspect.Node, format string) {
	if !n.Leaf {
		fmt.Fprintf(w, "  %d separator keys and children:\n", n.Count)
		for i, e := range n.Elements {
			fmt.Fprintf(w, "  %5d  %s -> page %d (txid %d, checksum %08x)\n", i, formatBytes(e.Key, format), e.Child.ID, e.Child.Txid, e.Child.Checksum)
		}
		if n.Err != nil {
			fmt.Fprintf(w, "  %5d  %s\n", len(n.Elements), oneLine(n.Err))
		}
		return
	}
	fmt.Fprintf(w, "  %d keys:\n", n.Count)
	for i, e := range n.Elements {
		what := ""
		switch {
		case e.Flags == 0:
			what = fmt.Sprintf("value of %d bytes", len(e.Value))
		case e.Flags == inspect.FlagBucket && e.Err != nil:
			what = "bucket record that does not decode: " + oneLine(e.Err)
		case e.Flags == inspect.FlagBucket:
			rec := e.Bucket
			switch {
			case rec.Inline:
				what = fmt.Sprintf("inline bucket: %d keys in %d bytes, sequence %d", rec.InlineKeys, rec.InlineBytes, rec.Sequence)
			case rec.Root.IsZero():
				what = fmt.Sprintf("empty bucket, sequence %d", rec.Sequence)
			default:
				what = fmt.Sprintf("bucket: root page %d (txid %d, checksum %08x), sequence %d", rec.Root.ID, rec.Root.Txid, rec.Root.Checksum, rec.Sequence)
			}
		case e.Flags == inspect.FlagBlob && e.Err != nil:
			what = "blob reference that does not decode: " + oneLine(e.Err)
		case e.Flags == inspect.FlagBlob:
			b := e.Blob
			what = fmt.Sprintf("large value of %d bytes: blob at page %d (%d pages, txid %d, checksum %08x)", b.Length, b.First.ID, b.First.Pages, b.First.Txid, b.First.Checksum)
		default:
			what = fmt.Sprintf("unknown flags %d, %d bytes", e.Flags, len(e.Value))
		}
		fmt.Fprintf(w, "  %5d  %s  %s\n", i, formatBytes(e.Key, format), what)
	}
	if n.Err != nil {
		fmt.Fprintf(w, "  %5d  %s\n", len(n.Elements), oneLine(n.Err))
	}
}

// decodeRegionMap prints a map slot's free pages, in runs.
func decodeRegionMap(w io.Writer, m *inspect.RegionMap, u rivet.PageUse) {
	state := "the slot this snapshot's meta selects"
	if !u.Current {
		state = "not the slot this snapshot's meta selects: another state's version (the meta's delta applies to the current one)"
	}
	fmt.Fprintf(w, "  region     %d (pages %d-%d), slot %s, written by txn %d: %s\n", m.Region, m.First, m.First+m.Pages-1, "AB"[m.Slot:m.Slot+1], m.Txid, state)
	var runs []string
	count := uint64(0)
	for _, r := range m.Free {
		count += r.N
		if r.N == 1 {
			runs = append(runs, strconv.FormatUint(r.First, 10))
		} else {
			runs = append(runs, fmt.Sprintf("%d-%d", r.First, r.First+r.N-1))
		}
	}
	fmt.Fprintf(w, "  free       %d pages in %d runs\n", count, len(runs))
	for len(runs) > 0 {
		n := min(len(runs), 10)
		fmt.Fprintf(w, "             %s\n", strings.Join(runs[:n], " "))
		runs = runs[n:]
	}
}

// decodeMeta prints every field of the meta page p, decoded from buf.
func decodeMeta(w io.Writer, p *inspect.Page, buf []byte) {
	m := p.Meta
	if m == nil {
		if p.Zero {
			fmt.Fprintf(w, "  (all zeros)\n")
			return
		}
		fmt.Fprintf(w, "  meta       does not decode: %s\n", oneLine(p.Err))
		if txid, ok := inspect.ClaimedTxid(buf); ok {
			fmt.Fprintf(w, "  claims     txid %d (unverified)\n", txid)
		}
		return
	}
	fmt.Fprintf(w, "  magic      %08x (rivet), page size %d\n", inspect.Magic, m.PageSize)
	fmt.Fprintf(w, "  txid       %d (builds on sync point %d)\n", m.Txid, m.Steady)
	fmt.Fprintf(w, "  hwm        %d pages (%s)\n", m.HWM, sizeString(int64(m.HWM)*int64(m.PageSize)))
	fmt.Fprintf(w, "  root       page %d (txid %d, checksum %08x)\n", m.Root.ID, m.Root.Txid, m.Root.Checksum)
	fmt.Fprintf(w, "  regions    %d of %d pages; free pages %d; first region with free pages %d\n", m.Regions, m.RegionPages, m.FreePages, m.FirstFreeRegion)
	fmt.Fprintf(w, "  selector   regions whose map is in slot B: %s\n", listOrNone(m.SlotB))
	fmt.Fprintf(w, "  changed    regions whose map this sync point wrote: %s\n", listOrNone(m.Changed))
	fmt.Fprintf(w, "  delta      %d runs\n", len(m.Delta))
	for _, d := range m.Delta {
		state := "used"
		if d.Free {
			state = "free"
		}
		fmt.Fprintf(w, "             pages %d-%d %s\n", d.First, d.First+d.N-1, state)
	}
}

func listOrNone(l []uint64) string {
	if len(l) == 0 {
		return "none"
	}
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(s, " ")
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// hexDump prints r's bytes as offset, 16 hex bytes and their printable
// characters, one line per 16 bytes; a run of all-zero lines after the
// first is printed as one "*", as hexdump -C does.
func hexDump(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	line := make([]byte, 16)
	var off int64
	prevZero, starred := false, false
	for {
		n, err := io.ReadFull(br, line)
		if n > 0 {
			zero := n == 16 && allZero(line)
			if zero && prevZero {
				if !starred {
					fmt.Fprintln(w, "  *")
					starred = true
				}
				off += int64(n)
				continue
			}
			prevZero, starred = zero, false
			var hx, ascii strings.Builder
			for i := 0; i < 16; i++ {
				if i == 8 {
					hx.WriteByte(' ')
				}
				if i >= n {
					hx.WriteString("   ")
					continue
				}
				fmt.Fprintf(&hx, "%02x ", line[i])
				c := line[i]
				if c < 0x20 || c > 0x7e {
					c = '.'
				}
				ascii.WriteByte(c)
			}
			fmt.Fprintf(w, "  %08x  %s |%s|\n", off, hx.String(), ascii.String())
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "  %08x\n", off)
	return nil
}

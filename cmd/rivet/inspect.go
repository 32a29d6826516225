package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// treeStats are one bucket tree's statistics, the same fields for both
// engines (their BucketStats agree field for field).
type treeStats struct {
	Name          string  `json:"name,omitempty"`
	Keys          int     `json:"keys"`
	Buckets       int     `json:"buckets"` // this bucket and every nested one
	InlineBuckets int     `json:"inline_buckets,omitempty"`
	Depth         int     `json:"depth"`
	BranchPages   int     `json:"branch_pages"`
	LeafPages     int     `json:"leaf_pages"`
	OverflowPages int     `json:"overflow_pages"` // extra pages of multi-page nodes and large values
	BytesInUse    int64   `json:"bytes_in_use"`
	BytesAlloc    int64   `json:"bytes_allocated"`
	Fill          float64 `json:"fill"` // BytesInUse / BytesAlloc
}

func (s *treeStats) add(o treeStats) {
	s.Keys += o.Keys
	s.Buckets += o.Buckets
	s.InlineBuckets += o.InlineBuckets
	s.Depth = max(s.Depth, o.Depth)
	s.BranchPages += o.BranchPages
	s.LeafPages += o.LeafPages
	s.OverflowPages += o.OverflowPages
	s.BytesInUse += o.BytesInUse
	s.BytesAlloc += o.BytesAlloc
	s.fill()
}

func (s *treeStats) fill() {
	if s.BytesAlloc > 0 {
		s.Fill = float64(s.BytesInUse) / float64(s.BytesAlloc)
	}
}

func fromRivet(name []byte, st rivet.BucketStats) treeStats {
	s := treeStats{Name: formatBytes(name, fmtAuto), Keys: st.KeyN, Buckets: st.BucketN, Depth: st.Depth,
		BranchPages: st.BranchPageN, LeafPages: st.LeafPageN, OverflowPages: st.BranchOverflowN + st.LeafOverflowN,
		BytesInUse: int64(st.BranchInuse + st.LeafInuse), BytesAlloc: int64(st.BranchAlloc + st.LeafAlloc)}
	s.fill()
	return s
}

func fromBolt(name []byte, st bolt.BucketStats) treeStats {
	s := treeStats{Name: formatBytes(name, fmtAuto), Keys: st.KeyN, Buckets: st.BucketN, InlineBuckets: st.InlineBucketN, Depth: st.Depth,
		BranchPages: st.BranchPageN, LeafPages: st.LeafPageN, OverflowPages: st.BranchOverflowN + st.LeafOverflowN,
		BytesInUse: int64(st.BranchInuse + st.LeafInuse + st.InlineBucketInuse), BytesAlloc: int64(st.BranchAlloc + st.LeafAlloc)}
	s.fill()
	return s
}

// fileStats is what `rivet stats` prints: what a file holds and how well
// it uses its pages.
type fileStats struct {
	Path      string      `json:"path"`
	Format    string      `json:"format"`
	FileSize  int64       `json:"file_size"`
	PageSize  int         `json:"page_size"`
	Pages     int64       `json:"pages"`
	FreePages int         `json:"free_pages"`
	Total     treeStats   `json:"total"`
	Buckets   []treeStats `json:"buckets"`
}

func newStatsCmd() *cobra.Command {
	var asJSON bool
	var top int
	cmd := &cobra.Command{
		Use:   "stats FILE",
		Short: "Print what a file holds and how well it uses its pages",
		Long: `Prints FILE's totals — keys, buckets, tree pages, bytes in use against bytes
allocated (the fill factor), free pages — and the same per top-level bucket
(its nested buckets included), largest first: where a file's space went.
Reads rivet and bbolt files; opens FILE read-only and never writes to it.`,
		Example: `  rivet stats app.db
  rivet stats --top 5 app.db
  rivet stats --json app.db`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := readStats(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStats(cmd.OutOrStdout(), st, top)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().IntVar(&top, "top", 20, "show at most this many buckets, largest first (0: all)")
	return cmd
}

func readStats(path string, w io.Writer) (st *fileStats, err error) {
	format, err := detectFormat(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	st = &fileStats{Path: path, Format: format, FileSize: fi.Size()}
	if format == formatBbolt {
		defer recoverDamage(path, &err)
		db, err := openBboltReadOnly(path, w)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		st.PageSize, st.FreePages = db.Info().PageSize, db.Stats().FreePageN
		err = db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				if b == nil {
					return nil // a plain value at the top level: no bucket
				}
				st.Buckets = append(st.Buckets, fromBolt(name, b.Stats()))
				return nil
			})
		})
		if err != nil {
			return nil, err
		}
	} else {
		db, err := openRivetReadOnly(path, w)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		st.PageSize, st.FreePages = db.Info().PageSize, db.Stats().FreePageN
		err = db.View(func(tx *rivet.Tx) error {
			return tx.ForEach(func(name []byte, b *rivet.Bucket) error {
				if b == nil {
					return nil // a plain value at the top level: no bucket
				}
				st.Buckets = append(st.Buckets, fromRivet(name, b.Stats()))
				return tx.Err()
			})
		})
		if err != nil {
			return nil, err
		}
	}
	st.Pages = st.FileSize / int64(st.PageSize)
	for _, b := range st.Buckets {
		st.Total.add(b)
	}
	sort.SliceStable(st.Buckets, func(i, j int) bool { return st.Buckets[i].BytesAlloc > st.Buckets[j].BytesAlloc })
	return st, nil
}

func printStats(w io.Writer, st *fileStats, top int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	t := st.Total
	fmt.Fprintf(tw, "file\t%s (%s)\n", st.Path, st.Format)
	fmt.Fprintf(tw, "file size\t%s: %d pages of %d bytes\n", sizeString(st.FileSize), st.Pages, st.PageSize)
	fmt.Fprintf(tw, "free pages\t%d (%s, %s of the file)\n", st.FreePages, sizeString(int64(st.FreePages)*int64(st.PageSize)), percent(float64(st.FreePages), float64(st.Pages)))
	fmt.Fprintf(tw, "keys\t%d in %d buckets (%d top-level)\n", t.Keys, t.Buckets, len(st.Buckets))
	fmt.Fprintf(tw, "tree pages\t%d branch, %d leaf, %d overflow\n", t.BranchPages, t.LeafPages, t.OverflowPages)
	fmt.Fprintf(tw, "bytes\t%s in use of %s allocated (fill %s)\n", sizeString(t.BytesInUse), sizeString(t.BytesAlloc), percent(float64(t.BytesInUse), float64(t.BytesAlloc)))
	fmt.Fprintf(tw, "deepest tree\t%d levels\n", t.Depth)
	if len(st.Buckets) == 0 {
		return tw.Flush()
	}
	fmt.Fprintln(tw, "\nBUCKET\tKEYS\tBUCKETS\tDEPTH\tPAGES\tALLOCATED\tFILL\t")
	for i, b := range st.Buckets {
		if top > 0 && i == top {
			fmt.Fprintf(tw, "(%d more; --top 0 shows all)\t\t\t\t\t\t\t\n", len(st.Buckets)-top)
			break
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", b.Name, b.Keys, b.Buckets, b.Depth,
			b.BranchPages+b.LeafPages+b.OverflowPages, sizeString(b.BytesAlloc), percent(float64(b.BytesInUse), float64(b.BytesAlloc)))
	}
	return tw.Flush()
}

func newCheckCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Verify a database file; exits 1 if any problem is found",
		Long: `Opens FILE read-only, runs the engine's consistency check (Tx.Check: every
page reachable once, checksums, key order, free space accounted for) and
prints every problem it reports, one per line. Exits 0 only when there was
none. A file too damaged to open is one problem. Reads rivet and bbolt
files; never writes to FILE.`,
		Example: `  rivet check app.db && echo healthy`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			format, err := detectFormat(path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var problems []string
			report := func(err error) { problems = append(problems, oneLine(err)) }
			if format == formatBbolt {
				err = checkBbolt(path, cmd.ErrOrStderr(), report)
			} else {
				err = checkRivet(path, cmd.ErrOrStderr(), report)
			}
			if err != nil {
				return err
			}
			for _, p := range problems {
				fmt.Fprintln(out, p)
			}
			if len(problems) > 0 {
				return fmt.Errorf("%s: %d problem(s) found", path, len(problems))
			}
			fmt.Fprintf(out, "%s: ok (%s)\n", path, format)
			return nil
		},
	}
	return cmd
}

// isDamage reports whether an error from opening a file is the file's
// content being wrong (a problem the check found) rather than the check
// failing to run (a missing file, a lock, no permission).
func isDamage(err error) bool {
	return errors.Is(err, rerrors.ErrCorrupt) || errors.Is(err, rerrors.ErrInvalid) ||
		errors.Is(err, rerrors.ErrVersionMismatch) || errors.Is(err, rerrors.ErrChecksum) ||
		errors.Is(err, errDamaged) || errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch)
}

func checkRivet(path string, w io.Writer, report func(error)) error {
	db, err := openRivetReadOnly(path, w)
	if err != nil {
		if isDamage(err) {
			report(err)
			return nil
		}
		return err
	}
	defer db.Close()
	return db.View(func(tx *rivet.Tx) error {
		for problem := range tx.Check() {
			report(problem)
		}
		return nil
	})
}

// checkBbolt runs bbolt's check. bbolt panics on many damaged pages
// instead of returning errors (in Open, and in Check's walk, which turns
// its own panics into "panic: ..." errors); both become damage reports.
func checkBbolt(path string, w io.Writer, report func(error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			report(fmt.Errorf("%w: bbolt gave up reading it: %v", errDamaged, r))
			err = nil
		}
	}()
	db, err := openBboltReadOnly(path, w)
	if err != nil {
		if isDamage(err) {
			report(err)
			return nil
		}
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		for problem := range tx.Check() {
			if msg, ok := strings.CutPrefix(problem.Error(), "panic: "); ok {
				problem = fmt.Errorf("%w: bbolt gave up reading a page: %s", errDamaged, msg)
			}
			report(problem)
		}
		return nil
	})
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/rivetkv/rivet/bench"
	"github.com/spf13/cobra"
)

// autoEngine makes stats and check pick the engine from the file's header,
// so the same tool inspects a bbolt file before a migration and the rivet
// file after it.
const autoEngine = "auto"

func newStatsCmd() *cobra.Command {
	var engine string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats FILE",
		Short: "Print a database file's statistics: DB stats, page and file size, per-bucket stats",
		Long: `Opens FILE read-only and prints the DB's statistics (free and pending pages,
transaction counters, and for rivet its cumulative I/O counters), the page
size, the file size, and the statistics of every top-level bucket.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ins, err := inspector(args[0], engine)
			if err != nil {
				return err
			}
			res, err := ins.Inspect(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return printInspection(cmd.OutOrStdout(), res)
		},
	}
	cmd.Flags().StringVar(&engine, "engine", autoEngine, "file format: auto (from the file header), rivet or bbolt")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the statistics as JSON")
	return cmd
}

func newCheckCmd() *cobra.Command {
	var engine string
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Verify a database file; exits non-zero if any problem is found",
		Long: `Opens FILE read-only, runs the engine's consistency check (Tx.Check) and
prints every problem it reports, one per line. The exit status is 0 only
when there was none.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ins, err := inspector(args[0], engine)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			n, err := ins.Check(args[0], func(problem error) { fmt.Fprintln(out, problem) })
			if err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%s: %d problem(s) found", args[0], n)
			}
			fmt.Fprintf(out, "%s: ok (%s)\n", args[0], ins.Name())
			return nil
		},
	}
	cmd.Flags().StringVar(&engine, "engine", autoEngine, "file format: auto (from the file header), rivet or bbolt")
	return cmd
}

// inspector returns the Inspector for path: the named engine, or with
// "auto" the first registered engine whose Detect accepts the header.
func inspector(path, engine string) (bench.Inspector, error) {
	if engine != autoEngine {
		e, err := bench.LookupEngine(engine)
		if err != nil {
			return nil, err
		}
		ins, ok := e.(bench.Inspector)
		if !ok {
			return nil, fmt.Errorf("engine %s cannot inspect files", e.Name())
		}
		return ins, nil
	}
	header, err := readHeader(path)
	if err != nil {
		return nil, err
	}
	var known []string
	for _, e := range bench.Engines() {
		ins, ok := e.(bench.Inspector)
		if !ok {
			continue
		}
		known = append(known, e.Name())
		if ins.Detect(header) {
			return ins, nil
		}
	}
	return nil, fmt.Errorf("%s: not a database file of a known format (this build reads: %s)", path, strings.Join(known, ", "))
}

// readHeader returns the first bytes of path: enough for every engine's
// magic number, and short files are returned whole rather than refused.
func readHeader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

func printInspection(w io.Writer, ins *bench.Inspection) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s\n", ins.Path)
	fmt.Fprintf(tw, "format\t%s\n", ins.Engine)
	fmt.Fprintf(tw, "page size\t%d\n", ins.PageSize)
	fmt.Fprintf(tw, "file size\t%d (%s)\n", ins.FileSize, bench.UnitBytes.Format(float64(ins.FileSize)))
	fmt.Fprintf(tw, "top-level buckets\t%d\n", len(ins.Buckets))
	fmt.Fprintln(tw, "\nDB stats\t")
	for _, f := range ins.DB {
		fmt.Fprintf(tw, "  %s\t%v\n", f.Name, f.Value)
	}
	for _, b := range ins.Buckets {
		fmt.Fprintf(tw, "\nbucket %s\t\n", b.Name)
		for _, f := range b.Stats {
			fmt.Fprintf(tw, "  %s\t%v\n", f.Name, f.Value)
		}
	}
	return tw.Flush()
}

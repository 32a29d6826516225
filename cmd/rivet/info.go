package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"
)

func init() {
	registerCommand(newInfoCmd)
	registerCommand(newInspectCmd)
}

// fileInfo is what `rivet info` prints: what the file's header pages say
// and what opening it found.
type fileInfo struct {
	Path     string     `json:"path"`
	Format   string     `json:"format"`
	FileSize int64      `json:"file_size"`
	PageSize int        `json:"page_size"`
	Txid     uint64     `json:"txid"`
	Buckets  int        `json:"top_level_buckets"`
	Metas    []metaInfo `json:"metas,omitempty"`
	// FreePages is rivet's recorded free page count, or bbolt's freelist's.
	FreePages int `json:"free_pages"`
	// PendingPages is bbolt's pending freelist (rivet: 0 on a file no
	// writer has open).
	PendingPages int    `json:"pending_pages"`
	Recovery     string `json:"recovery,omitempty"`
}

// metaInfo describes one rivet meta page.
type metaInfo struct {
	Slot          int    `json:"slot"`
	Valid         bool   `json:"valid"`
	Problem       string `json:"problem,omitempty"`
	FormatVersion uint32 `json:"format_version,omitempty"`
	Txid          uint64 `json:"txid,omitempty"`
	Steady        uint64 `json:"steady_txid,omitempty"`
	HighWaterMark uint64 `json:"high_water_mark_pages,omitempty"`
	FreePages     uint64 `json:"free_pages,omitempty"`
	Regions       uint64 `json:"regions,omitempty"`
	DeltaRuns     int    `json:"delta_runs,omitempty"`
}

func newInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info FILE",
		Short: "Print what a file is: format, page size, transaction, meta pages, free pages",
		Long: `Prints FILE's format (rivet or bbolt), size, page size, the transaction it
holds, its free pages and its number of top-level buckets; for a rivet file
also both meta pages (valid or why not, their transaction, high-water mark
and free count) and what Open found (a fallback to the older meta after a
torn commit, a damaged meta). Opens FILE read-only and never writes to it.`,
		Example: `  rivet info app.db
  rivet info --json app.db`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := readInfo(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			return printInfo(cmd.OutOrStdout(), info)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func readInfo(path string, w io.Writer) (*fileInfo, error) {
	format, err := detectFormat(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	info := &fileInfo{Path: path, Format: format, FileSize: fi.Size()}
	if format == formatBbolt {
		return info, bboltInfo(path, w, info)
	}
	info.Metas = readRivetMetas(path)
	db, err := openRivetReadOnly(path, w)
	if err != nil {
		return info, err
	}
	defer db.Close()
	info.PageSize = db.Info().PageSize
	st := db.Stats()
	info.FreePages, info.PendingPages = st.FreePageN, st.PendingPageN
	rec := db.Recovery()
	switch {
	case rec.FellBack:
		info.Recovery = fmt.Sprintf("fell back to transaction %d: %s", rec.Txid, rec.Reason)
	case rec.DamagedMeta != "":
		info.Recovery = "damaged meta: " + rec.DamagedMeta
	}
	if rec.DamagedMeta != "" && rec.FellBack {
		info.Recovery += "; damaged meta: " + rec.DamagedMeta
	}
	return info, db.View(func(tx *rivet.Tx) error {
		info.Txid = uint64(tx.ID())
		return tx.ForEach(func([]byte, *rivet.Bucket) error { info.Buckets++; return nil })
	})
}

func bboltInfo(path string, w io.Writer, info *fileInfo) (err error) {
	defer recoverDamage(path, &err)
	db, err := openBboltReadOnly(path, w)
	if err != nil {
		return err
	}
	defer db.Close()
	info.PageSize = db.Info().PageSize
	st := db.Stats()
	info.FreePages, info.PendingPages = st.FreePageN, st.PendingPageN
	return db.View(func(tx *bolt.Tx) error {
		info.Txid = uint64(tx.ID())
		return tx.ForEach(func([]byte, *bolt.Bucket) error { info.Buckets++; return nil })
	})
}

// readRivetMetas decodes both meta pages of a rivet file with the
// library's own validation, reporting each slot's state.
func readRivetMetas(path string) []metaInfo {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	metas, errs := inspect.ReadMetas(f, fi.Size())
	out := make([]metaInfo, 2)
	for slot, m := range metas {
		if m == nil {
			out[slot] = metaInfo{Slot: slot, Problem: errs[slot].Error()}
			continue
		}
		out[slot] = metaInfo{Slot: slot, Valid: true, FormatVersion: m.FormatVersion,
			Txid: m.Txid, Steady: m.Steady, HighWaterMark: m.HWM, FreePages: m.FreePages,
			Regions: m.Regions, DeltaRuns: len(m.Delta)}
	}
	return out
}

func printInfo(w io.Writer, info *fileInfo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s\n", info.Path)
	fmt.Fprintf(tw, "format\t%s\n", info.Format)
	fmt.Fprintf(tw, "file size\t%d (%s)\n", info.FileSize, sizeString(info.FileSize))
	fmt.Fprintf(tw, "page size\t%d\n", info.PageSize)
	fmt.Fprintf(tw, "transaction\t%d\n", info.Txid)
	fmt.Fprintf(tw, "top-level buckets\t%d\n", info.Buckets)
	fmt.Fprintf(tw, "free pages\t%d (%s)\n", info.FreePages, sizeString(int64(info.FreePages)*int64(info.PageSize)))
	if info.Format == formatBbolt {
		fmt.Fprintf(tw, "pending pages\t%d\n", info.PendingPages)
	}
	for _, m := range info.Metas {
		if !m.Valid {
			fmt.Fprintf(tw, "meta %d\tdamaged: %s\n", m.Slot, m.Problem)
			continue
		}
		fmt.Fprintf(tw, "meta %d\tformat %d, transaction %d (builds on %d), %d pages, %d free, %d regions, %d delta runs\n",
			m.Slot, m.FormatVersion, m.Txid, m.Steady, m.HighWaterMark, m.FreePages, m.Regions, m.DeltaRuns)
	}
	if info.Recovery != "" {
		fmt.Fprintf(tw, "recovery\t%s\n", info.Recovery)
	}
	return tw.Flush()
}

func newInspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print the bucket structure as JSON: nested buckets and their key counts",
		Long: `Prints FILE's bucket structure as JSON, as bbolt's own "inspect" does: the
root, its buckets and their nested buckets, each with the number of plain
keys it holds. Reads rivet and bbolt files; opens FILE read-only and never
writes to it.`,
		Example: `  rivet inspect app.db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			path := args[0]
			format, err := detectFormat(path)
			if err != nil {
				return err
			}
			var structure any
			if format == formatBbolt {
				defer recoverDamage(path, &err)
				db, err := openBboltReadOnly(path, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer db.Close()
				err = db.View(func(tx *bolt.Tx) error { structure = tx.Inspect(); return nil })
				if err != nil {
					return err
				}
			} else {
				db, err := openRivetReadOnly(path, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer db.Close()
				err = db.View(func(tx *rivet.Tx) error { structure = tx.Inspect(); return tx.Err() })
				if err != nil {
					return err
				}
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(structure)
		},
	}
	return cmd
}

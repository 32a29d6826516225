package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/spf13/cobra"
)

func newCompactCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "compact FILE",
		Short: "Give a rivet file's free space back to the file system, in place",
		Long: `Opens FILE (which no other process may have open), runs DB.Compact — the
online compaction a running program can also call — and closes it, printing
the file's size before and after. Pages near the end of the file are moved
into free space lower down and the free tail is cut. Pages are moved as they
are, not repacked: a file whose pages are half empty keeps them so (an
offline copy repacks them).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			before := fi.Size()
			db, err := rivet.Open(path, 0o600, &rivet.Options{Timeout: time.Second})
			if errors.Is(err, rerrors.ErrTimeout) {
				return fmt.Errorf("%s is open in another process: stop it first, or call DB.Compact from that process", path)
			}
			if err != nil {
				return err
			}
			start := time.Now()
			released, err := db.Compact(context.Background())
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			fi, err = os.Stat(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s -> %s (state %s smaller) in %s\n", path,
				sizeString(before), sizeString(fi.Size()), sizeString(released), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

// sizeString prints a byte count in binary units.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

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
the file's size before and after. Half-empty leaves are packed, pages near
the end of the file are moved into free space lower down and the free tail
is cut. On a terminal, a progress bar shows the phase and the bytes
rewritten so far of the bytes to rewrite (an estimate that can grow as
the compaction finds more to move).`,
		Example: `  rivet compact app.db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			before := fi.Size()
			if format, err := detectFormat(path); err != nil {
				return err
			} else if format != formatRivet {
				return fmt.Errorf("%s is a %s file: rivet compact works in place on rivet files (convert with rivet import)", path, format)
			}
			db, err := rivet.Open(path, 0o600, &rivet.Options{Timeout: time.Second})
			if errors.Is(err, rerrors.ErrTimeout) {
				return fmt.Errorf("%s is open in another process%s: stop it first, or call DB.Compact from that process", path, lockHolder(path))
			}
			if err != nil {
				return err
			}
			start := time.Now()
			bar := &byteBar{w: cmd.ErrOrStderr(), label: "compacting"}
			phase := ""
			released, err := db.CompactWith(context.Background(), &rivet.CompactOptions{Progress: func(p rivet.CompactProgress) {
				if p.Phase != phase {
					phase = p.Phase
					bar.describe("compacting (" + phase + ")")
				}
				bar.set(p.Moved, p.ToMove)
			}})
			bar.finish()
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

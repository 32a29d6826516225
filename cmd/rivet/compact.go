package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
is cut. On a terminal, a progress line shows the bytes rewritten so far
(how many there will be is known only at the end).`,
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
			stop := showCompactProgress(cmd.ErrOrStderr(), db)
			released, err := db.Compact(context.Background())
			stop()
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

// showCompactProgress draws, on a terminal, the bytes compaction has
// rewritten so far (from DB.Stats), until the returned func is called,
// which erases the line. The total is known only at the end, so this is a
// counter, not a bar.
func showCompactProgress(w io.Writer, db *rivet.DB) (stop func()) {
	if !isTerminal(w) {
		return func() {}
	}
	base := db.Stats().CompactPagesRewritten
	pageSize := int64(db.Info().PageSize)
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				moved := (db.Stats().CompactPagesRewritten - base) * pageSize
				fmt.Fprintf(w, "\r\033[Kcompacting: %s rewritten, %s", sizeString(moved), time.Since(start).Round(100*time.Millisecond))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

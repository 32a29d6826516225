package main

import (
	"github.com/spf13/cobra"
)

func init() { registerCommand(newExportCmd) }

func newExportCmd() *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "export SRC.rivet DST.bbolt",
		Short: "Copy a rivet file into a new bbolt file (the way back), then verify the copy",
		Long: `The reverse of import: copies every bucket, nested bucket, key, value and
sequence number of the rivet file SRC into a new bbolt file DST, in write
transactions of at most --tx-size bytes, then walks both files and compares
them entry by entry, printing counts and a SHA-256 digest of each side;
exit status 1 if they differ. The result is a file bbolt opens and checks as
its own.

SRC is opened read-only and never changed. DST is written: it must not exist
unless --force is given; it is built under a temporary name and renamed to
DST once complete and verified, with one flush at the end.`,
		Example: `  rivet export app.rivet app.bbolt
  rivet export --force --page-size 4096 app.rivet app.bbolt`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return migrate(cmd, args[0], args[1], formatRivet, &f)
		},
	}
	f.add(cmd)
	return cmd
}

package main

import (
	"github.com/spf13/cobra"
)

func init() { registerCommand(newImportCmd) }

func newImportCmd() *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "import SRC.bbolt DST.rivet",
		Short: "Copy a bbolt file into a new rivet file, then verify the copy",
		Long: `Copies every bucket, nested bucket, key, value and sequence number of the
bbolt file SRC into a new rivet file DST, in write transactions of at most
--tx-size bytes, then walks both files (one read transaction each) and
compares them entry by entry. It prints the counts (buckets, keys, bytes of
keys and values) and a SHA-256 digest of each side's contents; exit status 1
if they differ.

SRC is opened read-only and never changed. DST is written: it must not exist
unless --force is given. The copy is built under a temporary name next to
DST and renamed to DST only once it is complete and verified, so a failed or
interrupted import leaves no partial DST (and, with --force, the old DST in
place).

DST's commits are not flushed one by one: nothing but the finished copy is
of any use, so one flush at the end makes it durable (a crash before that
leaves only the temporary file, which is never renamed).

On a terminal, a progress bar counts entries; its total comes from a first
pass over SRC's keys (a read of the leaves only, which also warms the page
cache the copy then reads).`,
		Example: `  rivet import app.bbolt app.rivet
  rivet import --tx-size 16MiB --page-size 8192 app.bbolt app.rivet
  rivet import --force app.bbolt app.rivet`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return migrate(cmd, args[0], args[1], formatBbolt, &f)
		},
	}
	f.add(cmd)
	return cmd
}

package main

import (
	"io"

	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree writing to stdout and stderr, so tests
// run the real commands against buffers.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "rivet",
		Short: "Tools for rivet, an embedded copy-on-write B+tree key/value store",
		// Errors are printed once by main, with the "rivet:" prefix; cobra's
		// own printing would repeat them, and usage text after a runtime
		// error (a corrupt file, a full disk) only buries the message.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newBenchCmd(), newStatsCmd(), newCheckCmd(), newCompactCmd(), newVersionCmd())
	return root
}

// Command rivet is the command-line tool of the rivet key/value store.
//
//	rivet bench [--vs bbolt]   measure rivet (against bbolt) on this machine's disk
//	rivet stats FILE           print a database file's statistics
//	rivet check FILE           verify a database file; non-zero exit on problems
//	rivet version              print the build's versions
//
// From a checkout: go -C cmd/rivet run . bench --vs bbolt
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rivet:", err)
		os.Exit(1)
	}
}

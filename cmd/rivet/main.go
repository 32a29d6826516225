// Command rivet is the command-line tool of the rivet key/value store: it
// inspects, checks, converts, backs up, salvages and pictures rivet files
// (and bbolt files on their way to rivet), and benchmarks rivet against
// bbolt on this machine's disk. Run "rivet --help" for the commands.
//
// Install: go install github.com/rivetkv/rivet/cmd/rivet@latest
// From a checkout: go run ./cmd/rivet bench --vs bbolt
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

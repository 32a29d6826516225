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
	"runtime/debug"
)

func main() {
	// bbolt reads a damaged file through its memory map without bounds: on
	// a truncated file it touches pages past the end of the mapping, and
	// the fault kills the process unless it becomes a panic, which
	// recoverDamage turns into a one-line "damaged file" error. Commands
	// read on this goroutine, the only one this setting covers. (Seen in a
	// CI run: stats of a truncated bbolt file died of SIGSEGV in bbolt's
	// page check, depending on what happened to be mapped past the file.)
	debug.SetPanicOnFault(true)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

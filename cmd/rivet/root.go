package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes, the same for every command (documented in the root help).
const (
	exitOK      = 0 // the command did what was asked and found nothing wrong
	exitProblem = 1 // the command failed or found a problem (damage, a lock held, I/O)
	exitUsage   = 2 // the command line was wrong: unknown command or flag, wrong arguments
)

// registered holds the constructors of the commands that files of this
// package add with registerCommand from their init functions, so that each
// command lives in its own file and newRootCmd need not list them.
var registered []func() *cobra.Command

// registerCommand adds a top-level command built by newCmd.
func registerCommand(newCmd func() *cobra.Command) { registered = append(registered, newCmd) }

// usageError marks an error as the command line's fault (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError: what a command's RunE returns when its
// arguments are wrong in a way cobra's validators cannot see.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// newRootCmd builds the command tree writing to stdout and stderr, so tests
// run the real commands against buffers.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "rivet",
		Short: "Tools for rivet, an embedded copy-on-write B+tree key/value store",
		Long: `Tools for rivet files, and for bbolt files on their way to rivet.

Read-only commands (info, buckets, keys, get, dump, inspect, stats, check,
pages, page, map) open the file read-only and never change it; they read
rivet and bbolt files alike unless their help says otherwise.

Exit status: 0 when the command succeeded and found nothing wrong, 1 when it
failed or found a problem (a damaged file, a file locked by another process,
an I/O error), 2 when the command line was wrong.`,
		// Errors are printed once by execute, with the "rivet:" prefix;
		// cobra's own printing would repeat them, and usage text after a
		// runtime error (a corrupt file, a full disk) only buries the
		// message.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().DurationVar(&lockWait, "lock-timeout", 5*time.Second,
		"how long to wait for a file another process has locked before giving up")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newBenchCmd(), newStatsCmd(), newCheckCmd(), newCompactCmd(), newVersionCmd())
	for _, newCmd := range registered {
		root.AddCommand(newCmd())
	}
	markUsageErrors(root)
	return root
}

// markUsageErrors wraps every command's argument validator so that its
// errors are usageErrors: cobra reports a wrong argument count as a plain
// error, indistinguishable from a command's own failure.
func markUsageErrors(cmd *cobra.Command) {
	if cmd.Args != nil {
		validate := cmd.Args
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := validate(c, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
}

// execute runs the command line args and returns the process's exit code,
// printing an error as one line (and, for usage errors, where to find the
// usage). main and the in-process tests both go through it.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "rivet:", oneLine(err))
	var usage usageError
	if errors.As(err, &usage) || isUnknownCommand(root, cmd, err) {
		if cmd == root {
			fmt.Fprintf(stderr, "Usage: rivet COMMAND [ARGS]\nRun 'rivet --help' for the commands.\n")
		} else if cmd != nil {
			fmt.Fprintf(stderr, "Usage: %s\nRun '%s --help' for details and examples.\n", cmd.UseLine(), cmd.CommandPath())
		}
		return exitUsage
	}
	return exitProblem
}

// isUnknownCommand reports whether err is cobra's "unknown command" error:
// cobra returns it from the root, before any command ran.
func isUnknownCommand(root, cmd *cobra.Command, err error) bool {
	return cmd == root && strings.HasPrefix(err.Error(), "unknown command")
}

// oneLine joins a multi-line error message into one line, so that no
// command prints more than one line per error.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " \u2014 ")), " ")
}

// commandNames lists the top-level command names, sorted (for tests).
func commandNames(root *cobra.Command) []string {
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	sort.Strings(names)
	return names
}

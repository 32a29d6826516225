package main

import (
	"io"
	"strings"
	"testing"
)

// TestEveryCommandHasHelp: every command says what it does, has an
// example, and "rivet CMD --help" prints them with exit code 0; the root
// help documents the exit codes.
func TestEveryCommandHasHelp(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	names := commandNames(root)
	for _, want := range []string{"bench", "buckets", "check", "compact", "dump", "get", "info", "inspect", "keys", "stats", "version"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("command %s missing: %v", want, names)
		}
	}
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Short == "" || c.Long == "" || c.Example == "" {
			t.Errorf("%s: Short %q, Long %d bytes, Example %q: all three are required", c.Name(), c.Short, len(c.Long), c.Example)
			continue
		}
		out, errOut, code := runBin(t, c.Name(), "--help")
		wantCode(t, code, 0, out, errOut)
		if !strings.Contains(out, "Examples:") || !strings.Contains(out, strings.TrimSpace(strings.Split(c.Example, "\n")[0])) {
			t.Errorf("rivet %s --help lacks its example:\n%s", c.Name(), out)
		}
	}
	out, errOut, code := runBin(t, "--help")
	wantCode(t, code, 0, out, errOut)
	for _, want := range []string{"Exit status: 0", "1 when it", "2 when the command line was wrong"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("root help lacks %q:\n%s", want, out)
		}
	}
}

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// rivetBin is the tool built once by TestMain: the per-command tests run
// the real binary, as a user does, and check its output and exit code.
var rivetBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rivet-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rivetBin = filepath.Join(dir, "rivet")
	build := exec.Command("go", "build", "-o", rivetBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the rivet binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runBin runs the built binary with args and returns its stdout, stderr
// and exit code.
func runBin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runBinInput(t, nil, args...)
}

// runBinInput is runBin with stdin.
func runBinInput(t *testing.T, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(rivetBin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running rivet %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// wantCode fails the test unless code is want, showing the output.
func wantCode(t *testing.T, code, want int, stdout, stderr string) {
	t.Helper()
	if code != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
}

// fileDigest returns the SHA-256 of path's bytes: read-only commands must
// leave it unchanged.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

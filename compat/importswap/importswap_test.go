// Package importswap checks rivet's central promise: a bbolt program moves to
// rivet by changing its import paths, and then compiles and behaves the same.
//
// testdata/program/main.go.txt is an ordinary go.etcd.io/bbolt v1.5 program
// that prints a transcript of everything it observes. The test builds and
// runs it twice in temporary modules, once as written and once with the
// import paths rewritten to rivet's, and requires identical transcripts.
package importswap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	programFile = "testdata/program/main.go.txt"

	bboltPath        = "go.etcd.io/bbolt"
	bboltErrorsPath  = "go.etcd.io/bbolt/errors"
	rivetPath        = "github.com/rivetkv/rivet"
	rivetErrorsPath  = "github.com/rivetkv/rivet/errors"
	sysPath          = "golang.org/x/sys"
	programModule    = "compatprogram"
	runTimeout       = 3 * time.Minute
	maxDiffLines     = 200
	diffContextLines = 2
)

// benchModule is what the test needs from bench/go.mod and bench/go.sum:
// the Go version and the versions of bbolt and x/sys the benchmark harness
// pins (the bbolt rivet is measured against), so both programs build from the module cache with checksums the
// repository already vouches for.
type benchModule struct {
	goVersion string
	versions  map[string]string // module path -> version
	sum       []byte            // go.sum lines of those modules
}

func loadBenchModule(t *testing.T, goBin, benchDir string) benchModule {
	t.Helper()
	cmd := exec.Command(goBin, "mod", "edit", "-json", filepath.Join(benchDir, "go.mod"))
	cmd.Env = goEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v\n%s", err, stderrOf(err))
	}
	var mf struct {
		Go      string
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mf); err != nil {
		t.Fatalf("parse go mod edit -json: %v", err)
	}
	m := benchModule{goVersion: mf.Go, versions: map[string]string{}}
	for _, r := range mf.Require {
		m.versions[r.Path] = r.Version
	}
	for _, p := range []string{bboltPath, sysPath} {
		if m.versions[p] == "" {
			t.Fatalf("bench/go.mod does not require %s", p)
		}
	}
	sum, err := os.ReadFile(filepath.Join(benchDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.SplitAfter(string(sum), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == bboltPath || f[0] == sysPath) {
			m.sum = append(m.sum, line...)
		}
	}
	if !bytes.Contains(m.sum, []byte(bboltPath+" "+m.versions[bboltPath]+" h1:")) {
		t.Fatalf("bench/go.sum has no checksum for %s %s", bboltPath, m.versions[bboltPath])
	}
	return m
}

// rewriteImports turns the bbolt program into the rivet one by changing
// exactly its two import paths, as a user would.
func rewriteImports(t *testing.T, src string) string {
	t.Helper()
	for _, imp := range []string{`bolt "` + bboltPath + `"`, `berrors "` + bboltErrorsPath + `"`} {
		if strings.Count(src, imp) != 1 {
			t.Fatalf("program must import %s exactly once", imp)
		}
	}
	out := strings.Replace(src, `"`+bboltErrorsPath+`"`, `"`+rivetErrorsPath+`"`, 1)
	out = strings.Replace(out, `"`+bboltPath+`"`, `"`+rivetPath+`"`, 1)
	if strings.Contains(out, `"go.etcd.io/`) {
		t.Fatal("rewritten program still imports from go.etcd.io")
	}
	return out
}

// writeModule lays out a one-package main module in dir.
func writeModule(t *testing.T, dir, goMod string, goSum []byte, src string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"go.mod": []byte(goMod), "go.sum": goSum, "main.go": []byte(src)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goEnv is the environment of the go commands the test runs: the caller's,
// with -mod=mod added to GOFLAGS (replacing any other -mod) so the temporary
// modules resolve without vendoring or a read-only go.mod, and workspaces
// off so no go.work above the temporary directory applies. GOPROXY is left
// as it is; with the go.sum lines copied in, the module cache suffices.
func goEnv() []string {
	var env []string
	var flags []string
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "GOFLAGS="):
			for _, f := range strings.Fields(strings.TrimPrefix(kv, "GOFLAGS=")) {
				if !strings.HasPrefix(f, "-mod=") {
					flags = append(flags, f)
				}
			}
		case strings.HasPrefix(kv, "GOWORK="):
		default:
			env = append(env, kv)
		}
	}
	flags = append(flags, "-mod=mod")
	return append(env, "GOFLAGS="+strings.Join(flags, " "), "GOWORK=off")
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// run is the outcome of `go run .` in one module.
type run struct {
	stdout, stderr []byte
	err            error
}

func goRun(ctx context.Context, goBin, dir string) run {
	cmd := exec.CommandContext(ctx, goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return run{stdout.Bytes(), stderr.Bytes(), err}
}

func TestImportPathSwap(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found:", err)
	}
	src, err := os.ReadFile(programFile)
	if err != nil {
		t.Fatal(err)
	}
	rootDir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	benchDir := filepath.Join(rootDir, "bench")
	if _, err := os.Stat(filepath.Join(rootDir, "doc.go")); err != nil {
		t.Fatalf("rivet root not found at %s: %v", rootDir, err)
	}
	bm := loadBenchModule(t, goBin, benchDir)

	tmp := t.TempDir()
	bboltDir, rivetDir := filepath.Join(tmp, "bbolt"), filepath.Join(tmp, "rivet")
	sysReq := fmt.Sprintf("\t%s %s // indirect\n", sysPath, bm.versions[sysPath])
	writeModule(t, bboltDir, fmt.Sprintf("module %s\n\ngo %s\n\nrequire (\n\t%s %s\n%s)\n",
		programModule, bm.goVersion, bboltPath, bm.versions[bboltPath], sysReq), bm.sum, string(src))
	writeModule(t, rivetDir, fmt.Sprintf("module %s\n\ngo %s\n\nrequire (\n\t%s v0.0.0\n%s)\n\nreplace %s => %s\n",
		programModule, bm.goVersion, rivetPath, sysReq, rivetPath, rootDir), bm.sum, rewriteImports(t, string(src)))

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if dl, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-5*time.Second))
		defer cancel()
	}
	var runs [2]run
	var wg sync.WaitGroup
	for i, dir := range []string{bboltDir, rivetDir} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = goRun(ctx, goBin, dir)
		}()
	}
	wg.Wait()

	bb, rv := runs[0], runs[1]
	if bb.err != nil {
		t.Fatalf("the bbolt program failed: %v\nstderr:\n%s\nstdout tail:\n%s", bb.err, bb.stderr, tail(bb.stdout, 20))
	}
	// The reference run must have done what the program expects of bbolt,
	// or the comparison proves nothing.
	for _, want := range []string{
		"second open readonly=false: ErrTimeout\n",
		"CreateBucket existing: ErrBucketExists root-alias=true\n",
		"batch failures: [{3 7 app:batch item rejected}]\n",
		"main check problems: 0\n",
		"compacted: same content=true",
		"reopen: same content=true",
	} {
		if !bytes.Contains(bb.stdout, []byte(want)) {
			t.Errorf("bbolt transcript lacks %q", want)
		}
	}
	if !bytes.HasSuffix(bb.stdout, []byte("\ndone\n")) {
		t.Errorf("bbolt transcript does not end with done")
	}
	if rv.err != nil {
		t.Errorf("the rivet program failed: %v\nstderr:\n%s", rv.err, rv.stderr)
	} else if len(rv.stderr) > 0 {
		t.Logf("rivet program stderr:\n%s", rv.stderr)
	}
	if !bytes.Equal(bb.stdout, rv.stdout) {
		t.Errorf("transcripts differ (- bbolt, + rivet):\n%s", lineDiff(string(bb.stdout), string(rv.stdout)))
	}
	t.Logf("compared %d transcript lines", bytes.Count(bb.stdout, []byte("\n")))
}

func tail(b []byte, n int) []byte {
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, nil)
}

// lineDiff renders the difference between two texts line by line, from a
// longest common subsequence, with a few lines of context around each
// change and at most maxDiffLines lines in all.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte
		line string
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i]})
			i++
		default:
			ops = append(ops, op{'+', y[j]})
			j++
		}
	}
	keep := make([]bool, len(ops))
	for k, o := range ops {
		if o.kind != ' ' {
			for c := max(0, k-diffContextLines); c <= min(len(ops)-1, k+diffContextLines); c++ {
				keep[c] = true
			}
		}
	}
	var sb strings.Builder
	n, skipped := 0, false
	for k, o := range ops {
		if !keep[k] {
			skipped = true
			continue
		}
		if skipped {
			sb.WriteString("...\n")
			skipped = false
		}
		if n == maxDiffLines {
			sb.WriteString("... (diff truncated)\n")
			break
		}
		line := o.line
		if len(line) > 300 {
			line = line[:300] + "…"
		}
		fmt.Fprintf(&sb, "%c %s\n", o.kind, line)
		n++
	}
	return sb.String()
}

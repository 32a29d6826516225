package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// A child is this package's binary re-executed to run one task in a process
// of its own, for what can only be measured or survived that way: peak RSS
// is a property of a whole process (memory, large-value), and a check on a
// damaged file may crash its process or never end (hostile-check: on
// bbolt, a cycle in the tree is a stack overflow, fatal and not a panic).
//
// The parent names the task and its arguments in environment variables;
// this package's init function recognises them, runs the task before main
// and exits, so every binary linking the package can serve as a child
// without help from main. The child prints its result as one line of JSON,
// the last of its stdout, with its own peak RSS: it reports its own
// high-water mark (VmHWM in /proc/self/status on Linux) rather than letting
// the parent read ru_maxrss from wait4, because on Linux a child's
// ru_maxrss is never below the RSS its parent had when it forked (the
// kernel carries the pre-exec address space's high-water mark over exec),
// so a parent that just built a 256 MiB file would see every child use
// 256 MiB. Where /proc is missing the child falls back to its own
// getrusage, which macOS and the BSDs do not inflate that way.

// Environment variables of a child.
const (
	childEnvTask = "RIVET_BENCH_CHILD_TASK" // task name; its presence makes the process a child
	childEnvArgs = "RIVET_BENCH_CHILD_ARGS" // the task's arguments, a JSON object of strings
)

// childResultPrefix starts the child's line of output.
const childResultPrefix = "rivet-bench-child-result "

// childTask is the body of a child process: it gets the arguments the
// parent passed and returns the figures to report.
type childTask func(args map[string]string) (childResult, error)

// childResult is what a child reports.
type childResult struct {
	// Figures are the task's measurements, by name.
	Figures map[string]float64 `json:"figures,omitempty"`
	// PeakRSS is the child's peak resident set size in bytes.
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// childTasks are the registered tasks. Tasks register from package
// variable initialisers (registerChild), which run before init.
var childTasks = map[string]childTask{}

// registerChild registers a child task from a package variable initialiser.
func registerChild(name string, task childTask) bool {
	if _, dup := childTasks[name]; dup {
		panic("bench: child task registered twice: " + name)
	}
	childTasks[name] = task
	return true
}

func init() {
	name, ok := os.LookupEnv(childEnvTask)
	if !ok {
		return
	}
	res, err := runChildTask(name, os.Getenv(childEnvArgs))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rivet bench child:", err)
		os.Exit(2)
	}
	line, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rivet bench child:", err)
		os.Exit(2)
	}
	fmt.Printf("%s%s\n", childResultPrefix, line)
	os.Exit(0)
}

// runChildTask runs the named task in this process, as a child does.
func runChildTask(name, argJSON string) (childResult, error) {
	task, ok := childTasks[name]
	if !ok {
		return childResult{}, fmt.Errorf("unknown child task %q", name)
	}
	args := map[string]string{}
	if argJSON != "" {
		if err := json.Unmarshal([]byte(argJSON), &args); err != nil {
			return childResult{}, fmt.Errorf("arguments: %w", err)
		}
	}
	res, err := task(args)
	if err != nil {
		return childResult{}, err
	}
	rss, ok := ownPeakRSS()
	if !ok {
		return childResult{}, errNoChildRSS
	}
	res.PeakRSS = rss
	return res, nil
}

// childError is runChild's error when the child did not report a result:
// it crashed, failed or ran out of time.
type childError struct {
	Task string
	// TimedOut reports that the child was stopped at its deadline.
	TimedOut bool
	// Err is the process's exit error; Stderr the start of its standard
	// error (a crash's message and the top of its stack).
	Err    error
	Stderr string
}

func (e *childError) Error() string {
	if e.TimedOut {
		return fmt.Sprintf("child %s did not finish in time", e.Task)
	}
	return fmt.Sprintf("child %s: %v: %s", e.Task, e.Err, e.Stderr)
}

// Crash returns the first line of the child's standard error that says
// why it died ("fatal error: stack overflow", "panic: ..."), or "".
func (e *childError) Crash() string {
	for _, line := range strings.Split(e.Stderr, "\n") {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "runtime:") {
			return line
		}
	}
	return ""
}

// runChild runs task in a child process with args, stopping it after
// timeout (0: only when ctx ends), and returns what it reported. A child
// that did not report is a *childError.
func runChild(ctx context.Context, task string, args map[string]string, timeout time.Duration) (childResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return childResult{}, err
	}
	argJSON, err := json.Marshal(args)
	if err != nil {
		return childResult{}, err
	}
	runCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(runCtx, exe)
	cmd.Env = append(os.Environ(), childEnvTask+"="+task, childEnvArgs+"="+string(argJSON))
	var stdout strings.Builder
	stderr := &headBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err = cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return childResult{}, ctx.Err()
		}
		return childResult{}, &childError{Task: task, TimedOut: runCtx.Err() != nil, Err: err, Stderr: stderr.String()}
	}
	// The last line is the child's; a binary whose main printed something
	// before (it cannot: init exits first) would not confuse the parse.
	out := strings.TrimSpace(stdout.String())
	line, ok := strings.CutPrefix(out[strings.LastIndexByte(out, '\n')+1:], childResultPrefix)
	if !ok {
		return childResult{}, fmt.Errorf("child %s printed %q, not its result", task, out)
	}
	var res childResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return childResult{}, fmt.Errorf("child %s: %w", task, err)
	}
	return res, nil
}

// headBuffer keeps the first max bytes written to it: a crashing Go
// program prints why first, then every goroutine's stack, which for a
// stack overflow is enormous.
type headBuffer struct {
	max int
	b   []byte
}

// Write implements io.Writer, dropping what does not fit.
func (t *headBuffer) Write(p []byte) (int, error) {
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headBuffer) String() string { return string(t.b) }

// errNoChildRSS is returned where the OS does not report a process's peak
// RSS.
var errNoChildRSS = errors.New("the OS does not report a process's peak RSS here")

// ownPeakRSS returns this process's peak RSS since its exec: VmHWM where
// /proc/self/status has it, getrusage elsewhere.
func ownPeakRSS() (int64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return peakRSS()
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kib * 1024, true
	}
	return peakRSS()
}

package raftstore

// Process kills. The parent re-executes this test binary as a child
// (TestKillChild, selected by an environment variable) that writes to real
// files and reports on stdout what it has been acknowledged; the parent
// kills it with SIGKILL at a random moment, reopens the files and checks
// that everything acknowledged is there. A process kill keeps the page
// cache, so this tests the store's and raft's consistency at any instant
// of a write, not power loss (rivet's own crash tests cover that).
//
//   - TestKillStoreLogs: StoreLogs batches, head truncations (DeleteRange)
//     and SetUint64 on one store. After each kill the file holds exactly
//     the acknowledged operations, or those and the one in flight: no
//     partial batch, no lost entry.
//   - TestKillLeader: a 3-node cluster (in one child process: raft's
//     in-memory transport does not cross processes) applying commands;
//     the kill takes the leader and its followers at once. The two
//     followers restart first and must elect a leader holding every
//     acknowledged command; the old leader rejoins after more commands.

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Environment of a child process.
const (
	killEnvMode  = "RAFTSTORE_KILL_CHILD" // "storelogs" or "cluster"
	killEnvPath  = "RAFTSTORE_KILL_PATH"  // the store file, or the cluster's directory
	killEnvStart = "RAFTSTORE_KILL_START" // the first operation or command id
	killEnvSeed  = "RAFTSTORE_KILL_SEED"
	// killEnvRounds sets the number of kills of each test (default 30 for
	// TestKillStoreLogs, 3 for TestKillLeader).
	killEnvRounds = "RAFTSTORE_KILLS"
)

// killRounds returns the number of kills a test makes.
func killRounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv(killEnvRounds)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestKillChild is the child process's body; it only runs when a kill
// test starts it.
func TestKillChild(t *testing.T) {
	mode := os.Getenv(killEnvMode)
	if mode == "" {
		t.Skip("the child process of the kill tests")
	}
	start, err1 := strconv.ParseUint(os.Getenv(killEnvStart), 10, 64)
	seed, err2 := strconv.ParseUint(os.Getenv(killEnvSeed), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		childFatalf("%v", err)
	}
	// A child whose parent died must not run forever.
	time.AfterFunc(60*time.Second, func() { childFatalf("not killed after 60 s") })
	path := os.Getenv(killEnvPath)
	switch mode {
	case "storelogs":
		childStoreLogs(path, seed, start)
	case "cluster":
		childCluster(path, start)
	}
	childFatalf("unknown mode %q", mode)
}

// childFatalf ends the child with a message the parent reports.
func childFatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "child: "+format+"\n", args...)
	os.Exit(2)
}

// childReport writes one line to the parent, unbuffered: once written it
// survives the kill.
func childReport(format string, args ...any) {
	if _, err := fmt.Fprintf(os.Stdout, format+"\n", args...); err != nil {
		childFatalf("%v", err)
	}
}

// killChild runs the child in mode and SIGKILLs it delay after stop,
// given each line the child writes, returns true. It returns every line
// written.
func killChild(t *testing.T, mode, path string, seed, start uint64, delay time.Duration, stop func(line string) bool) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		killEnvMode+"="+mode, killEnvPath+"="+path,
		killEnvStart+"="+strconv.FormatUint(start, 10), killEnvSeed+"="+strconv.FormatUint(seed, 10))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	killed := false
	timeout := time.After(45 * time.Second)
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("child ended before the kill: %s", stderr.String())
			}
			got = append(got, line)
			if stop(line) {
				time.Sleep(delay)
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
				killed = true
			}
		case <-timeout:
			_ = cmd.Process.Kill()
			t.Fatalf("child still running after 45 s: %s", stderr.String())
		}
	}
	// Lines written before the kill are still in the pipe.
	for line := range lines {
		got = append(got, line)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("child: %v (want killed by a signal): %s", err, stderr.String())
	}
	return got
}

// ---------------------------------------------------------------------------
// TestKillStoreLogs

// killState is the store's content after some operations: the log holds
// every index in [first, last] (none when last is 0) and term is the
// stable store's "term".
type killState struct {
	first, last, term uint64
}

// killKeep is how many entries a truncation keeps, as raft's TrailingLogs.
const killKeep = 200

// killNext applies operation k to st, the state after operations 1..k-1,
// and returns the new state; do, if not nil, performs it on a store.
// Operations: every 11th sets "term" to k; every 7th, once the log has
// more than 300 entries, deletes its head down to killKeep entries; the
// rest append 1 to 64 entries.
func killNext(seed, k uint64, st killState, do *Store) (killState, error) {
	switch {
	case k%11 == 0:
		st.term = k
		if do != nil {
			return st, do.SetUint64([]byte("term"), k)
		}
	case k%7 == 0 && st.last > 0 && st.last-st.first+1 > 300:
		lo, hi := st.first, st.last-killKeep
		st.first = hi + 1
		if do != nil {
			return st, do.DeleteRange(lo, hi)
		}
	default:
		n := 1 + rand.New(rand.NewPCG(seed, k)).Uint64N(64)
		from := st.last + 1
		if st.last == 0 {
			st.first = 1
		}
		st.last = from + n - 1
		if do != nil {
			logs := make([]*raft.Log, 0, n)
			for i := from; i <= st.last; i++ {
				logs = append(logs, killEntry(seed, i))
			}
			return st, do.StoreLogs(logs)
		}
	}
	return st, nil
}

// killEntry is entry i: mostly small, some of a few pages, a few past
// rivet's out-of-line threshold.
func killEntry(seed, i uint64) *raft.Log {
	rng := rand.New(rand.NewPCG(seed, i|1<<63))
	var n int
	switch r := rng.IntN(100); {
	case r < 90:
		n = 16 + rng.IntN(300)
	case r < 98:
		n = 2000 + rng.IntN(6000)
	default:
		n = 40000 + rng.IntN(30000)
	}
	data := make([]byte, n)
	for j := range data {
		data[j] = byte(rng.Uint32())
	}
	return &raft.Log{
		Index: i, Term: i/1000 + 1, Type: raft.LogCommand, Data: data,
		AppendedAt: time.Unix(1_700_000_000+int64(i), int64(i)).UTC(),
	}
}

// childStoreLogs performs operations start, start+1, ... on the store at
// path, reporting "op K" after each returns.
func childStoreLogs(path string, seed, start uint64) {
	s, err := New(Options{Path: path})
	if err != nil {
		childFatalf("%v", err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	term, err := s.GetUint64([]byte("term"))
	if err != nil && !errors.Is(err, ErrKeyNotFound) {
		childFatalf("%v", err)
	}
	st := killState{first, last, term}
	for k := start; ; k++ {
		if st, err = killNext(seed, k, st, s); err != nil {
			childFatalf("op %d: %v", k, err)
		}
		childReport("op %d", k)
	}
}

func TestKillStoreLogs(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "raft.db")
	// states[k] is the state after operations 1..k.
	states := []killState{{}}
	stateAfter := func(k uint64) killState {
		for uint64(len(states)) <= k {
			n := uint64(len(states))
			st, _ := killNext(seed, n, states[n-1], nil)
			states = append(states, st)
		}
		return states[k]
	}
	next := uint64(1) // the next operation the file has not seen
	rounds := killRounds(30)
	var inFlight, entries int
	for round := range rounds {
		stopAt := next + 3 + rng.Uint64N(150)
		// Up to 2 ms later: a few operations on, at any point of one.
		delay := time.Duration(rng.Int64N(int64(2 * time.Millisecond)))
		lines := killChild(t, "storelogs", path, seed, next, delay, func(line string) bool {
			k, err := strconv.ParseUint(strings.TrimPrefix(line, "op "), 10, 64)
			return err == nil && k >= stopAt
		})
		acked := next - 1
		for _, line := range lines {
			k, err := strconv.ParseUint(strings.TrimPrefix(line, "op "), 10, 64)
			if err != nil || k != acked+1 {
				t.Fatalf("round %d: child wrote %q after op %d", round, line, acked)
			}
			acked = k
		}

		s, err := New(Options{Path: path})
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		term, err := s.GetUint64([]byte("term"))
		if err != nil && !errors.Is(err, ErrKeyNotFound) {
			t.Fatal(err)
		}
		got := killState{first, last, term}
		switch got {
		case stateAfter(acked):
			next = acked + 1
		case stateAfter(acked + 1):
			next = acked + 2 // the operation in flight made it
			inFlight++
		default:
			t.Fatalf("round %d: file holds %+v; after the %d acknowledged operations %+v, with the next %+v",
				round, got, acked, stateAfter(acked), stateAfter(acked+1))
		}
		// Every entry of the log, whole.
		if last > 0 {
			wantNoLog(t, s, first-1)
			wantNoLog(t, s, last+1)
			for i := first; i <= last; i++ {
				wantLog(t, s, killEntry(seed, i))
				entries++
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills, %d operations survived (%d times the one in flight too), %d entries checked",
		rounds, next-1, inFlight, entries)
}

// ---------------------------------------------------------------------------
// TestKillLeader

// childCluster runs the cluster in dir and applies commands from id start
// up, 64 at a time, reporting "acked ID LEADER" once every id up to ID is
// acknowledged by LEADER.
func childCluster(dir string, start uint64) {
	c := newCluster(dir, childFatalf)
	for i := range c.nodes {
		c.start(i)
	}
	c.apply(start, start+1_000_000, 64, func(id uint64) {
		childReport("acked %d %d", id, c.leader())
	})
	childFatalf("applied a million commands without being killed")
}

// fsmPrefix checks that every running node's FSM holds exactly the ids
// 1..H for one H, and returns H.
func (c *cluster) fsmPrefix() uint64 {
	c.checkApplied()
	h := ^uint64(0)
	for i, n := range c.nodes {
		if n.raft == nil {
			continue
		}
		if n.fsm.bad != nil {
			c.fatalf("node %d: %v", i, n.fsm.bad)
		}
		ids := n.fsm.sorted()
		top := uint64(len(ids))
		if top > 0 && ids[top-1] != top {
			c.fatalf("node %d holds %d ids up to %d: not 1..%d", i, top, ids[top-1], top)
		}
		if h != ^uint64(0) && top != h {
			c.fatalf("node %d holds ids 1..%d, another node 1..%d", i, top, h)
		}
		h = top
	}
	return h
}

func TestKillLeader(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	next := uint64(1) // the next command id
	rounds := killRounds(3)
	start := time.Now()
	for round := range rounds {
		stopAt := next + 200 + rng.Uint64N(1500)
		var acked uint64
		leader := -1
		parse := func(line string) (uint64, int, bool) {
			var id uint64
			var l int
			if _, err := fmt.Sscanf(line, "acked %d %d", &id, &l); err != nil {
				return 0, 0, false
			}
			return id, l, true
		}
		delay := time.Duration(rng.Int64N(int64(5 * time.Millisecond)))
		lines := killChild(t, "cluster", dir, seed, next, delay, func(line string) bool {
			id, _, ok := parse(line)
			return ok && id >= stopAt
		})
		for _, line := range lines {
			id, l, ok := parse(line)
			if !ok || id <= acked {
				t.Fatalf("round %d: child wrote %q after acked %d", round, line, acked)
			}
			acked, leader = id, l
		}

		// The followers of the killed leader come back first: the
		// leader they elect must hold every acknowledged command.
		c := newCluster(dir, t.Fatalf)
		for i := range c.nodes {
			if i != leader {
				c.start(i)
			}
		}
		c.settle()
		h := c.fsmPrefix()
		if h < acked || h > acked+64 {
			t.Fatalf("round %d: the followers hold commands 1..%d; acknowledged 1..%d, at most 64 more in flight", round, h, acked)
		}
		c.apply(h+1, h+500, 64, nil)
		// The old leader rejoins and catches up.
		c.start(leader)
		c.apply(h+501, h+600, 64, nil)
		c.settle()
		if got := c.fsmPrefix(); got != h+600 {
			t.Fatalf("round %d: nodes hold 1..%d, want 1..%d", round, got, h+600)
		}
		n := c.checkLogs() // stops the cluster
		t.Logf("round %d: killed with n%d leading, %d commands acknowledged; %d on the followers; all %d on 3 nodes after the old leader rejoined (%d entries on all three files)",
			round, leader, acked, h, h+600, n)
		next = h + 601
	}
	t.Logf("%d kills in %v", rounds, time.Since(start).Round(time.Millisecond))
}

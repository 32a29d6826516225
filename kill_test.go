//go:build unix

package rivet

// Real process kills. TestKillRecovery re-executes this test binary as a
// child (TestKillChild, selected by an environment variable) that commits
// numbered transactions to a real file and acknowledges each one on a pipe;
// the parent SIGKILLs it at a random moment, reopens the file and checks that
// it holds exactly a prefix of the committed transactions that includes every
// acknowledged one. A process kill does not lose the page cache, so this tests
// the commit protocol's consistency against process crashes; power loss is the
// crash-simulating file system's job (TestCrashRecovery).
//
// Also here: TestKillCreation (kills while Open creates a new file). The
// workload is in kill_workload_test.go; the child's hold modes serve
// TestProcessLock (process_lock_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
)

var killsFlag = flag.Int("rivet.kills", 0, "process kills for TestKillRecovery (0: 200, or 40 with -short)")

// Environment of a child process. killEnvMode selects the child's job:
// "commit" (TestKillRecovery) or "hold-rw"/"hold-ro" (TestProcessLock).
const (
	killEnvMode     = "RIVET_KILLTEST_MODE"
	killEnvPath     = "RIVET_KILLTEST_PATH"
	killEnvSeed     = "RIVET_KILLTEST_SEED"
	killEnvFrom     = "RIVET_KILLTEST_FROM"
	killEnvPageSize = "RIVET_KILLTEST_PAGESIZE"
	killEnvNoSync   = "RIVET_KILLTEST_NOSYNC"
	killEnvReader   = "RIVET_KILLTEST_READER"
)

// ---------------------------------------------------------------------------
// The child.

// TestKillChild is not a test: it is the child process of TestKillRecovery
// and TestProcessLock, and skips when run any other way. It reports on file
// descriptor 3: "open" just before Open, "ready" after it, "ack N" after
// transaction N committed and, with NoSync, "sync N" after a DB.Sync that
// followed transaction N.
func TestKillChild(t *testing.T) {
	mode := os.Getenv(killEnvMode)
	if mode == "" {
		t.Skip("helper process of TestKillRecovery and TestProcessLock")
	}
	report := os.NewFile(3, "report")
	var err error
	switch mode {
	case "commit":
		err = killChildCommit(report)
	case "compact":
		err = killChildCompact(report)
	case "hold-rw", "hold-ro":
		err = killChildHold(report, mode == "hold-ro")
		if err == nil {
			os.Exit(0)
		}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	fmt.Fprintf(os.Stderr, "kill child: %v\n", err)
	os.Exit(3)
}

// killChildCommit commits transactions from the parent's verified state
// onwards until it is killed. It returns only on an error.
func killChildCommit(report *os.File) error {
	path := os.Getenv(killEnvPath)
	seed, err := strconv.ParseInt(os.Getenv(killEnvSeed), 10, 64)
	if err != nil {
		return err
	}
	from, err := strconv.ParseUint(os.Getenv(killEnvFrom), 10, 64)
	if err != nil {
		return err
	}
	pageSize, err := strconv.Atoi(os.Getenv(killEnvPageSize))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(report, "open"); err != nil {
		return err
	}
	db, err := Open(path, 0o600, &Options{PageSize: pageSize, NoSync: os.Getenv(killEnvNoSync) == "1", Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	var n uint64
	if err := db.View(func(tx *Tx) error {
		n, err = killCounter(tx)
		return err
	}); err != nil {
		return err
	}
	if n != from {
		return fmt.Errorf("the file holds txn %d, the parent verified txn %d", n, from)
	}
	if _, err := fmt.Fprintln(report, "ready"); err != nil {
		return err
	}
	go func() {
		// The parent holds our stdin open; if it dies, stop.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(5)
	}()
	if os.Getenv(killEnvReader) == "1" {
		// A reader that holds snapshots for a while, so frees stay pending
		// across commits; it also checks that what it sees never goes back.
		go func() {
			rng := rand.New(rand.NewSource(seed ^ int64(from)))
			var last uint64
			for {
				err := db.View(func(tx *Tx) error {
					n, err := killCounter(tx)
					if err != nil {
						return err
					}
					if n < last {
						return fmt.Errorf("reader saw txn %d after txn %d", n, last)
					}
					last = n
					time.Sleep(time.Duration(rng.Intn(3000)) * time.Microsecond)
					return nil
				})
				if err != nil {
					fmt.Fprintf(os.Stderr, "kill child: reader: %v\n", err)
					os.Exit(4)
				}
			}
		}()
	}
	noSync := os.Getenv(killEnvNoSync) == "1"
	for i := n + 1; ; i++ {
		ops := killTxn(seed, i)
		if err := db.Update(func(tx *Tx) error { return applyKillOps(tx, ops) }); err != nil {
			return fmt.Errorf("txn %d: %w", i, err)
		}
		if _, err := fmt.Fprintf(report, "ack %d\n", i); err != nil {
			return err
		}
		if i%killCompactEvery == 0 {
			// Online compaction, killed at any point of it like
			// everything else: relocation commits, the shrink, the clean
			// meta, the truncation. It syncs, so with NoSync it also
			// makes txn i durable.
			if _, err := db.Compact(context.Background()); err != nil {
				return fmt.Errorf("compact after txn %d: %w", i, err)
			}
			if noSync {
				if _, err := fmt.Fprintf(report, "sync %d\n", i); err != nil {
					return err
				}
			}
		}
		// With NoSync a commit is durable only after the next DB.Sync.
		if noSync && killTxnSyncs(seed, i) {
			if err := db.Sync(); err != nil {
				return fmt.Errorf("sync after txn %d: %w", i, err)
			}
			if _, err := fmt.Fprintf(report, "sync %d\n", i); err != nil {
				return err
			}
		}
	}
}

// killChildHold opens the file, reports "ready" and keeps it open until its
// standard input closes.
func killChildHold(report *os.File, readOnly bool) error {
	db, err := Open(os.Getenv(killEnvPath), 0o600, &Options{ReadOnly: readOnly, Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if _, err := fmt.Fprintln(report, "ready"); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return db.Close()
}

// ---------------------------------------------------------------------------
// The parent.

// killChild is a running child process and the events it reported.
type killChild struct {
	reaped bool
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bytes.Buffer // its stdout and stderr
	events chan string   // lines from descriptor 3; closed at EOF
}

func startKillChild(t *testing.T, env ...string) *killChild {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &killChild{out: &bytes.Buffer{}, events: make(chan string, 4096)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.ExtraFiles = []*os.File{w}
	c.cmd.Stdout = c.out
	c.cmd.Stderr = c.out
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	// Whatever way the test ends, no child outlives it.
	t.Cleanup(func() { c.kill(func(string) {}) })
	go func() {
		defer close(c.events)
		defer r.Close()
		s := bufio.NewScanner(r)
		for s.Scan() {
			c.events <- s.Text()
		}
	}()
	return c
}

// kill SIGKILLs the child (if it still runs), reads the events it sent
// before dying and reaps it. It returns whether the child died of the kill
// (rather than exiting by itself first).
func (c *killChild) kill(rest func(string)) bool {
	if c.reaped {
		return false
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	for ev := range c.events {
		rest(ev)
	}
	c.reaped = true
	_ = c.cmd.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// wait reaps a child that exits by itself.
func (c *killChild) wait() error {
	c.reaped = true
	return c.cmd.Wait()
}

func (c *killChild) output() string {
	s := c.out.String()
	if len(s) > 4000 {
		s = s[:4000] + "..."
	}
	return s
}

// killPlan says when a child dies.
type killPlan struct {
	afterAcks int           // > 0: kill after this many acks (plus jitter)
	delay     time.Duration // afterAcks == 0: kill this long after "open"
	jitter    time.Duration
	noSync    bool
	reader    bool
	parentRO  bool // the parent verifies with a read-only Open
}

func (p killPlan) String() string {
	when := fmt.Sprintf("%v after open", p.delay)
	if p.afterAcks > 0 {
		when = fmt.Sprintf("%v after ack #%d", p.jitter, p.afterAcks)
	}
	return fmt.Sprintf("kill %s (NoSync %t, reader %t, read-only reopen %t)", when, p.noSync, p.reader, p.parentRO)
}

// TestKillRecovery SIGKILLs a child process that commits numbered
// transactions, at random moments, and after every kill checks the file:
// Open succeeds, Check finds nothing, the last transaction in the file is
// the last acknowledged one or the one after it, and the whole content
// equals the model of exactly that prefix of transactions. The kills
// accumulate on one file. -rivet.kills sets the number of kills and
// -rivet.seed replays a run's workload and kill schedule (the exact kill
// moments depend on timing).
func TestKillRecovery(t *testing.T) {
	seed := testSeed(t)
	kills := 200
	if testing.Short() || raceEnabled {
		// Under the race detector this test checks for races; the full
		// count runs in scripts/test.sh's crash-scale step.
		kills = 40
	}
	if *killsFlag > 0 {
		kills = *killsFlag
	}
	rng := rand.New(rand.NewSource(seed))
	pageSize := []int{1024, 4096}[rng.Intn(2)]
	path := filepath.Join(t.TempDir(), "kill.db")
	model := newMBucket()
	var verified uint64 // the transaction the file is known to hold
	var fallbacks []string
	everReady := false // some child's Open returned, so the file exists
	var (
		totalAcks, syncs, inFlight, lostNoSync, fellBack, beforeReady, readOnly int
		unverified                                                              int // kills whose file could not be reopened read-only
		journalPending                                                          int // read-only reopens refused until a writable one applied the journal
		maxFile                                                                 int64
	)
	start := time.Now()
	for k := 1; k <= kills; k++ {
		p := killPlan{
			noSync:   rng.Intn(4) == 0,
			reader:   rng.Intn(2) == 0,
			parentRO: rng.Intn(2) == 0,
		}
		if rng.Intn(3) == 0 {
			p.delay = time.Duration(rng.Intn(30_000)) * time.Microsecond
		} else {
			p.afterAcks = 1 + rng.Intn(40)
			p.jitter = time.Duration(rng.Intn(2000)) * time.Microsecond
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("kill %d of %d (%v; seed %d, page size %d, verified txn %d): %s", k, kills, p, seed, pageSize, verified, fmt.Sprintf(format, args...))
		}

		env := []string{
			killEnvMode + "=commit",
			killEnvPath + "=" + path,
			killEnvSeed + "=" + strconv.FormatInt(seed, 10),
			killEnvFrom + "=" + strconv.FormatUint(verified, 10),
			killEnvPageSize + "=" + strconv.Itoa(pageSize),
			killEnvNoSync + "=" + boolEnv(p.noSync),
			killEnvReader + "=" + boolEnv(p.reader),
		}
		c := startKillChild(t, env...)
		// durable is the txn every later state must include: with Full
		// durability the last acknowledged one; with NoSync the last one a
		// DB.Sync covered (or the state the child started from).
		lastAck, durable, acks, ready := verified, verified, 0, false
		onEvent := func(ev string) {
			switch {
			case ev == "ready":
				ready = true
			case strings.HasPrefix(ev, "sync "):
				n, err := strconv.ParseUint(ev[5:], 10, 64)
				if err != nil || n != lastAck {
					fail("child reported %q after txn %d", ev, lastAck)
				}
				durable = n
				syncs++
			case strings.HasPrefix(ev, "ack "):
				n, err := strconv.ParseUint(ev[4:], 10, 64)
				if err != nil || n != lastAck+1 {
					fail("child acknowledged %q after txn %d", ev, lastAck)
				}
				lastAck = n
				acks++
				if !p.noSync {
					durable = n
				}
			}
		}
		var timer <-chan time.Time
		stall := time.After(30 * time.Second)
		exited := false
	run:
		for {
			select {
			case ev, ok := <-c.events:
				if !ok {
					exited = true
					break run
				}
				onEvent(ev)
				if ev == "open" && p.afterAcks == 0 {
					timer = time.After(p.delay)
				}
				if p.afterAcks > 0 && acks == p.afterAcks {
					time.Sleep(p.jitter)
					break run
				}
			case <-timer:
				break run
			case <-stall:
				c.kill(onEvent)
				fail("the child made no progress in 30 s (%d acks); output:\n%s", acks, c.output())
			}
		}
		killed := c.kill(onEvent)
		if exited || !killed {
			fail("the child exited by itself (%v); output:\n%s", c.cmd.ProcessState, c.output())
		}
		if strings.Contains(c.out.String(), "DATA RACE") {
			fail("the child reported a data race:\n%s", c.output())
		}
		totalAcks += acks
		everReady = everReady || ready
		if !ready {
			beforeReady++
		}

		// Reopen and verify.
		opts := &Options{ReadOnly: p.parentRO, PageSize: pageSize, Timeout: 5 * time.Second}
		db, err := Open(path, 0o600, opts)
		if p.parentRO && errors.Is(err, ErrJournalPending) {
			// A read-only Open cannot apply the commit journal: a
			// writable one does, then the read-only one sees them.
			journalPending++
			if w, werr := Open(path, 0o600, &Options{PageSize: pageSize, Timeout: 5 * time.Second}); werr != nil {
				fail("writable reopen to apply the journal: %v", werr)
			} else if werr = w.Close(); werr != nil {
				fail("close after applying the journal: %v", werr)
			}
			db, err = Open(path, 0o600, opts)
		}
		if err != nil {
			// Before any child's Open returned, the file may not exist yet
			// or hold no committed state; a read-only Open refuses such a
			// file (a writable one would create it).
			if !everReady && p.parentRO && (errors.Is(err, os.ErrNotExist) || errors.Is(err, rerrors.ErrInvalid)) {
				unverified++
				continue
			}
			fail("reopen: %v", err)
		}
		if p.parentRO {
			readOnly++
		}
		rec := db.Recovery()
		if rec.FellBack {
			fellBack++
			if len(fallbacks) < 5 {
				fallbacks = append(fallbacks, fmt.Sprintf("kill %d (%v): to txid %d: %s", k, p, rec.Txid, rec.Reason))
			}
		}
		var problems []string
		var found uint64
		var got map[string]string
		err = db.View(func(tx *Tx) error {
			for err := range tx.Check() {
				problems = append(problems, err.Error())
			}
			var err error
			found, err = killCounter(tx)
			return err
		})
		if err == nil {
			got, err = dumpDB(db)
		}
		if err != nil {
			_ = db.Close()
			fail("read after reopen (recovery %+v): %v", rec, err)
		}
		if len(problems) > 0 {
			_ = db.Close()
			fail("Check after reopen (recovery %+v): %s", rec, strings.Join(problems, "; "))
		}
		if found < durable || found > lastAck+1 {
			_ = db.Close()
			fail("the file holds txn %d; the last acknowledged txn is %d, the last durable one %d (recovery %+v)", found, lastAck, durable, rec)
		}
		switch {
		case found > lastAck:
			inFlight++
		case found < lastAck:
			lostNoSync += int(lastAck - found)
		}
		for i := verified + 1; i <= found; i++ {
			applyKillModel(model, killTxn(seed, i))
		}
		if want := modelDump(model); !sameDump(got, want) {
			_ = db.Close()
			fail("the file's content is not that of txns 1..%d (recovery %+v): %s", found, rec, describeDiff(got, want))
		}
		compareDB(t, db, model) // cursor order both ways and Get
		verified = found
		if err := db.Close(); err != nil {
			fail("close: %v", err)
		}
		if fi, err := os.Stat(path); err == nil && fi.Size() > maxFile {
			maxFile = fi.Size()
		}
	}
	t.Logf("%d kills in %v (page size %d): %d txns acknowledged, file holds txn %d (max size %d KiB); %d kills before Open returned, %d with the unacknowledged txn committed, %d recoveries fell back, %d read-only reopens (%d of them after a writable one applied the journal); NoSync children: %d DB.Syncs, %d unsynced txns lost",
		kills, time.Since(start).Round(time.Millisecond), pageSize, totalAcks, verified, maxFile/1024, beforeReady, inFlight, fellBack, readOnly, journalPending, syncs, lostNoSync)
	for _, f := range fallbacks {
		t.Logf("fell back: %s", f)
	}
	if verified == 0 {
		t.Fatalf("no transaction survived %d kills", kills)
	}
	// Only kills before any child's Open returned may go unverified, and
	// two in three kills wait for acknowledgements.
	if unverified > kills/2 {
		t.Fatalf("only %d of %d kills were verified", kills-unverified, kills)
	}
}

func boolEnv(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// TestKillCreation kills children while they create a new file: whatever
// Open had done, the file must then open (a writable Open creates it afresh
// if creation had not finished) and be empty or hold the first transactions.
func TestKillCreation(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	runs := 20
	if testing.Short() {
		runs = 5
	}
	dir := t.TempDir()
	outcomes := map[string]int{}
	for k := 1; k <= runs; k++ {
		path := filepath.Join(dir, fmt.Sprintf("create-%d.db", k))
		delay := time.Duration(rng.Intn(4000)) * time.Microsecond
		c := startKillChild(t,
			killEnvMode+"=commit",
			killEnvPath+"="+path,
			killEnvSeed+"="+strconv.FormatInt(seed, 10),
			killEnvFrom+"=0",
			killEnvPageSize+"=1024",
			killEnvNoSync+"=0",
			killEnvReader+"=0",
		)
		var lastAck uint64
		ready := false
		onEvent := func(ev string) {
			if ev == "ready" {
				ready = true
			}
			if strings.HasPrefix(ev, "ack ") {
				lastAck, _ = strconv.ParseUint(ev[4:], 10, 64)
			}
		}
		for ev := range c.events {
			onEvent(ev)
			if ev == "open" {
				break
			}
		}
		time.Sleep(delay)
		if !c.kill(onEvent) {
			t.Fatalf("run %d: the child exited by itself (%v):\n%s", k, c.cmd.ProcessState, c.output())
		}
		size := int64(-1)
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
		// A read-only Open first: it must not fail in any way but "no
		// committed state" unless the child's Open had returned.
		db, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: 5 * time.Second})
		switch {
		case err == nil:
			_ = db.Close()
		case errors.Is(err, ErrJournalPending):
			// Commits in the journal only: a writable Open applies them.
		case ready:
			t.Fatalf("run %d (kill %v after open): read-only open after creation finished: %v", k, delay, err)
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, rerrors.ErrInvalid):
			t.Fatalf("run %d (kill %v after open): read-only open: %v", k, delay, err)
		}
		db, err = Open(path, 0o600, &Options{PageSize: 1024, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("run %d (kill %v after open, file %d bytes, ready %t): writable open: %v", k, delay, size, ready, err)
		}
		mustCheck(t, db)
		var found uint64
		if err := db.View(func(tx *Tx) error {
			found, err = killCounter(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if found < lastAck || found > lastAck+1 {
			t.Fatalf("run %d: file holds txn %d, last ack %d", k, found, lastAck)
		}
		_ = db.Close()
		switch {
		case size < 0:
			outcomes["no file"]++
		case size == 0:
			outcomes["empty file"]++
		case !ready:
			outcomes["killed inside Open"]++
		default:
			outcomes[fmt.Sprintf("created, %d txns", min(found, 2))]++
		}
	}
	var keys []string
	for k, n := range outcomes {
		keys = append(keys, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(keys)
	t.Logf("%d kills during creation: %s", runs, strings.Join(keys, ", "))
}

package difftest

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

var (
	seedFlag  = flag.Int64("rivet.seed", 0, "seed of the first run (0: time-based); printed on every run")
	opsFlag   = flag.Int("difftest.ops", 0, "calls per run (0: 5,000, or 2,000 with -short)")
	seedsFlag = flag.Int("difftest.seeds", 0, "runs, with seeds seed, seed+1, ... (0: 8, or 2 with -short)")
	traceFlag = flag.Bool("difftest.trace", false, "log every call and both answers")
	// shrinkFlag bounds the time spent shrinking a failing trace.
	shrinkFlag = flag.Duration("difftest.shrink", 30*time.Second, "time spent shrinking a failing trace (0: none)")
)

// harness runs calls on both engines and compares them.
type harness struct {
	dir         string
	bolt, rivet *world
	m           *model
	trace       []op
	// known counts the differences explained by a rule (known_test.go),
	// by rule.
	known map[string]int
	// logf, if set, receives every call and its answers.
	logf func(format string, args ...any)
	// commits counts the commits whose databases were compared.
	commits int
	// where counts the calls by where they were made: in the write
	// transaction, in a read transaction, on an ended one, on the DB.
	where [4]int
	// bboltLeaks holds the leaked pages bbolt's Check reported (see
	// ruleBboltLeak).
	bboltLeaks map[string]bool
}

func newHarness(dir string, pageSize int) (*harness, error) {
	h := &harness{dir: dir, m: newModel(), known: map[string]int{}, bboltLeaks: map[string]bool{}}
	for _, w := range []**world{&h.bolt, &h.rivet} {
		eng := boltEngine
		if w == &h.rivet {
			eng = rivetEngine
		}
		path := filepath.Join(dir, eng.name+".db")
		db, err := eng.open(path, false, pageSize)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", eng.name, err)
		}
		*w = &world{eng: eng, path: path, pageSize: pageSize, db: db, txs: map[int]Tx{}, buckets: map[int]Bucket{}, cursors: map[int]Cursor{}}
	}
	return h, nil
}

// close ends every live transaction and closes both databases.
func (h *harness) close() {
	for _, w := range []*world{h.bolt, h.rivet} {
		for _, i := range h.m.txOrder {
			if tx := w.txs[i]; tx != nil && h.m.live(i) {
				_ = tx.Rollback()
			}
		}
		_ = w.db.Close()
	}
}

// nextID is an ID no call of the trace has.
func (h *harness) nextID() int {
	id := 0
	for _, o := range h.trace {
		id = max(id, o.ID+1)
	}
	return id
}

// step makes call o on both engines. The error describes a difference no
// rule explains.
func (h *harness) step(o op) error {
	h.trace = append(h.trace, o)
	switch t := h.m.opTx(o); {
	case t < 0:
		h.where[3]++
	case !h.m.live(t):
		h.where[2]++
	case t == h.m.writeTx:
		h.where[0]++
	default:
		h.where[1]++
	}
	var rb, rr result
	var v verdict
	if t := h.m.opTx(o); t >= 0 && h.m.txs[t].opened < h.m.opened {
		// A handle of the DB before the last reopen: rivet only.
		rb = result{out: "(not run)"}
		h.bolt.keep(o, rb)
		rr = h.rivet.apply(o)
		v = verdict{rule: ruleClosedDB}
		if rr.panicked || !closedAnswerFor(o.Kind, rr) {
			v = verdict{mismatch: true}
		}
	} else {
		rb = h.bolt.apply(o)
		rr = h.rivet.apply(o)
		v = judge(h.m, o, rb, rr)
	}
	if h.logf != nil {
		h.logf("%5d %-60s bbolt: %s | rivet: %s", len(h.trace)-1, o, rb, rr)
	}
	if v.mismatch {
		return fmt.Errorf("answers differ: bbolt %s, rivet %s", rb, rr)
	}
	if v.rule != "" {
		h.known[v.rule]++
	}
	// The model follows bbolt's answer where both agree; a handle is
	// usable only if both sides have it.
	noted := rb
	if v.rule != "" {
		noted = rr
	}
	if rb.tx == nil || rr.tx == nil {
		noted.tx = nil
	}
	if rb.bucket == nil || rr.bucket == nil {
		noted.bucket = nil
	}
	if rb.cursor == nil || rr.cursor == nil {
		noted.cursor = nil
	}
	committed := o.Kind == kTxCommit && h.m.live(o.T) && h.m.txs[o.T].writable && rb.err == "nil" && rr.err == "nil"
	h.m.note(o, noted)
	if v.rollback && h.m.writeTx >= 0 {
		// The engines now hold different states, as the rule expects: end
		// the transaction on both, back to the last commit they agree on.
		t := h.m.writeTx
		_ = h.bolt.txs[t].Rollback()
		_ = h.rivet.txs[t].Rollback()
		h.m.end(t)
	}
	if o.Kind == kReopen && (strings.Contains(rb.out, "open=error") || strings.Contains(rr.out, "open=error")) {
		return fmt.Errorf("reopen failed: bbolt %s, rivet %s", rb, rr)
	}
	if committed || o.Kind == kReopen || o.Kind == kUpdate {
		h.commits++
		if err := h.compareContents(); err != nil {
			return err
		}
		if err := h.check(); err != nil {
			return err
		}
		if h.boltTooBig() {
			return errBoltTooBig
		}
	}
	return nil
}

// errBoltTooBig ends a run early (not a failure): bbolt's file has grown to
// a quarter of its reserved map (see boltTooBig).
var errBoltTooBig = errors.New("bbolt's file reached a quarter of its map")

// boltTooBig reports whether bbolt's file has grown to a quarter of the map
// it reserved. Past the map, bbolt's next commit would remap, and wait for
// the read transactions the run holds open in the same goroutine for ever;
// the margin also bounds the disk a run takes.
func (h *harness) boltTooBig() bool {
	fi, err := os.Stat(h.bolt.path)
	return err == nil && fi.Size() > boltMapSize/4
}

// compareContents walks both databases in full and compares them.
func (h *harness) compareContents() error {
	db, err := dump(h.bolt.db)
	if err != nil {
		return fmt.Errorf("walking bbolt: %w", err)
	}
	dr, err := dump(h.rivet.db)
	if err != nil {
		return fmt.Errorf("walking rivet: %w", err)
	}
	if db == dr {
		return nil
	}
	lb, lr := strings.Split(db, "\n"), strings.Split(dr, "\n")
	for i := 0; i < len(lb) || i < len(lr); i++ {
		var a, b string
		if i < len(lb) {
			a = lb[i]
		}
		if i < len(lr) {
			b = lr[i]
		}
		if a != b {
			return fmt.Errorf("databases differ at line %d of their walks:\n  bbolt: %s\n  rivet: %s", i, a, b)
		}
	}
	return errors.New("databases differ")
}

// dump is the whole content of db as text: every bucket with its sequence
// and every key with its value, depth first in key order.
func dump(db DB) (string, error) {
	var b strings.Builder
	err := db.View(func(tx Tx) error {
		root := tx.Cursor().Bucket()
		fmt.Fprintf(&b, "/ seq=%d\n", root.Sequence())
		return dumpBucket(&b, "", root)
	})
	return b.String(), err
}

func dumpBucket(w *strings.Builder, path string, b Bucket) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				p := path + "/" + show(k)
				fmt.Fprintf(w, "%s seq=%d\n", p, sub.Sequence())
				if err := dumpBucket(w, p, sub); err != nil {
					return err
				}
				continue
			}
		}
		fmt.Fprintf(w, "%s %s=%s\n", path, show(k), show(v))
	}
	return nil
}

// summary describes the database a run left: what its walk holds and
// the largest bucket.
func (h *harness) summary() string {
	d, err := dump(h.rivet.db)
	if err != nil {
		return err.Error()
	}
	buckets, keys := 0, map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		if strings.Contains(line, " seq=") {
			buckets++
			continue
		}
		path, _, _ := strings.Cut(line, " ")
		keys[path]++
	}
	total, largest := 0, 0
	for _, n := range keys {
		total += n
		largest = max(largest, n)
	}
	var sizes []string
	for _, w := range []*world{h.bolt, h.rivet} {
		if fi, err := os.Stat(w.path); err == nil {
			sizes = append(sizes, fmt.Sprintf("%s %d KiB", w.eng.name, fi.Size()>>10))
		}
	}
	return fmt.Sprintf("%d buckets (top level included), %d keys, the largest bucket %d keys; files: %s", buckets, total, largest, strings.Join(sizes, ", "))
}

// check runs each engine's own consistency check.
func (h *harness) check() error {
	var errs []error
	if err := h.bolt.db.View(func(tx Tx) error {
		for err := range tx.(gTx[*bolt.Tx, *bolt.Bucket, *bolt.Cursor]).tx.Check() {
			if strings.HasSuffix(err.Error(), "unreachable unfreed") {
				// Every later check reports the page again: count it once.
				if !h.bboltLeaks[err.Error()] {
					h.bboltLeaks[err.Error()] = true
					h.known[ruleBboltLeak]++
				}
				continue
			}
			errs = append(errs, fmt.Errorf("bbolt: %w", err))
		}
		return nil
	}); err != nil {
		errs = append(errs, err)
	}
	if err := h.rivet.db.View(func(tx Tx) error {
		for err := range tx.(gTx[*rivet.Tx, *rivet.Bucket, *rivet.Cursor]).tx.Check() {
			errs = append(errs, fmt.Errorf("rivet: %w", err))
		}
		return nil
	}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// failure is a run's first unexplained difference.
type failure struct {
	at  int // index of the call in the trace run (len: at the end)
	err error
}

// runTrace replays ops on fresh databases under dir, skipping calls that
// are not valid at their turn (a shrunk trace has some), and returns the
// first difference, or nil.
func runTrace(dir string, pageSize int, ops []op, logf func(string, ...any)) *failure {
	h, err := newHarness(dir, pageSize)
	if err != nil {
		return &failure{at: -1, err: err}
	}
	h.logf = logf
	defer h.close()
	for i, o := range ops {
		if !h.m.valid(o) {
			continue
		}
		if err := h.step(o); errors.Is(err, errBoltTooBig) {
			break
		} else if err != nil {
			return &failure{at: i, err: err}
		}
	}
	if err := h.endRun(); err != nil {
		return &failure{at: len(ops), err: err}
	}
	return nil
}

// endRun ends the live transactions and compares and checks both files.
func (h *harness) endRun() error {
	for _, i := range h.m.txOrder {
		if h.m.live(i) {
			if err := h.step(op{ID: h.nextID(), Kind: kTxRollback, T: i}); err != nil {
				return err
			}
		}
	}
	if err := h.compareContents(); err != nil {
		return err
	}
	return h.check()
}

// signature identifies a failure for shrinking: the call's kind and the
// error without its numbers (handle indices and line numbers change as
// calls are removed).
func signature(ops []op, f *failure) string {
	k := "end"
	if f.at >= 0 && f.at < len(ops) {
		k = ops[f.at].Kind.String()
	}
	msg, _, _ := strings.Cut(f.err.Error(), "\n")
	return k + ": " + strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, msg)
}

// shrink looks for a shorter trace that fails the same way (signature),
// removing chunks of calls while it can, until the deadline.
func shrink(t *testing.T, pageSize int, ops []op, want string, deadline time.Time) []op {
	n := 0
	for chunk := len(ops) / 2; chunk >= 1 && time.Now().Before(deadline); chunk /= 2 {
		for start := 0; start < len(ops) && time.Now().Before(deadline); {
			cand := append(append([]op(nil), ops[:start]...), ops[min(start+chunk, len(ops)):]...)
			n++
			if f := runTrace(t.TempDir(), pageSize, cand, nil); f != nil && f.at >= 0 && signature(cand, f) == want {
				ops = cand[:min(f.at+1, len(cand))]
				continue
			}
			start += chunk
		}
	}
	t.Logf("shrinking ran %d replays", n)
	return ops
}

func formatTrace(ops []op) string {
	var b strings.Builder
	for i, o := range ops {
		fmt.Fprintf(&b, "  %4d %s\n", i, o)
	}
	return b.String()
}

// maxTraceLines bounds the calls a failure prints: a trace that shrinking
// could not cut down is shown by its end, where the failing transaction
// is (the seed replays the rest).
const maxTraceLines = 300

// pageSizeOf is the page size of both files in the run of seed s: 1 KiB
// (rivet's smallest; deep trees from few keys) or 4 KiB, by turns.
func pageSizeOf(s int64) int {
	if s%2 == 0 {
		return 1024
	}
	return 4096
}

// TestDifferential runs random calls on bbolt v1.5.0 and on rivet and
// requires the same answers and the same databases, but for the known
// differences (known_test.go). A failure prints the seed, the call that
// differed, and the shortest failing trace shrinking found.
//
// Long runs: go test -run TestDifferential -difftest.ops=200000
// -difftest.seeds=10 ./difftest/ (add -rivet.seed=N to replay a seed).
func TestDifferential(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	ops, seeds := *opsFlag, *seedsFlag
	if ops == 0 {
		ops = 5000
		if testing.Short() {
			ops = 2000
		}
	}
	if seeds == 0 {
		seeds = 8
		if testing.Short() {
			seeds = 2
		}
	}
	huge := hugeValue()
	if huge == nil {
		t.Log("no value longer than MaxValueSize: address space could not be reserved")
	}
	total := map[string]int{}
	calls, commits, stopped := 0, 0, 0
	var where [4]int
	for s := seed; s < seed+int64(seeds); s++ {
		pageSize := pageSizeOf(s)
		t.Logf("seed %d, %d-byte pages (replay with -rivet.seed=%d -difftest.seeds=1 -difftest.ops=%d)", s, pageSize, s, ops)
		h, err := newHarness(t.TempDir(), pageSize)
		if err != nil {
			t.Fatal(err)
		}
		if *traceFlag {
			h.logf = t.Logf
		}
		g := &gen{r: rand.New(rand.NewPCG(uint64(s), 0x6469666674657374)), m: h.m, huge: huge}
		var fail *failure
		for i := range ops {
			err := h.step(g.next(i))
			if errors.Is(err, errBoltTooBig) {
				t.Logf("seed %d: run ends after %d calls: %v", s, len(h.trace), err)
				stopped++
				break
			}
			if err != nil {
				fail = &failure{at: len(h.trace) - 1, err: err}
				break
			}
		}
		if fail == nil {
			n := len(h.trace)
			if err := h.endRun(); err != nil {
				fail = &failure{at: n, err: err}
			}
		}
		trace := h.trace
		if fail == nil {
			t.Logf("seed %d: %s", s, h.summary())
		}
		h.close()
		if fail != nil {
			if fail.at < len(trace) {
				t.Errorf("seed %d, call %d (%s): %v", s, fail.at, trace[fail.at], fail.err)
			} else {
				t.Errorf("seed %d, at the end of the run: %v", s, fail.err)
			}
			short := trace[:min(fail.at+1, len(trace))]
			if *shrinkFlag > 0 {
				short = shrink(t, pageSize, short, signature(trace, fail), time.Now().Add(*shrinkFlag))
			}
			var replay strings.Builder
			f := runTrace(t.TempDir(), pageSize, short, func(format string, args ...any) {
				fmt.Fprintf(&replay, format+"\n", args...)
			})
			if f == nil {
				t.Fatalf("the trace did not fail when replayed; full trace:\n%s", formatTrace(trace[:min(fail.at+1, len(trace))]))
			}
			answers := replay.String()
			if lines := strings.SplitAfter(answers, "\n"); len(lines) > maxTraceLines {
				answers = fmt.Sprintf("(the first %d calls left out)\n", len(lines)-maxTraceLines) + strings.Join(lines[len(lines)-maxTraceLines:], "")
			}
			t.Fatalf("shortest failing trace (%d calls; it fails at call %d: %v), with both engines' answers:\n%s", len(short), f.at, f.err, answers)
		}
		calls += len(h.trace)
		commits += h.commits
		for i := range where {
			where[i] += h.where[i]
		}
		for k, v := range h.known {
			total[k] += v
		}
	}
	t.Logf("%d calls in %d runs (%d in a write transaction, %d in a read transaction, %d through ended ones, %d on the DB), %d databases compared in full",
		calls, seeds, where[0], where[1], where[2], where[3], commits)
	var rules []string
	for k := range total {
		rules = append(rules, k)
	}
	sort.Strings(rules)
	for _, k := range rules {
		t.Logf("known difference %q: %d times", k, total[k])
	}
	// The runs must have exercised what they claim to compare: a run that
	// ended early (bbolt's file outgrew its map) still made its first
	// thousand calls.
	if calls < (seeds-stopped)*ops+stopped*min(ops, 1000) || commits < seeds*10 {
		t.Fatalf("only %d calls and %d compared commits in %d runs (%d ended early)", calls, commits, seeds, stopped)
	}
	if stopped > 0 {
		t.Logf("%d of %d runs ended early: bbolt's file reached a quarter of its map", stopped, seeds)
	}
}

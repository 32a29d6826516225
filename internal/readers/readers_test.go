package readers

import (
	"flag"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/page"
)

var seedFlag = flag.Int64("rivet.seed", 0, "seed for randomized tests (0: time-based); printed on every run")

func testSeed(t *testing.T) int64 {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -rivet.seed=%d)", seed, seed)
	return seed
}

func meta(txid uint64) *page.Meta { return &page.Meta{Txid: txid, HWM: 100 + txid} }

func txids(ms []*page.Meta) []uint64 {
	var ids []uint64
	for _, m := range ms {
		ids = append(ids, m.Txid)
	}
	return ids
}

func TestZeroTableIsClosed(t *testing.T) {
	var tb Table
	if s, _ := tb.Enter(); s != nil {
		t.Fatalf("Enter on a table never opened returned a slot")
	}
	if got := tb.Held(nil); len(got) != 0 {
		t.Fatalf("Held on a table never opened: %v", txids(got))
	}
	if tb.Current() != nil {
		t.Fatalf("Current on a table never opened is not nil")
	}
	tb.Close() // does nothing, does not block
}

func TestHeldReturnsNewestAndHeldStates(t *testing.T) {
	var tb Table
	tb.Open(meta(1), nil)
	r1, _ := tb.Enter()
	if r1.Meta().Txid != 1 {
		t.Fatalf("reader began on txn %d, want 1", r1.Meta().Txid)
	}
	tb.Publish(meta(2), nil)
	tb.Publish(meta(3), nil) // nobody begins on 2
	r3, _ := tb.Enter()
	if got := txids(tb.Held(nil)); !slices.Equal(got, []uint64{3, 1}) {
		t.Fatalf("Held = %v, want [3 1]", got)
	}
	if open, begun := tb.Stats(); open != 2 || begun != 2 {
		t.Fatalf("Stats = %d open, %d begun; want 2, 2", open, begun)
	}
	tb.Leave(r1)
	if got := txids(tb.Held(nil)); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("after the old reader left, Held = %v, want [3]", got)
	}
	tb.Leave(r3)
	if got := txids(tb.Held(nil)); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("the newest state must stay in Held: %v", got)
	}
	if open, begun := tb.Stats(); open != 0 || begun != 2 {
		t.Fatalf("Stats = %d open, %d begun; want 0, 2", open, begun)
	}
	if n := len(tb.slots); n != 1 {
		t.Fatalf("%d slots kept, want only the newest", n)
	}
	// An older state published late (a sync point finishing after later
	// commits) does not replace the newest.
	if tb.Publish(meta(2), nil) || tb.Current().Txid != 3 {
		t.Fatalf("an older state replaced the newest: now %d", tb.Current().Txid)
	}
}

// TestDelayedReaderMovesToNewest replays a reader that loaded the newest
// slot and was delayed before counting itself while the writer published
// a newer state and retired the old slot: its count must fail, and Enter
// then lands on the newest state.
func TestDelayedReaderMovesToNewest(t *testing.T) {
	var tb Table
	tb.Open(meta(1), nil)
	stale := tb.cur.Load()
	tb.Publish(meta(2), nil)
	if got := txids(tb.Held(nil)); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("Held = %v, want [2]", got)
	}
	if _, ok := tb.count(stale); ok {
		t.Fatalf("a reader counted itself on a slot the writer retired")
	}
	if st := stale.state.Load(); st != retired {
		t.Fatalf("the failed count was not taken back: state %#x", st)
	}
	s, _ := tb.Enter()
	if s.Meta().Txid != 2 {
		t.Fatalf("reader began on txn %d, want 2", s.Meta().Txid)
	}
	tb.Leave(s)
	if _, begun := tb.Stats(); begun != 1 {
		t.Fatalf("begun %d, want 1: a failed count is no transaction", begun)
	}
}

// TestDelayedReaderCountedBeforeRetire is the other order: the delayed
// reader counts itself on the old slot before the writer looks, so Held
// must return the old state.
func TestDelayedReaderCountedBeforeRetire(t *testing.T) {
	var tb Table
	tb.Open(meta(1), nil)
	stale := tb.cur.Load()
	tb.Publish(meta(2), nil)
	if _, ok := tb.count(stale); !ok {
		t.Fatalf("count on a slot not yet retired failed")
	}
	if got := txids(tb.Held(nil)); !slices.Equal(got, []uint64{2, 1}) {
		t.Fatalf("Held = %v, want [2 1]", got)
	}
	tb.Leave(stale)
}

func TestCloseWaitsForReaders(t *testing.T) {
	var tb Table
	tb.Open(meta(1), nil)
	old, _ := tb.Enter()
	tb.Publish(meta(2), nil)
	cur, _ := tb.Enter()
	closed := make(chan struct{})
	go func() {
		tb.Close()
		close(closed)
	}()
	// Close refuses new readers before its wait ends.
	deadline := time.Now().Add(10 * time.Second)
	for !tb.closing.Load() {
		if time.Now().After(deadline) {
			t.Fatal("Close did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if s, _ := tb.Enter(); s != nil {
		t.Fatalf("Enter while closing returned a slot")
	}
	tb.Leave(old)
	select {
	case <-closed:
		t.Fatal("Close returned while a reader was open")
	case <-time.After(50 * time.Millisecond):
	}
	tb.Leave(cur)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the last reader left")
	}
	if s, _ := tb.Enter(); s != nil {
		t.Fatalf("Enter after Close returned a slot")
	}
	if tb.Publish(meta(3), nil) || tb.Current().Txid != 2 {
		t.Fatalf("Publish after Close changed the state")
	}
	if open, begun := tb.Stats(); open != 0 || begun != 2 {
		t.Fatalf("after Close: %d open, %d begun; want 0, 2", open, begun)
	}
	tb.Close()
}

// TestConcurrentReadersNeverEscapeHeld runs readers that enter and leave
// as fast as they can while a writer publishes states and asks Held, and
// checks Held's invariant against what every reader holds: a reader seen
// holding state x after Held returned L either holds a state in L or one
// at least as new as L[0]. Then Close runs against the readers still
// going, and no reader may be counted once it returned.
func TestConcurrentReadersNeverEscapeHeld(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	var tb Table
	tb.Open(meta(1), nil)
	const readers = 8
	var holding [readers]atomic.Uint64 // txid held, 0 when none
	var entered atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				s, _ := tb.Enter()
				if s == nil {
					return // closed
				}
				entered.Add(1)
				holding[r].Store(s.Meta().Txid)
				if i%7 == 0 {
					time.Sleep(time.Duration(r) * time.Microsecond)
				}
				holding[r].Store(0)
				tb.Leave(s)
			}
		}()
	}
	checks := 0
	deadline := time.Now().Add(time.Second)
	if testing.Short() {
		deadline = time.Now().Add(200 * time.Millisecond)
	}
	for txid := uint64(2); time.Now().Before(deadline); txid++ {
		tb.Publish(meta(txid), nil)
		for range rng.Intn(3) {
			held := txids(tb.Held(nil))
			for r := range readers {
				x := holding[r].Load()
				if x == 0 || x >= held[0] || slices.Contains(held, x) {
					continue
				}
				t.Fatalf("reader %d holds txn %d, which Held missed: %v", r, x, held)
			}
			checks++
		}
		if rng.Intn(4) == 0 {
			time.Sleep(time.Duration(rng.Intn(50)) * time.Microsecond)
		}
	}
	// Close must win against readers that keep beginning: they find every
	// slot retired and give up.
	closed := make(chan struct{})
	go func() {
		tb.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("Close did not return while readers kept beginning")
	}
	for r := range readers {
		if x := holding[r].Load(); x != 0 {
			t.Fatalf("reader %d still holds txn %d after Close returned", r, x)
		}
	}
	close(stop)
	wg.Wait()
	if checks < 100 || entered.Load() < 1000 {
		t.Fatalf("only %d checks of %d reader entries ran", checks, entered.Load())
	}
	t.Logf("%d Held checks, %d read transactions", checks, entered.Load())
}

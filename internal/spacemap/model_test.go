package spacemap

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

var (
	seedFlag   = flag.Int64("rivet.seed", 0, "seed for randomized tests (0: time-based); printed on every run")
	roundsFlag = flag.Int("rounds", 0, "transactions in TestModel (0: default)")
)

// Page states of the model.
const (
	pgLive     uint8 = iota // owned by a live run
	pgReserved              // a meta or a map slot
	pgAlloc                 // free and allocatable
	pgPending               // free, waiting for Release (pendTx says since when; pendBorn != 0: young, for ReleaseYoung)
	pgTxFreed               // live, freed by the open transaction
)

// model is the obvious implementation the Map is checked against: one state
// byte per page below the HWM, and the set of live runs.
type model struct {
	r      uint64
	ps     int
	hwm    uint64
	st     []uint8
	pendTx []uint64
	// pendBorn is, for a young pending page (FreeBorn), the txid that wrote
	// it; 0 for the others.
	pendBorn []uint64
	// prepared is the txid of the newest sync point begun (or the opened
	// state's): pages written later are young when freed.
	prepared uint64
	live     map[page.ID]uint64
	// born is the txid each live run was allocated by (0: unknown), and
	// txBorn the born txid the open transaction passed when freeing a page.
	born   map[page.ID]uint64
	txBorn map[uint64]uint64
	// ids lists the keys of live in an order that depends only on the
	// operations (map iteration order would make a seed irreproducible);
	// pos indexes it.
	ids []page.ID
	pos map[page.ID]int
	// n counts the pages in each state; every state change goes through
	// set so it stays exact (compareBits recounts).
	n [5]uint64
}

func (md *model) set(p uint64, s uint8) {
	md.n[md.st[p]]--
	md.st[p] = s
	md.n[s]++
}

func newModel(ps int) *model {
	md := &model{r: page.RegionPages(ps), ps: ps, live: make(map[page.ID]uint64), pos: make(map[page.ID]int), born: make(map[page.ID]uint64), txBorn: make(map[uint64]uint64)}
	md.grow(page.RegionFirstData(ps, 0))
	for p := range md.st {
		md.set(uint64(p), pgReserved)
	}
	return md
}

func (md *model) clone() *model {
	c := *md
	c.st = slices.Clone(md.st)
	c.pendTx = slices.Clone(md.pendTx)
	c.pendBorn = slices.Clone(md.pendBorn)
	c.born = maps.Clone(md.born)
	c.txBorn = maps.Clone(md.txBorn)
	c.live = make(map[page.ID]uint64, len(md.live))
	for k, v := range md.live {
		c.live[k] = v
	}
	c.ids = slices.Clone(md.ids)
	c.pos = make(map[page.ID]int, len(md.pos))
	for k, v := range md.pos {
		c.pos[k] = v
	}
	return &c
}

// grow extends the page arrays to end (new pages start live).
func (md *model) grow(end uint64) {
	for uint64(len(md.st)) < end {
		md.st = append(md.st, pgLive)
		md.n[pgLive]++
		md.pendTx = append(md.pendTx, 0)
		md.pendBorn = append(md.pendBorn, 0)
	}
	md.hwm = end
}

// freeTail is the specification of FreeTail: walk down from the HWM over
// allocatable pages, and over the map slots of a region whose data pages
// were all allocatable; never below page.MinPages.
func (md *model) freeTail() uint64 {
	p := md.hwm
	for p > 0 {
		switch s := md.st[p-1]; {
		case s == pgAlloc:
			p--
		case s == pgReserved && (p-1)/md.r > 0:
			p--
		default:
			return max(p, page.MinPages)
		}
	}
	return max(p, page.MinPages)
}

// shrink is the specification of ShrinkTo: the pages at and above hwm go.
func (md *model) shrink(hwm uint64) {
	if hwm >= md.hwm {
		return
	}
	for p := hwm; p < md.hwm; p++ {
		if s := md.st[p]; s != pgAlloc && s != pgReserved {
			panic(fmt.Sprintf("model: shrinking over page %d in state %d", p, s))
		}
		md.n[md.st[p]]--
	}
	md.st = md.st[:hwm]
	md.pendTx = md.pendTx[:hwm]
	md.pendBorn = md.pendBorn[:hwm]
	md.hwm = hwm
}

func (md *model) isFree(p uint64) bool { return md.st[p] == pgAlloc || md.st[p] == pgPending }

// counts returns how many pages are in each state.
func (md *model) counts() [5]uint64 { return md.n }

// recount counts the states the slow way, to check n.
func (md *model) recount() (c [5]uint64) {
	for _, s := range md.st {
		c[s]++
	}
	return c
}

// allocate is the specification of Allocate: address-ordered first fit
// inside one region, else at the HWM (skipping into the next region when
// the run does not fit in the last one). ok is false when MaxPages stops it.
func (md *model) allocate(n, maxPages, limit uint64) (id page.ID, ok, limited bool) {
	for r := uint64(0); r*md.r < md.hwm; r++ {
		lo, hi := page.RegionFirstData(md.ps, r), min((r+1)*md.r, md.hwm)
		var run uint64
		for p := lo; p < hi; p++ {
			if md.st[p] != pgAlloc {
				run = 0
				continue
			}
			if run++; run == n {
				if limit != 0 && p+1 > limit {
					// The lowest fitting run passes the limit.
					return 0, false, true
				}
				s := p + 1 - n
				for q := s; q <= p; q++ {
					md.set(q, pgLive)
				}
				md.addLive(s, n)
				return s, true, false
			}
		}
	}
	return md.allocateAtHWM(n, maxPages, limit)
}

// allocateFrom is the specification of AllocateFrom: the lowest run of n
// allocatable pages inside one region that starts at or after from, if it
// ends at or below the limit; else allocate's choice.
func (md *model) allocateFrom(n, from, maxPages, limit uint64) (id page.ID, ok, limited, after bool) {
	for r := from / md.r; from != 0 && r*md.r < md.hwm; r++ {
		lo, hi := max(page.RegionFirstData(md.ps, r), from), min((r+1)*md.r, md.hwm)
		var run uint64
		for p := lo; p < hi; p++ {
			if md.st[p] != pgAlloc {
				run = 0
				continue
			}
			if run++; run < n {
				continue
			}
			if limit != 0 && p+1 > limit {
				id, ok, limited = md.allocate(n, maxPages, limit)
				return id, ok, limited, false
			}
			s := p + 1 - n
			for q := s; q <= p; q++ {
				md.set(q, pgLive)
			}
			md.addLive(s, n)
			return s, true, false, true
		}
	}
	id, ok, limited = md.allocate(n, maxPages, limit)
	return id, ok, limited, false
}

// allocateAtHWM is the HWM half of allocate's specification.
func (md *model) allocateAtHWM(n, maxPages, limit uint64) (id page.ID, ok, limited bool) {
	start, r := md.hwm, md.hwm/md.r
	pad := false
	if md.hwm%md.r == 0 {
		start = page.RegionFirstData(md.ps, r)
	} else if md.hwm+n > (r+1)*md.r {
		pad = true
		start = page.RegionFirstData(md.ps, r+1)
	}
	if limit != 0 && (md.hwm >= limit || start+n > limit) {
		return 0, false, true
	}
	if maxPages != 0 && start+n > maxPages {
		return 0, false, false
	}
	old := md.hwm
	md.grow(start + n)
	for p := old; p < start; p++ {
		switch {
		case pad && p < (r+1)*md.r:
			md.set(p, pgAlloc)
		default:
			md.set(p, pgReserved)
		}
	}
	md.addLive(start, n)
	return start, true, false
}

// place applies an allocation the Map chose under a locality slack, whose
// policy the model leaves to TestLocality: a run of allocatable pages
// below the HWM, or the run allocateAtHWM specifies. It reports whether
// the choice was one of those.
func (md *model) place(id page.ID, n, maxPages uint64) bool {
	if id < md.hwm {
		for p := id; p < id+n; p++ {
			if p >= md.hwm || md.st[p] != pgAlloc {
				return false
			}
		}
		for p := id; p < id+n; p++ {
			md.set(p, pgLive)
		}
		md.addLive(id, n)
		return true
	}
	want, ok, _ := md.allocateAtHWM(n, maxPages, 0)
	return ok && want == id
}

func (md *model) addLive(id page.ID, n uint64) {
	md.live[id] = n
	md.pos[id] = len(md.ids)
	md.ids = append(md.ids, id)
}

// free frees the live run at id, which the caller says was written by txn
// born (0: unknown).
func (md *model) free(id page.ID, born uint64) {
	n := md.live[id]
	delete(md.live, id)
	delete(md.born, id)
	i, last := md.pos[id], md.ids[len(md.ids)-1]
	md.ids[i], md.pos[last] = last, i
	md.ids = md.ids[:len(md.ids)-1]
	delete(md.pos, id)
	for p := id; p < id+n; p++ {
		md.set(p, pgTxFreed)
		md.txBorn[p] = born
	}
}

func (md *model) commit(txid uint64) {
	youngBorn := uint64(math.MaxUint64)
	for _, b := range md.txBorn {
		if b > md.prepared && b <= txid {
			youngBorn = min(youngBorn, b)
		}
	}
	for p, s := range md.st {
		if s == pgTxFreed {
			md.set(uint64(p), pgPending)
			md.pendTx[p] = txid
			md.pendBorn[p] = 0
			// Young: written after the newest sync point begun, so in no
			// state that is or may become durable. A transaction's young
			// pages are held together, from the oldest txn that wrote one.
			if b := md.txBorn[uint64(p)]; b > md.prepared && b <= txid {
				md.pendBorn[p] = youngBorn
			}
		}
	}
	clear(md.txBorn)
}

func (md *model) release(limit uint64) {
	for p, s := range md.st {
		if s == pgPending && md.pendBorn[p] == 0 && md.pendTx[p] <= limit {
			md.set(uint64(p), pgAlloc)
		}
	}
}

// releaseYoung releases the young pending pages no snapshot sees.
func (md *model) releaseYoung(snaps []uint64) {
outer:
	for p, s := range md.st {
		if s != pgPending || md.pendBorn[p] == 0 {
			continue
		}
		for _, sn := range snaps {
			if md.pendBorn[p] <= sn && sn < md.pendTx[p] {
				continue outer
			}
		}
		md.set(uint64(p), pgAlloc)
		md.pendBorn[p] = 0
	}
}

// afterCrash is the state a fresh process sees: no readers, everything
// free is allocatable.
func (md *model) afterCrash() *model {
	c := md.clone()
	c.releaseYoung(nil)
	c.release(math.MaxUint64)
	return c
}

// regionFree returns the model's free set of region r as map words.
func (md *model) regionFree(r uint64) []uint64 {
	w := make([]uint64, md.r/64)
	for i := uint64(0); i < md.r; i++ {
		if p := r*md.r + i; p < md.hwm && md.isFree(p) {
			w[i/64] |= 1 << (i % 64)
		}
	}
	return w
}

// harness drives a Map and the model through random transactions, sync
// points, failed sync points and reopens.
type harness struct {
	t        *testing.T
	rng      *rand.Rand
	d        *fakeDisk
	m        *Map
	md       *model
	maxPages uint64
	// The durable state: the last meta that reached the disk, and the model
	// as of that sync point.
	meta      metaState
	metaModel *model
	lastTxid  uint64
	steady    uint64
	// limit is the open transaction's allocation limit (SetLimit), 0 if none.
	limit uint64
	// slack is the Map's locality slack (SetLocalitySlack).
	slack float64
	// stream is where the next AllocateFrom starts: the end of the last.
	stream uint64
	// sealed is the model as of the last Seal (or reopen), sealedTxid its
	// txid, chained the commits since, and releases the Release and
	// ReleaseYoung calls since: Undo must give sealed with them replayed.
	sealed     *model
	sealedTxid uint64
	chained    int
	releases   []func(*model)
	stats      struct {
		allocs, maxed, frees, badFrees, commits, rollbacks, syncs, failedSyncs, reopens, loads, mapsWritten uint64
		seals, abortedSyncs, undone, undoneShrinks, undoneReleasedYoung                                     uint64
		youngFrees, youngReleased, youngHeld                                                                uint64
		shrinks, shrunkPages, regionsDropped, limited                                                       uint64
		deltaRuns                                                                                           int
		localChoices                                                                                        uint64
		allocsFrom                                                                                          uint64
	}
}

func modelSeed() uint64 {
	if *seedFlag != 0 {
		return uint64(*seedFlag)
	}
	return uint64(time.Now().UnixNano())
}

func TestModel(t *testing.T) { runModel(t, 0) }

// TestModelLocality runs the model with a locality slack: every allocation
// is checked for safety (TestLocality checks the policy itself).
func TestModelLocality(t *testing.T) { runModel(t, 0.3) }

func runModel(t *testing.T, slack float64) {
	seed := modelSeed()
	t.Logf("seed %d (replay with -rivet.seed=%d)", seed, seed)
	rounds := 1500
	if testing.Short() || raceEnabled {
		rounds = 400
	}
	if *roundsFlag > 0 {
		rounds = *roundsFlag
	}
	h := &harness{
		t:        t,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		d:        newFakeDisk(tps),
		maxPages: 4*tR + tR/2,
		slack:    slack,
	}
	h.md = newModel(tps)
	h.metaModel = h.md.clone()
	h.reopen()
	for i := 0; i < rounds; i++ {
		h.round()
	}
	h.stats.loads += h.m.Stats().RegionLoads
	t.Logf("%+v", h.stats)
	if h.stats.syncs == 0 || h.stats.reopens == 0 || (h.stats.maxed == 0 && rounds >= 1500) || h.stats.badFrees == 0 || h.stats.mapsWritten == 0 || h.stats.deltaRuns == 0 || h.stats.shrinks == 0 || (h.stats.regionsDropped == 0 && rounds >= 1500 && slack == 0) || h.stats.limited == 0 || h.stats.youngFrees == 0 || h.stats.youngReleased == 0 || h.stats.youngHeld == 0 || (slack > 0 && h.stats.localChoices == 0) || h.stats.abortedSyncs == 0 || h.stats.undone == 0 || (slack == 0 && h.stats.allocsFrom == 0) {
		t.Fatalf("the run missed a path: %+v", h.stats)
	}
}

func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf(format, args...)
}

// size draws a run length: mostly small nodes, sometimes blob extents up to
// a whole region.
func (h *harness) size() uint64 {
	switch p := h.rng.IntN(100); {
	case p < 60:
		return 1 + h.rng.Uint64N(3)
	case p < 85:
		return 4 + h.rng.Uint64N(60)
	case p < 97:
		return 64 + h.rng.Uint64N(1000)
	default:
		return 1000 + h.rng.Uint64N(MaxRunPages(tps)-999)
	}
}

// oldestReader draws the oldest open read snapshot: none, or one at or
// below the steady state (readers only see synced states).
func (h *harness) oldestReader() uint64 {
	if h.rng.IntN(2) == 0 {
		return math.MaxUint64
	}
	return h.steady - min(h.steady, h.rng.Uint64N(4))
}

func (h *harness) round() {
	if h.rng.IntN(100) < 4 {
		h.shrink()
		return
	}
	txid := h.lastTxid + 1
	h.m.Begin(txid)
	h.limit = 0
	if h.rng.IntN(100) < 15 {
		// A compaction step's limit: somewhere from the first data page
		// to a little past the HWM.
		lo := page.RegionFirstData(tps, 0) + 1
		h.limit = lo + h.rng.Uint64N(h.md.hwm+tR/2-lo)
		h.m.SetLimit(h.limit)
	}
	snap := h.md.clone()
	// Releases inside the transaction concern earlier commits and survive
	// a rollback; they are monotone, so replaying the largest one on the
	// snapshot reproduces them.
	released, didRelease := uint64(0), false
	ops := 1 + h.rng.IntN(12)
	for i := 0; i < ops; i++ {
		livePages := h.md.counts()[pgLive]
		allocP := 50
		if livePages > h.maxPages*6/10 {
			allocP = 30
		}
		switch p := h.rng.IntN(100); {
		case p < allocP:
			h.allocate(h.size())
		case p < 88:
			h.freeLive()
		case p < 96:
			h.badFree()
		default:
			limit := min(h.steady, h.oldestReader())
			h.m.Release(h.steady, limit)
			h.md.release(limit)
			h.noteRelease(func(md *model) { md.release(limit) })
			released, didRelease = max(released, limit), true
		}
		h.compareCounts()
	}
	if h.rng.IntN(100) < 5 {
		h.compareBits() // mid-transaction
	}
	if h.rng.IntN(100) < 80 {
		h.m.Commit()
		h.md.commit(txid)
		h.lastTxid = txid
		h.stats.commits++
		h.committed()
	} else {
		h.m.Rollback()
		h.md = snap
		if didRelease {
			h.md.release(released)
		}
		h.stats.rollbacks++
	}
	h.compareCounts()
	h.compareBits()

	if h.rng.IntN(100) < 60 {
		limit := min(h.steady, h.oldestReader())
		h.m.Release(h.steady, limit)
		h.md.release(limit)
		h.noteRelease(func(md *model) { md.release(limit) })
		h.compareCounts()
	}
	if h.rng.IntN(100) < 60 {
		// Readers in None mode see any committed state.
		var snaps []uint64
		for range h.rng.IntN(4) {
			snaps = append(snaps, h.lastTxid-min(h.lastTxid, h.rng.Uint64N(4)))
		}
		if h.rng.IntN(3) == 0 {
			// A reader on the state that wrote some young pending page
			// and can still see it.
			for p, s := range h.md.st {
				if b := h.md.pendBorn[p]; s == pgPending && b != 0 && b < h.md.pendTx[p] {
					snaps = append(snaps, b)
					break
				}
			}
		}
		young := func() uint64 { return h.m.Stats().PendingPages - h.countNonYoungPending() }
		before := young()
		h.m.ReleaseYoung(snaps)
		h.md.releaseYoung(snaps)
		h.noteRelease(func(md *model) { md.releaseYoung(snaps) })
		h.compareCounts()
		after := young()
		h.stats.youngReleased += before - after
		if after > 0 {
			h.stats.youngHeld++
		}
	}
	if h.lastTxid > h.steady && h.rng.IntN(100) < 50 {
		h.sync(h.syncOutcome())
	}
	if h.rng.IntN(100) < 4 {
		h.reopen()
	}
	if h.rng.IntN(100) < 4 {
		h.compareForEachFree()
	}
}

// shrink is a transaction of its own that lowers the HWM: to FreeTail
// (checked against the model), or to a random point between it and the HWM,
// committed or rolled back.
func (h *harness) shrink() {
	h.t.Helper()
	txid := h.lastTxid + 1
	h.m.Begin(txid)
	tail, err := h.m.FreeTail()
	if err != nil {
		h.fatalf("FreeTail: %v", err)
	}
	if want := h.md.freeTail(); tail != want {
		h.fatalf("FreeTail %d, model %d (HWM %d)", tail, want, h.md.hwm)
	}
	target := tail
	if h.rng.IntN(2) == 0 && h.md.hwm > tail {
		target = tail + h.rng.Uint64N(h.md.hwm-tail+1)
		// Never inside a region's map slots.
		if r := target / tR; target%tR != 0 && target < page.RegionFirstData(tps, r) {
			target = page.RegionFirstData(tps, r)
		}
	}
	if err := h.m.ShrinkTo(target); err != nil {
		h.fatalf("ShrinkTo(%d) with FreeTail %d: %v", target, tail, err)
	}
	before := h.md.hwm
	if h.rng.IntN(100) < 20 {
		h.m.Rollback()
		h.stats.rollbacks++
	} else {
		h.m.Commit()
		count := func(hwm uint64) uint64 { return (hwm + tR - 1) / tR }
		if target < before {
			h.stats.shrinks++
			h.stats.shrunkPages += before - target
			h.stats.regionsDropped += count(before) - count(target)
		}
		h.md.shrink(target)
		h.lastTxid = txid
		h.stats.commits++
		h.committed()
	}
	h.compareCounts()
	h.compareBits()
	if h.rng.IntN(2) == 0 && h.lastTxid > h.steady {
		h.sync(h.syncOutcome())
	}
}

func (h *harness) allocate(n uint64) {
	h.t.Helper()
	oldHWM := h.md.hwm
	before := h.md.clone()
	if h.slack > 0 && h.limit == 0 {
		h.allocateLocal(n, before)
		return
	}
	var want page.ID
	var ok, limited bool
	var got page.ID
	var err error
	if h.limit != 0 && h.rng.IntN(2) == 0 {
		// A compaction step's leaf: at or after where the last one ended
		// (and, now and then, from elsewhere).
		if h.rng.IntN(16) == 0 {
			h.stream = h.rng.Uint64N(h.md.hwm + 16)
		}
		var after bool
		want, ok, limited, after = h.md.allocateFrom(n, h.stream, h.maxPages, h.limit)
		got, err = h.m.AllocateFrom(n, h.stream)
		if after {
			h.stats.allocsFrom++
		}
		if err == nil {
			h.stream = got + n
		}
	} else {
		want, ok, limited = h.md.allocate(n, h.maxPages, h.limit)
		got, err = h.m.Allocate(n)
	}
	if limited {
		if !errors.Is(err, ErrLimit) {
			h.fatalf("Allocate(%d) = %d, %v; want ErrLimit (limit %d, HWM %d)", n, got, err, h.limit, oldHWM)
		}
		h.stats.limited++
		return
	}
	if !ok {
		if !errors.Is(err, rerrors.ErrMaxSizeReached) {
			h.fatalf("Allocate(%d) = %d, %v; want ErrMaxSizeReached (HWM %d)", n, got, err, oldHWM)
		}
		h.stats.maxed++
		return
	}
	if err != nil || got != want {
		h.fatalf("Allocate(%d) = %d, %v; want %d (HWM %d)", n, got, err, want, oldHWM)
	}
	h.checkAllocated(got, n, oldHWM, before)
}

// allocateLocal is allocate under a locality slack: the Map's choice is
// not the model's to make, so the harness checks that it was safe and
// applies it to the model. Running out of room is first fit's verdict
// (the locality path falls back to it).
func (h *harness) allocateLocal(n uint64, before *model) {
	h.t.Helper()
	oldHWM := h.md.hwm
	got, err := h.m.Allocate(n)
	if err != nil {
		probe := before.clone()
		if _, ok, _ := probe.allocate(n, h.maxPages, 0); ok || !errors.Is(err, rerrors.ErrMaxSizeReached) {
			h.fatalf("Allocate(%d) under slack = %v; first fit would have found room: %v", n, err, ok)
		}
		h.stats.maxed++
		return
	}
	if !h.md.place(got, n, h.maxPages) {
		h.fatalf("Allocate(%d) under slack = %d: neither allocatable pages nor the run at the HWM (HWM %d)", n, got, oldHWM)
	}
	if want, _, _ := before.clone().allocate(n, h.maxPages, 0); want != got {
		h.stats.localChoices++ // the policy chose other pages than first fit
	}
	h.checkAllocated(got, n, oldHWM, before)
}

// checkAllocated checks what every allocation must satisfy, whatever the
// policy that chose it.
func (h *harness) checkAllocated(got page.ID, n, oldHWM uint64, before *model) {
	h.t.Helper()
	h.md.born[got] = h.lastTxid + 1
	// Invariant 1, stated without the model's release rules: no page live
	// in the durable state is handed out before the next sync point.
	for p := got; p < got+n && p < h.metaModel.hwm; p++ {
		if h.metaModel.st[p] == pgLive {
			h.fatalf("Allocate(%d) = %d: page %d is live in the durable state (txn %d)", n, got, p, h.meta.txid)
		}
	}
	// Stated separately from the first-fit comparison: the run was
	// allocatable or fresh, never live, pending or a map slot, and it stays
	// inside one region's data pages.
	for p := got; p < got+n; p++ {
		if p < oldHWM && before.st[p] != pgAlloc {
			h.fatalf("Allocate(%d) = %d: page %d was in state %d", n, got, p, before.st[p])
		}
	}
	if got/tR != (got+n-1)/tR || got < page.RegionFirstData(tps, got/tR) {
		h.fatalf("Allocate(%d) = %d crosses a region or covers map slots", n, got)
	}
	h.stats.allocs++
}

// pickLive returns a random live run.
func (h *harness) pickLive() (page.ID, bool) {
	if len(h.md.ids) == 0 {
		return 0, false
	}
	return h.md.ids[h.rng.IntN(len(h.md.ids))], true
}

// countNonYoungPending counts the model's pending pages that wait for a
// sync point (not young).
func (h *harness) countNonYoungPending() (n uint64) {
	for p, s := range h.md.st {
		if s == pgPending && h.md.pendBorn[p] == 0 {
			n++
		}
	}
	return n
}

func (h *harness) freeLive() {
	id, ok := h.pickLive()
	if !ok {
		return
	}
	n := h.md.live[id]
	// The txn that wrote the run, as the tree's references record it, or
	// unknown (0), which must be treated as old.
	born := h.md.born[id]
	if h.rng.IntN(5) == 0 {
		born = 0
	}
	if err := h.m.FreeBorn(id, n, born); err != nil {
		h.fatalf("FreeBorn(%d, %d, %d) of a live run: %v", id, n, born, err)
	}
	if born > h.md.prepared {
		h.stats.youngFrees++
	}
	h.md.free(id, born)
	h.stats.frees++
}

// badFree tries a free the Map must reject: a run touching a free, pending
// or already-freed page, a meta or map slot, or pages at the HWM. The Map
// must report ErrCorrupt and change nothing (compareCounts/compareBits).
func (h *harness) badFree() {
	var id, n uint64
	switch h.rng.IntN(4) {
	case 0: // touches a free (allocatable or pending) or txn-freed page
		found := false
		for try := 0; try < 20 && !found; try++ {
			p := h.rng.Uint64N(h.md.hwm)
			if s := h.md.st[p]; s == pgAlloc || s == pgPending || s == pgTxFreed {
				back := min(p, h.rng.Uint64N(3))
				id, n, found = p-back, back+1+h.rng.Uint64N(3), true
			}
		}
		if !found {
			return
		}
	case 1: // a reserved page
		r := h.rng.Uint64N(h.m.regionCount())
		id, n = r*tR+h.rng.Uint64N(page.RegionFirstData(tps, r)-r*tR), 1
	case 2: // at or past the HWM
		id, n = h.md.hwm-min(h.md.hwm, h.rng.Uint64N(2)), 2+h.rng.Uint64N(5)
		if id+n <= h.md.hwm {
			return
		}
	case 3: // a run freed twice in this txn
		var p uint64
		found := false
		for try := 0; try < 20 && !found; try++ {
			p = h.rng.Uint64N(h.md.hwm)
			found = h.md.st[p] == pgTxFreed
		}
		if !found {
			return
		}
		id, n = p, 1
	}
	err := h.m.Free(id, n)
	if !errors.Is(err, rerrors.ErrCorrupt) {
		h.fatalf("bad Free(%d, %d): err = %v, want ErrCorrupt", id, n, err)
	}
	h.stats.badFrees++
}

// compareCounts checks the Map's invariants and its counters against the
// model. Cheap enough for every step.
func (h *harness) compareCounts() {
	h.t.Helper()
	if err := h.m.check(); err != nil {
		h.fatalf("invariant: %v", err)
	}
	s := h.m.Stats()
	if s.HWM != h.md.hwm {
		h.fatalf("HWM %d, model %d", s.HWM, h.md.hwm)
	}
	c := h.md.counts()
	if want := c[pgAlloc] + c[pgPending]; s.FreePages != want {
		h.fatalf("FreePages %d, model %d", s.FreePages, want)
	}
	if want := c[pgPending]; s.PendingPages != want {
		h.fatalf("PendingPages %d, model %d", s.PendingPages, want)
	}
}

// compareBits checks every loaded region page by page against the model:
// free = allocatable or pending, allocatable = allocatable, and the open
// transaction's frees.
func (h *harness) compareBits() {
	h.t.Helper()
	if c := h.md.recount(); c != h.md.n {
		h.fatalf("model state counts %v, recount %v", h.md.n, c)
	}
	for r, reg := range h.m.regions {
		for i := uint64(0); i < tR; i++ {
			p := r*tR + i
			wantFree, wantAlloc, wantTx := false, false, false
			if p < h.md.hwm {
				s := h.md.st[p]
				wantFree, wantAlloc, wantTx = s == pgAlloc || s == pgPending, s == pgAlloc, s == pgTxFreed
			}
			gotTx := reg.txFreed != nil && bitAt(reg.txFreed, i)
			if bitAt(reg.free, i) != wantFree || bitAt(reg.alloc, i) != wantAlloc || gotTx != wantTx {
				h.fatalf("page %d: free %v alloc %v txfreed %v; model state %d", p, bitAt(reg.free, i), bitAt(reg.alloc, i), gotTx, h.md.st[p])
			}
		}
	}
}

// compareForEachFree checks Check's view: every free run, pending included.
func (h *harness) compareForEachFree() {
	h.t.Helper()
	var got []uint64
	err := h.m.ForEachFree(func(id page.ID, n uint64) error {
		if id/tR != (id+n-1)/tR {
			h.fatalf("ForEachFree run %d+%d crosses a region", id, n)
		}
		for p := id; p < id+n; p++ {
			got = append(got, p)
		}
		return nil
	})
	if err != nil {
		h.fatalf("ForEachFree: %v", err)
	}
	var want []uint64
	for p := uint64(0); p < h.md.hwm; p++ {
		if h.md.isFree(p) {
			want = append(want, p)
		}
	}
	if !slices.Equal(got, want) {
		h.fatalf("ForEachFree reports %d pages, model has %d free", len(got), len(want))
	}
	h.compareBits() // every region is loaded now
	from := h.rng.Uint64N(h.md.hwm + 1)
	inUse, err := h.m.InUseFrom(from)
	if err != nil {
		h.fatalf("InUseFrom(%d): %v", from, err)
	}
	var wantInUse uint64
	for p := from; p < h.md.hwm; p++ {
		if h.md.st[p] != pgReserved && !h.md.isFree(p) {
			wantInUse++
		}
	}
	if inUse != wantInUse {
		h.fatalf("InUseFrom(%d) = %d, model has %d pages in use (HWM %d)", from, inUse, wantInUse, h.md.hwm)
	}
}

// noteRelease records a release the Map and the model just made, for the
// model of an Undo.
func (h *harness) noteRelease(f func(*model)) { h.releases = append(h.releases, f) }

// committed follows a Commit: the transaction joins the chain, and
// sometimes the chain is sealed at once, as the database does when it
// publishes a commit in None or Periodic mode.
func (h *harness) committed() {
	h.chained++
	if h.rng.IntN(100) < 25 {
		h.seal()
	}
}

// seal seals the Map's chain and remembers the model as of it.
func (h *harness) seal() {
	h.m.Seal()
	h.sealedHere()
	h.stats.seals++
}

// sealedHere records the current model as the state Undo goes back to.
func (h *harness) sealedHere() {
	h.sealed = h.md.clone()
	h.sealedTxid = h.lastTxid
	h.chained = 0
	h.releases = h.releases[:0]
}

// How a sync point ends (syncOutcome).
const (
	syncDurable     = iota
	syncFlushFails  // the database latches: reopen at the steady meta
	syncWriteFails  // writing the image fails: AbortSync and Undo
	syncAbortedOnly // writing fails with every commit sealed (None mode): AbortSync
)

func (h *harness) syncOutcome() int {
	switch p := h.rng.IntN(100); {
	case p < 8:
		return syncFlushFails
	case p < 20:
		return syncWriteFails
	case p < 25:
		return syncAbortedOnly
	}
	return syncDurable
}

// writeSome writes a random part of img's pages, some of them torn: what
// a failed write or flush may leave.
func (h *harness) writeSome(img SyncImage) {
	for _, p := range img.Pages {
		switch h.rng.IntN(3) {
		case 0:
			h.d.write(p)
		case 1:
			torn := slices.Clone(h.d.pages[p.ID])
			if torn == nil {
				torn = make([]byte, tps)
			}
			copy(torn[:512], p.Data)
			h.d.write(page.Run{ID: p.ID, Data: torn})
		}
	}
}

// sync runs a sync point that ends as outcome says.
func (h *harness) sync(outcome int) {
	h.t.Helper()
	txid := h.lastTxid
	if outcome == syncAbortedOnly {
		h.seal()
	}
	prepared := h.md.prepared
	img := h.m.PrepareSync(txid)
	h.md.prepared = txid
	h.checkImage(img)
	switch outcome {
	case syncFlushFails:
		h.writeSome(img)
		h.stats.failedSyncs++
		h.reopen()
		return
	case syncWriteFails, syncAbortedOnly:
		h.writeSome(img)
		h.m.AbortSync(img)
		h.md.prepared = prepared
		for _, c := range h.m.chain {
			if c.shrink != nil {
				h.stats.undoneShrinks++
			}
			if len(c.young) > 0 && youngIndex(h.m.young, c.txid) < 0 {
				h.stats.undoneReleasedYoung++
			}
		}
		if n := h.m.Undo(); n != h.chained {
			h.fatalf("Undo took back %d transactions, %d were committed since the last seal", n, h.chained)
		}
		h.stats.abortedSyncs++
		h.stats.undone += uint64(h.chained)
		md := h.sealed.clone()
		for _, f := range h.releases {
			f(md)
		}
		h.md = md
		h.lastTxid = h.sealedTxid
		h.sealedHere()
		h.compareCounts()
		h.compareBits()
		return
	}
	h.seal() // the image is written: its commits are final
	h.d.apply(img)
	h.m.SyncDone(img)
	h.meta = metaOf(img)
	h.metaModel = h.md.clone()
	h.steady = txid
	h.stats.syncs++
	h.checkDurable()
}

// checkImage verifies a SyncImage against the model and the steady state.
func (h *harness) checkImage(img SyncImage) {
	h.t.Helper()
	count := (h.md.hwm + tR - 1) / tR
	if img.Txid != h.lastTxid || img.HWM != h.md.hwm || img.RegionCount != count || img.FreePages != h.md.counts()[pgAlloc]+h.md.counts()[pgPending] {
		h.fatalf("image header %+v; model HWM %d", img, h.md.hwm)
	}
	if len(img.Selector) != int((count+7)/8) || len(img.Changed) != len(img.Selector) {
		h.fatalf("selector %d bytes, changed %d, for %d regions", len(img.Selector), len(img.Changed), count)
	}
	pages := make(map[page.ID][]byte)
	for i, p := range img.Pages {
		if i > 0 && p.ID <= img.Pages[i-1].ID {
			h.fatalf("image pages out of order")
		}
		pages[p.ID] = p.Data
	}
	if err := page.CheckDelta(img.Delta, tps, img.HWM, img.Changed); err != nil {
		h.fatalf("image delta: %v", err)
	}
	if len(img.Delta) > page.MaxDeltaRuns(tps, count) {
		h.fatalf("image delta has %d runs, the meta holds %d", len(img.Delta), page.MaxDeltaRuns(tps, count))
	}
	metaCount := uint64(0)
	if h.meta.hwm > 0 {
		metaCount = (h.meta.hwm + tR - 1) / tR
	}
	for r := uint64(0); r < count; r++ {
		old, changed, nb := selBit(h.meta.sel, r), selBit(img.Changed, r), selBit(img.Selector, r)
		if nb != old^changed {
			h.fatalf("region %d: selector %d, steady %d, changed %d", r, nb, old, changed)
		}
		want := h.md.regionFree(r)
		if changed == 0 {
			// Not written: the steady map plus the image's delta must give
			// the model's free set.
			if r >= metaCount {
				h.fatalf("region %d has no map on disk but is not written", r)
			}
			slot := page.MapSlot(tps, r, nb)
			_, free, err := page.DecodeRegionMap(h.d.pages[slot], tps, slot)
			if err != nil {
				h.fatalf("region %d: steady map: %v", r, err)
			}
			if got := withDelta(free, img.Delta, r); !slices.Equal(got, want) {
				h.fatalf("region %d not written: map+delta free %v, model %v", r, onesIn(got), onesIn(want))
			}
			continue
		}
		h.stats.mapsWritten++
		slot := page.MapSlot(tps, r, nb)
		data, ok := pages[slot]
		if !ok {
			h.fatalf("region %d changed but page %d (slot %d) not in the image", r, slot, nb)
		}
		delete(pages, slot)
		txid, free, err := page.DecodeRegionMap(data, tps, slot)
		if err != nil || txid != img.Txid || !slices.Equal(free, want) {
			h.fatalf("region %d map: txid %d err %v, free %v want %v", r, txid, err, onesIn(free), onesIn(want))
		}
	}
	if len(pages) != 0 {
		h.fatalf("image has %d pages for unchanged regions", len(pages))
	}
	h.stats.deltaRuns += len(img.Delta)
	for r := uint64(0); r < uint64(img.FirstFreeRegion); r++ {
		if popcount(h.md.regionFree(r)) != 0 {
			h.fatalf("FirstFreeRegion %d but region %d has free pages", img.FirstFreeRegion, r)
		}
	}
}

// checkDurable reads, for every region, the map the durable selector names
// and compares it with the model at the last sync point: this is exactly
// what a reopen would load.
func (h *harness) checkDurable() {
	h.t.Helper()
	count := (h.meta.hwm + tR - 1) / tR
	for r := uint64(0); r < count; r++ {
		slot := page.MapSlot(tps, r, selBit(h.meta.sel, r))
		txid, free, err := page.DecodeRegionMap(h.d.pages[slot], tps, slot)
		if err != nil || txid > h.meta.txid {
			h.fatalf("durable map of region %d: txid %d, %v", r, txid, err)
		}
		free = withDelta(free, h.meta.delta, r)
		if want := h.metaModel.regionFree(r); !slices.Equal(free, want) {
			h.fatalf("durable map of region %d: free %v, model %v", r, onesIn(free), onesIn(want))
		}
	}
}

// reopen simulates a crash and restart at the last durable meta: a new Map
// from the disk, the model of that sync point with everything allocatable.
func (h *harness) reopen() {
	h.t.Helper()
	if h.m != nil {
		h.stats.loads += h.m.Stats().RegionLoads
	}
	cfg := h.meta.config(tps, h.d, h.maxPages)
	// The delta's size limit: none (every change written as maps, format
	// 1's behaviour), tiny (overflows often), or the page's room.
	cfg.MaxDeltaRuns = []int{-1, 1, 3, 0}[h.rng.IntN(4)]
	m, err := New(cfg)
	if err != nil {
		h.fatalf("reopen: %v", err)
	}
	if m.Stats().RegionLoads != 0 {
		h.fatalf("New loaded %d regions", m.Stats().RegionLoads)
	}
	m.SetLocalitySlack(h.slack)
	h.m = m
	h.md = h.metaModel.afterCrash()
	h.md.prepared = h.meta.txid
	h.lastTxid = h.meta.txid
	h.steady = h.meta.txid
	h.sealedHere()
	h.stats.reopens++
	h.compareCounts()
	if h.rng.IntN(2) == 0 {
		h.compareForEachFree()
	}
}

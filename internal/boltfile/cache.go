package boltfile

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/rivetkv/rivet/internal/page"
)

// nodeCache keeps translated nodes by page id within a byte budget. It is
// a table of slots indexed by a hash of the page id: a lookup is one atomic
// load and a compare, with no lock, which matters because every descent
// and every move of a cursor to another leaf makes one. A node takes its
// id's slot (pushing out the node there); when the budget is full, a CLOCK
// hand sweeps the slots and evicts the nodes not used since it last
// passed (a hit sets the entry's reference bit, once).
//
// Invariant: bytes is the sum of the costs of the entries in slots, at
// most the budget after every put; puts are serialised by mu.
type nodeCache struct {
	// table is the slots, made at the first put (a DB that reads a few
	// pages never pays for it); nil before.
	table  atomic.Pointer[[]atomic.Pointer[cacheEntry]]
	nslots int
	shift  uint // 64 − log2(nslots), for the hash
	budget int64

	mu    sync.Mutex
	bytes int64 // guarded by mu
	hand  int   // guarded by mu
}

// entryOverhead approximates an entry's cost beyond its node's bytes: the
// entry and its slot.
const entryOverhead = 64

// slotBytes sizes the table: one slot per slotBytes of budget, about half
// a translated leaf, so that most nodes the budget holds find a slot of
// their own.
const slotBytes = 1024

type cacheEntry struct {
	id   uint64
	node page.Node
	cost int64
	// ref is set by a hit and cleared by the clock's hand: an entry the
	// hand finds clear was not used for a full turn, and goes.
	ref atomic.Bool
}

func newNodeCache(budget int) *nodeCache {
	c := &nodeCache{budget: int64(budget)}
	if budget < 16*slotBytes {
		return c
	}
	c.nslots = 1 << bits.Len(uint(budget/slotBytes-1))
	c.shift = uint(64 - bits.TrailingZeros(uint(c.nslots)))
	return c
}

// slot returns the index of id's slot: Fibonacci hashing spreads runs of
// adjacent ids over the table.
func (c *nodeCache) slot(id uint64) int { return int((id * 0x9E3779B97F4A7C15) >> c.shift) }

func (c *nodeCache) get(id uint64) (page.Node, bool) {
	t := c.table.Load()
	if t == nil {
		return page.Node{}, false
	}
	e := (*t)[c.slot(id)].Load()
	if e == nil || e.id != id {
		return page.Node{}, false
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	return e.node, true
}

func (c *nodeCache) put(id uint64, n page.Node) {
	cost := int64(len(n.Bytes())) + entryOverhead
	if c.nslots == 0 || cost > c.budget/16 {
		// Not worth pushing out many hot nodes for.
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.table.Load()
	if t == nil {
		slots := make([]atomic.Pointer[cacheEntry], c.nslots)
		t = &slots
		c.table.Store(t)
	}
	slots := *t
	i := c.slot(id)
	if old := slots[i].Load(); old != nil {
		if old.id == id {
			// Another reader translated it meanwhile; the two are equal.
			return
		}
		slots[i].Store(nil)
		c.bytes -= old.cost
	}
	// Two turns of the hand clear every reference bit and then evict, so
	// the loop ends; it stops as soon as the node fits.
	for turn := 0; c.bytes+cost > c.budget && turn < 2*len(slots); turn++ {
		h := c.hand
		c.hand = (c.hand + 1) & (len(slots) - 1)
		e := slots[h].Load()
		switch {
		case e == nil:
		case e.ref.Load():
			e.ref.Store(false)
		default:
			slots[h].Store(nil)
			c.bytes -= e.cost
		}
	}
	if c.bytes+cost > c.budget {
		return
	}
	slots[i].Store(&cacheEntry{id: id, node: n, cost: cost})
	c.bytes += cost
}

// cachedBytes returns what the cache holds, for tests.
func (c *nodeCache) cachedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

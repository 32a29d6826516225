package boltfile

import (
	"sync"
	"sync/atomic"

	"github.com/rivetkv/rivet/internal/page"
)

// nodeCache keeps translated nodes by page id within a byte budget,
// evicting with the CLOCK rule (an approximation of least recently used:
// a hit only sets the entry's reference bit, so readers share a read lock
// and write nothing but that bit, once). It is split in shards, each with
// its own lock and an equal share of the budget.
//
// Invariant: a shard's bytes is the sum of its entries' costs, at most its
// share of the budget after every put; ring and byID hold the same entries.
type nodeCache struct {
	shards []cacheShard
	// share is each shard's budget; a node costing more than a quarter of
	// it is not kept (it would push out many hot ones).
	share int64
}

const cacheShards = 16

// entryOverhead approximates an entry's cost beyond its node's bytes: the
// entry, its map slot and ring slot.
const entryOverhead = 96

type cacheShard struct {
	mu    sync.RWMutex
	byID  map[uint64]*cacheEntry
	ring  []*cacheEntry // the clock's face
	hand  int           // the next entry the clock looks at
	bytes int64
}

type cacheEntry struct {
	id   uint64
	node page.Node
	cost int64
	// ref is set by a hit and cleared by the clock's hand: an entry the
	// hand finds clear was not used for a full turn, and goes.
	ref atomic.Bool
}

func newNodeCache(budget int) *nodeCache {
	c := &nodeCache{share: int64(budget) / cacheShards}
	if c.share <= 0 {
		return c
	}
	c.shards = make([]cacheShard, cacheShards)
	for i := range c.shards {
		c.shards[i].byID = make(map[uint64]*cacheEntry)
	}
	return c
}

func (c *nodeCache) shard(id uint64) *cacheShard {
	// Fibonacci hashing spreads runs of adjacent ids over the shards.
	return &c.shards[(id*0x9E3779B97F4A7C15)>>60]
}

func (c *nodeCache) get(id uint64) (page.Node, bool) {
	if c.shards == nil {
		return page.Node{}, false
	}
	s := c.shard(id)
	s.mu.RLock()
	e := s.byID[id]
	s.mu.RUnlock()
	if e == nil {
		return page.Node{}, false
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	return e.node, true
}

func (c *nodeCache) put(id uint64, n page.Node) {
	cost := int64(len(n.Bytes())) + entryOverhead
	if c.shards == nil || cost > c.share/4 {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[id]; ok {
		// Another reader translated it meanwhile; the two are equal.
		return
	}
	for s.bytes+cost > c.share && len(s.ring) > 0 {
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
		e := s.ring[s.hand]
		if e.ref.Load() {
			e.ref.Store(false)
			s.hand++
			continue
		}
		last := len(s.ring) - 1
		s.ring[s.hand] = s.ring[last]
		s.ring[last] = nil
		s.ring = s.ring[:last]
		delete(s.byID, e.id)
		s.bytes -= e.cost
	}
	e := &cacheEntry{id: id, node: n, cost: cost}
	s.byID[id] = e
	s.ring = append(s.ring, e)
	s.bytes += cost
}

// cachedBytes returns what the cache holds, for tests.
func (c *nodeCache) cachedBytes() int64 {
	var n int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += s.bytes
		s.mu.RUnlock()
	}
	return n
}

package boltfile

import (
	"sync"

	"github.com/rivetkv/rivet/internal/page"
)

// nodeCache keeps translated nodes by page id, least recently used out
// first, within a byte budget. It is split in shards, each with its own
// lock and an equal share of the budget, so concurrent readers seldom
// wait for each other.
//
// Invariant: a shard's bytes is the sum of its entries' costs, at most its
// share of the budget after every put.
type nodeCache struct {
	shards []cacheShard
	// share is each shard's budget; a node costing more than a quarter of
	// it is not kept (it would push out many hot ones).
	share int64
}

const cacheShards = 16

// entryOverhead approximates an entry's cost beyond its node's bytes: the
// entry, its map slot and the node's slice header.
const entryOverhead = 96

type cacheShard struct {
	mu    sync.Mutex
	byID  map[uint64]*cacheEntry
	lru   cacheEntry // sentinel: lru.next is the most recent entry
	bytes int64
}

type cacheEntry struct {
	id         uint64
	node       page.Node
	cost       int64
	prev, next *cacheEntry
}

func newNodeCache(budget int) *nodeCache {
	c := &nodeCache{share: int64(budget) / cacheShards}
	if c.share <= 0 {
		return c
	}
	c.shards = make([]cacheShard, cacheShards)
	for i := range c.shards {
		s := &c.shards[i]
		s.byID = make(map[uint64]*cacheEntry)
		s.lru.next, s.lru.prev = &s.lru, &s.lru
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
	s.mu.Lock()
	e, ok := s.byID[id]
	if ok {
		e.unlink()
		s.pushFront(e)
	}
	s.mu.Unlock()
	if !ok {
		return page.Node{}, false
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
	e := &cacheEntry{id: id, node: n, cost: cost}
	s.byID[id] = e
	s.pushFront(e)
	s.bytes += cost
	for s.bytes > c.share {
		old := s.lru.prev
		old.unlink()
		delete(s.byID, old.id)
		s.bytes -= old.cost
	}
}

func (s *cacheShard) pushFront(e *cacheEntry) {
	e.prev, e.next = &s.lru, s.lru.next
	s.lru.next.prev = e
	s.lru.next = e
}

func (e *cacheEntry) unlink() {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

// cachedBytes returns what the cache holds, for tests.
func (c *nodeCache) cachedBytes() int64 {
	var n int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.bytes
		s.mu.Unlock()
	}
	return n
}

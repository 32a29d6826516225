package btree

import "testing"

// TestNodePool: an array taken from the pool has the length asked for,
// room for two more elements, and no element left from its last use; one
// array is never handed out twice; the pool keeps at most nodePoolElems
// elements.
func TestNodePool(t *testing.T) {
	var p NodePool
	a := p.get(40)
	if len(a) != 40 || cap(a) < 42 {
		t.Fatalf("get(40): len %d cap %d", len(a), cap(a))
	}
	a[3].key = []byte("stale")
	p.put(a)
	b := p.get(30)
	if &b[:1][0] != &a[:1][0] {
		t.Fatalf("an array that fits was not reused")
	}
	if b[:cap(b)][3].key != nil {
		t.Fatalf("a reused array still holds %q", b[:cap(b)][3].key)
	}
	c := p.get(30)
	if &c[:1][0] == &b[:1][0] {
		t.Fatalf("one array handed out twice")
	}
	if big := p.get(1000); cap(big) < 1002 {
		t.Fatalf("get(1000): cap %d", cap(big))
	}
	for range 10000 {
		p.put(make([]inode, 0, 100))
	}
	if p.elems > nodePoolElems {
		t.Fatalf("pool keeps %d elements, bound %d", p.elems, nodePoolElems)
	}
	var nilPool *NodePool
	if s := nilPool.get(5); len(s) != 5 {
		t.Fatalf("nil pool get: len %d", len(s))
	}
	nilPool.put(make([]inode, 3))
}

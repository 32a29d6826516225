package difftest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rivetkv/rivet"
)

// Keys and names are drawn from small pools, so that calls meet each
// other's keys: a Put on a bucket's name, a CreateBucket on a value's key,
// a Seek between keys.
var (
	bucketNames = []string{"a", "b", "c", "d", "e"}
	// longKey is one byte over MaxKeySize, maxKey exactly MaxKeySize; every
	// op shares them (both engines copy keys, and never write to values).
	longKey = bytes.Repeat([]byte{'L'}, rivet.MaxKeySize+1)
	maxKey  = bytes.Repeat([]byte{'M'}, rivet.MaxKeySize)
	// valuePool backs the medium and large values (shared, never written).
	valuePool = func() []byte {
		b := make([]byte, 64<<10)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}()
)

// gen makes random valid calls for the state m describes.
type gen struct {
	r *rand.Rand
	m *model
	// huge is a value one byte longer than MaxValueSize that is never read
	// (hugeValue), or nil where none could be reserved.
	huge []byte
}

func (g *gen) chance(perMille int) bool { return g.r.IntN(1000) < perMille }

func (g *gen) key() []byte {
	switch n := g.r.IntN(1000); {
	case n < 25:
		return nil
	case n < 50:
		return []byte{}
	case n < 58:
		return longKey
	case n < 62:
		return maxKey
	case n < 70:
		return []byte{0}
	case n < 350:
		return []byte(bucketNames[g.r.IntN(len(bucketNames))])
	default:
		return fmt.Appendf(nil, "k%03d", g.r.IntN(keyPool))
	}
}

// keyPool is how many keys "k000"... the calls use.
const keyPool = 300

// name is a bucket name: mostly the bucket pool, sometimes any key.
func (g *gen) name() []byte {
	if g.chance(700) {
		return []byte(bucketNames[g.r.IntN(len(bucketNames))])
	}
	return g.key()
}

func (g *gen) value() []byte {
	switch n := g.r.IntN(1000); {
	case n < 40:
		return nil
	case n < 80:
		return []byte{}
	case n < 90 && g.huge != nil:
		return g.huge
	case n < 120:
		size := 4000 + g.r.IntN(40000)
		off := g.r.IntN(len(valuePool) - size)
		return valuePool[off : off+size]
	case n < 400:
		size := 16 + g.r.IntN(1000)
		off := g.r.IntN(len(valuePool) - size)
		return valuePool[off : off+size]
	default:
		return fmt.Appendf(nil, "v%d", g.r.IntN(1000))
	}
}

func (g *gen) sequence() uint64 {
	switch n := g.r.IntN(10); n {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	case 2:
		return math.MaxUint64 - 1
	default:
		return uint64(g.r.IntN(1000))
	}
}

func (g *gen) stopAfter() uint64 {
	if g.chance(600) {
		return 0
	}
	return uint64(1 + g.r.IntN(5))
}

// pickTx returns a transaction handle: mostly a live one (the write
// transaction first), sometimes any, ended ones included; -1 if none.
func (g *gen) pickTx() int {
	m := g.m
	if m.writeTx >= 0 && g.chance(600) {
		return m.writeTx
	}
	if g.chance(50) {
		return g.pickAny(m.txOrder, m.txOK)
	}
	return g.pickAny(m.txOrder, m.live)
}

// pickAny returns a random ID of ids with ok(ID), preferring recent ones,
// or -1.
func (g *gen) pickAny(ids []int, ok func(int) bool) int {
	n := len(ids)
	for range 20 {
		if n == 0 {
			return -1
		}
		span := min(n, 64)
		if g.chance(100) {
			span = n
		}
		if id := ids[n-1-g.r.IntN(span)]; ok(id) {
			return id
		}
	}
	return -1
}

// pickBucket returns a bucket handle: mostly one of a live transaction
// (the write transaction's first), sometimes any; -1 if none, or if the
// live transactions have none (so that the caller makes another call,
// which may open one).
func (g *gen) pickBucket() int {
	m := g.m
	if g.chance(50) {
		return g.pickAny(m.bucketOrder, m.bucketOK)
	}
	if m.writeTx >= 0 && g.chance(850) {
		if i := g.pickAny(m.bucketOrder, func(i int) bool { return m.bucketOK(i) && m.buckets[i].tx == m.writeTx }); i >= 0 {
			return i
		}
	}
	return g.pickAny(m.bucketOrder, func(i int) bool { return m.bucketOK(i) && m.live(m.buckets[i].tx) })
}

// pickDst returns a destination for MoveBucket in the transaction of the
// source: mostly a bucket of it, sometimes nil (the top level), sometimes
// any.
func (g *gen) pickDst(tx int) int {
	m := g.m
	if g.chance(200) {
		return -1
	}
	if g.chance(900) {
		if i := g.pickAny(m.bucketOrder, func(i int) bool { return m.bucketOK(i) && m.buckets[i].tx == tx }); i >= 0 {
			return i
		}
	}
	return g.pickAny(m.bucketOrder, m.bucketOK)
}

// pickCursor returns a cursor handle: mostly one of a live transaction,
// sometimes any; -1 if none (or none live).
func (g *gen) pickCursor() int {
	m := g.m
	if g.chance(50) {
		return g.pickAny(m.cursorOrder, m.cursorOK)
	}
	return g.pickAny(m.cursorOrder, func(i int) bool { return m.cursorOK(i) && m.live(m.cursors[i].tx) })
}

// weighted picks one of kinds by weight.
func (g *gen) weighted(kinds []kind, weights []int) kind {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.r.IntN(total)
	for i, w := range weights {
		if n < w {
			return kinds[i]
		}
		n -= w
	}
	return kinds[len(kinds)-1]
}

var (
	txKinds   = []kind{kTxBucket, kTxCreateBucket, kTxCreateBucketIfNotExists, kTxDeleteBucket, kTxMoveBucket, kTxForEach, kTxCursor, kTxRoot, kTxWritable, kTxOnCommit}
	txWeights = []int{20, 8, 10, 5, 5, 3, 4, 3, 1, 2}

	bucketKinds   = []kind{kPut, kPutMany, kGet, kDelete, kBucket, kCreateBucket, kCreateBucketIfNotExists, kDeleteBucket, kMoveBucket, kSequence, kSetSequence, kNextSequence, kForEach, kForEachBucket, kStats, kCursor, kWritable}
	bucketWeights = []int{25, 4, 10, 8, 8, 5, 5, 2, 4, 2, 2, 3, 3, 2, 3, 6, 1}

	cursorKinds   = []kind{kFirst, kLast, kNext, kPrev, kSeek, kCursorDelete}
	cursorWeights = []int{15, 10, 30, 20, 15, 10}
)

// next returns a random call that is valid now, with the given ID.
func (g *gen) next(id int) op {
	for {
		if o, ok := g.try(); ok && g.m.valid(o) {
			o.ID = id
			return o
		}
	}
}

func (g *gen) try() (op, bool) {
	m := g.m
	switch n := g.r.IntN(1000); {
	case n < 25:
		writable := m.writeTx < 0 && g.r.IntN(4) > 0
		if !writable && m.liveTxs() >= 3 {
			return op{}, false
		}
		return op{Kind: kBegin, Flag: writable}, true
	case n < 40:
		k := kView
		if m.writeTx < 0 && g.chance(500) {
			k = kUpdate
		}
		return op{Kind: k, N: uint64(g.r.IntN(int(numFnKinds)))}, true
	case n < 43:
		return op{Kind: kReopen, Flag: g.chance(250)}, m.liveTxs() == 0
	case n < 80:
		t := g.pickTx()
		if t < 0 {
			return op{}, false
		}
		k := kTxRollback
		if m.txs[t].writable && g.chance(900) || !m.txs[t].writable && g.chance(50) {
			k = kTxCommit
		}
		return op{Kind: k, T: t}, true
	case n < 250:
		t := g.pickTx()
		if t < 0 {
			return op{}, false
		}
		o := op{Kind: g.weighted(txKinds, txWeights), T: t, Key: g.name()}
		switch o.Kind {
		case kTxMoveBucket:
			o.B = -1
			if g.chance(500) {
				if o.B = g.pickDst(t); o.B < 0 {
					return op{}, false
				}
			}
			o.B2 = g.pickDst(t)
		case kTxForEach:
			o.N = g.stopAfter()
		}
		return o, true
	case n < 800:
		b := g.pickBucket()
		if b < 0 {
			return op{}, false
		}
		o := op{Kind: g.weighted(bucketKinds, bucketWeights), B: b}
		switch o.Kind {
		case kPut:
			o.Key, o.Val = g.key(), g.value()
		case kPutMany:
			o.N = uint64(10 + g.r.IntN(150))
			o.Key = []byte{byte(g.r.IntN(256))}
			o.Flag = g.chance(500)
			size := 1 + g.r.IntN(300)
			off := g.r.IntN(len(valuePool) - size)
			o.Val = valuePool[off : off+size]
		case kGet, kDelete:
			o.Key = g.key()
		case kBucket, kCreateBucket, kCreateBucketIfNotExists, kDeleteBucket:
			o.Key = g.name()
		case kMoveBucket:
			o.Key, o.B2 = g.name(), g.pickDst(m.buckets[b].tx)
		case kSetSequence:
			o.N = g.sequence()
		case kForEach, kForEachBucket:
			o.N = g.stopAfter()
		}
		return o, true
	default:
		c := g.pickCursor()
		if c < 0 {
			return op{}, false
		}
		o := op{Kind: g.weighted(cursorKinds, cursorWeights), C: c}
		if o.Kind == kSeek {
			o.Key = g.key()
		}
		return o, true
	}
}

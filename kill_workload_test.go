package rivet

// The workload of the process-kill tests (kill_test.go) and of
// TestReadersSeeWrittenPages: transaction i is a pure function of (seed, i),
// so a parent can tell what a killed child committed.

import (
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"strconv"

	rerrors "github.com/rivetkv/rivet/errors"
)

const (
	killPut = iota
	killDel
	killDelBucket
	killNextSeq
)

type killOp struct {
	kind int
	path []string // bucket path from the root
	key  string
	val  []byte
}

// killBuckets are the buckets the workload touches; bucket names ("t", "n",
// "m" prefixes) never collide with keys ("k" prefix), so no op can fail with
// ErrIncompatibleValue.
var killBuckets = [][]string{
	{"t0"}, {"t1"}, {"t2"},
	{"t0", "n0"}, {"t1", "n0"}, {"t1", "n1"},
	{"t1", "n0", "m0"}, {"t2", "n0", "m0", "m1"},
}

// killTxn returns the operations of transaction i: the counter seq/n = i,
// then 1–8 random puts (some of a few KiB, stored as blobs), deletes,
// sequence bumps and nested-bucket deletes, and now and then the delete of a
// whole top-level bucket, so pages churn and freed space is reused.
func killTxn(seed int64, i uint64) []killOp {
	rng := randv2.New(randv2.NewPCG(uint64(seed), i))
	ops := []killOp{{kind: killPut, path: []string{"seq"}, key: "n", val: []byte(strconv.FormatUint(i, 10))}}
	value := func(n int) []byte {
		v := make([]byte, n)
		prefix := fmt.Appendf(nil, "txn %d:", i)
		for j := range v {
			if j < len(prefix) {
				v[j] = prefix[j]
			} else {
				v[j] = byte(rng.Uint32())
			}
		}
		return v
	}
	for range 1 + rng.IntN(8) {
		path := killBuckets[rng.IntN(len(killBuckets))]
		key := fmt.Sprintf("k%03d", rng.IntN(250))
		switch r := rng.IntN(100); {
		case r < 55:
			ops = append(ops, killOp{kind: killPut, path: path, key: key, val: value(rng.IntN(200))})
		case r < 60:
			// In multi-page leaves (up to eight pages stay in the leaf).
			ops = append(ops, killOp{kind: killPut, path: path, key: key, val: value(2048 + rng.IntN(4096))})
		case r < 62:
			// Past eight 4 KiB pages: a blob at every page size.
			ops = append(ops, killOp{kind: killPut, path: path, key: key, val: value(33000 + rng.IntN(8192))})
		case r < 92:
			ops = append(ops, killOp{kind: killDel, path: path, key: key})
		case r < 96:
			ops = append(ops, killOp{kind: killNextSeq, path: path})
		default:
			if len(path) > 1 {
				ops = append(ops, killOp{kind: killDelBucket, path: path})
			} else {
				ops = append(ops, killOp{kind: killDel, path: path, key: key})
			}
		}
	}
	if rng.IntN(80) == 0 {
		ops = append(ops, killOp{kind: killDelBucket, path: killBuckets[rng.IntN(3)]})
	}
	return ops
}

// killCompactEvery is how often (in txns) a committing child runs
// DB.Compact.
const killCompactEvery = 20

// killTxnSyncs says whether a NoSync child calls DB.Sync after txn i.
func killTxnSyncs(seed int64, i uint64) bool {
	return randv2.New(randv2.NewPCG(uint64(seed), i^0x5eed)).IntN(8) == 0
}

// applyKillOps runs a transaction's operations in tx.
func applyKillOps(tx *Tx, ops []killOp) error {
	for _, op := range ops {
		switch op.kind {
		case killPut, killNextSeq:
			b, err := tx.CreateBucketIfNotExists([]byte(op.path[0]))
			for _, name := range op.path[1:] {
				if err != nil {
					break
				}
				b, err = b.CreateBucketIfNotExists([]byte(name))
			}
			if err != nil {
				return err
			}
			if op.kind == killPut {
				err = b.Put([]byte(op.key), op.val)
			} else {
				_, err = b.NextSequence()
			}
			if err != nil {
				return err
			}
		case killDel:
			if b := killBucket(tx, op.path); b != nil {
				if err := b.Delete([]byte(op.key)); err != nil {
					return err
				}
			}
		case killDelBucket:
			last := []byte(op.path[len(op.path)-1])
			var err error
			if len(op.path) == 1 {
				err = tx.DeleteBucket(last)
			} else if parent := killBucket(tx, op.path[:len(op.path)-1]); parent != nil {
				err = parent.DeleteBucket(last)
			}
			if err != nil && !errors.Is(err, rerrors.ErrBucketNotFound) {
				return err
			}
		}
	}
	return nil
}

func killBucket(tx *Tx, path []string) *Bucket {
	b := tx.Bucket([]byte(path[0]))
	for _, name := range path[1:] {
		if b == nil {
			return nil
		}
		b = b.Bucket([]byte(name))
	}
	return b
}

// applyKillModel applies a transaction's operations to the model.
func applyKillModel(m *mbucket, ops []killOp) {
	for _, op := range ops {
		switch op.kind {
		case killPut, killNextSeq:
			b := m
			for _, name := range op.path {
				sub := b.sub[name]
				if sub == nil {
					sub = newMBucket()
					b.sub[name] = sub
				}
				b = sub
			}
			if op.kind == killPut {
				b.kv[op.key] = op.val
			} else {
				b.seq++
			}
		case killDel:
			if b := killModelBucket(m, op.path); b != nil {
				delete(b.kv, op.key)
			}
		case killDelBucket:
			if parent := killModelBucket(m, op.path[:len(op.path)-1]); parent != nil {
				delete(parent.sub, op.path[len(op.path)-1])
			}
		}
	}
}

func killModelBucket(m *mbucket, path []string) *mbucket {
	for _, name := range path {
		if m == nil {
			return nil
		}
		m = m.sub[name]
	}
	return m
}

// modelDump flattens a model the way dumpDB flattens a database.
func modelDump(m *mbucket) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, b *mbucket)
	walk = func(prefix string, b *mbucket) {
		for k, v := range b.kv {
			out[prefix+"\x00"+k] = string(v)
		}
		for k, s := range b.sub {
			p := prefix + k + "/"
			out[p] = fmt.Sprint(s.seq)
			walk(p, s)
		}
	}
	walk("", m)
	return out
}

// killCounter reads seq/n, the number of the last transaction in the file
// (0 when there is none).
func killCounter(tx *Tx) (uint64, error) {
	b := tx.Bucket([]byte("seq"))
	if b == nil {
		return 0, nil
	}
	v := b.Get([]byte("n"))
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("seq/n holds %q: %v", v, err)
	}
	return n, nil
}

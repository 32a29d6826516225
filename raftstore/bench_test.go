package raftstore

// Side-by-side benchmarks against raft-boltdb v2 (the store Consul, Nomad
// and Vault use), through hashicorp/raft's own bench package where it has
// a helper. Each benchmark has a sub-benchmark per store:
//
//	go test -run '^$' -bench . -count 3 . | tee bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /store bench.txt
//
// Both stores run with their defaults: every write flushed to disk
// (raftstore: rivet Durability Full; raft-boltdb: bbolt without NoSync).

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftbench "github.com/hashicorp/raft/bench"
)

// benchStore is what both stores implement.
type benchStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// benchStores opens a fresh store of each kind in a temporary directory.
var benchStores = []struct {
	name string
	open func(path string) (benchStore, error)
}{
	{"raftstore", func(path string) (benchStore, error) { return NewStore(path) }},
	{"raftboltdb", func(path string) (benchStore, error) { return raftboltdb.NewBoltStore(path) }},
}

// eachStore runs fn as a sub-benchmark per store, on a fresh file.
func eachStore(b *testing.B, fn func(b *testing.B, s benchStore)) {
	for _, bs := range benchStores {
		b.Run("store="+bs.name, func(b *testing.B) {
			s, err := bs.open(filepath.Join(b.TempDir(), "raft.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			fn(b, s)
		})
	}
}

func BenchmarkFirstIndex(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.FirstIndex(b, s) })
}

func BenchmarkLastIndex(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.LastIndex(b, s) })
}

func BenchmarkGetLog(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.GetLog(b, s) })
}

// BenchmarkGetLogLarge: GetLog of entries spread over a log of raft's
// usual length (TrailingLogs + SnapshotThreshold = 18,432 entries) of
// 1 KiB entries with AppendedAt set, as raft's replication reads them.
func BenchmarkGetLogLarge(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) {
		const n = 18432
		data := make([]byte, 1024)
		logs := make([]*raft.Log, 0, 512)
		for i := uint64(1); i <= n; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: 3, Data: data, AppendedAt: time.Unix(1_700_000_000, int64(i))})
			if len(logs) == cap(logs) {
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
				logs = logs[:0]
			}
		}
		b.ResetTimer()
		var l raft.Log
		for i := 0; i < b.N; i++ {
			idx := 1 + uint64(i)*7919%n
			if err := s.GetLog(idx, &l); err != nil || l.Index != idx {
				b.Fatalf("GetLog(%d): %v", idx, err)
			}
		}
	})
}

// BenchmarkStoreLogs: one StoreLogs call (one durable commit) per
// iteration, of 1 (raftbench.StoreLog), 3 (raftbench.StoreLogs), 10 and
// 100 entries with increasing indexes.
func BenchmarkStoreLogs(b *testing.B) {
	b.Run("batch=1", func(b *testing.B) {
		eachStore(b, func(b *testing.B, s benchStore) { raftbench.StoreLog(b, s) })
	})
	b.Run("batch=3", func(b *testing.B) {
		eachStore(b, func(b *testing.B, s benchStore) { raftbench.StoreLogs(b, s) })
	})
	for _, n := range []int{10, 100} {
		b.Run("batch="+strconv.Itoa(n), func(b *testing.B) {
			eachStore(b, func(b *testing.B, s benchStore) { storeLogsBatch(b, s, n) })
		})
	}
}

// storeLogsBatch is raftbench.StoreLogs with n entries per call.
func storeLogsBatch(b *testing.B, s raft.LogStore, n int) {
	logs := make([]*raft.Log, n)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range logs {
			logs[j] = &raft.Log{Index: uint64(i*n + j + 1), Data: []byte("data")}
		}
		b.StartTimer()
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeleteRange(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.DeleteRange(b, s) })
}

func BenchmarkSet(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.Set(b, s) })
}

func BenchmarkGet(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.Get(b, s) })
}

func BenchmarkSetUint64(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.SetUint64(b, s) })
}

func BenchmarkGetUint64(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) { raftbench.GetUint64(b, s) })
}

// BenchmarkTruncateHead: raft's log compaction after a snapshot. The log
// holds TrailingLogs (10,240) plus SnapshotThreshold (8,192) entries of
// 1 KiB; each iteration deletes the oldest 8,192 in one DeleteRange (the
// entries are appended again, untimed, before the next).
func BenchmarkTruncateHead(b *testing.B) {
	eachStore(b, func(b *testing.B, s benchStore) {
		data := make([]byte, 1024)
		for i := range data {
			data[i] = byte(i * 7)
		}
		var next uint64 = 1
		appendN := func(n int) {
			logs := make([]*raft.Log, 0, 512)
			for i := 0; i < n; i++ {
				logs = append(logs, &raft.Log{Index: next, Term: 1, Data: data})
				next++
				if len(logs) == cap(logs) {
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
					logs = logs[:0]
				}
			}
			if len(logs) > 0 {
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
		}
		appendN(10240)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			appendN(8192)
			first, err := s.FirstIndex()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := s.DeleteRange(first, first+8191); err != nil {
				b.Fatal(err)
			}
		}
	})
}

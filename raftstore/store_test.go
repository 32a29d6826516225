package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
)

// openTestStore opens a store in a fresh file and closes it at the end of
// the test.
func openTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "raft.db")
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen closes s and opens its file again.
func reopen(t testing.TB, s *Store, opts Options) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Path = s.Path()
	return openTestStore(t, opts)
}

// testLog is the content of entry i used throughout the tests.
func testLog(i uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       i/100 + 1,
		Type:       raft.LogCommand,
		Data:       fmt.Appendf(nil, "entry %d", i),
		Extensions: []byte{byte(i)},
		AppendedAt: time.Unix(1_700_000_000+int64(i), int64(i)).UTC(),
	}
}

// logsRange returns testLog(lo..hi).
func logsRange(lo, hi uint64) []*raft.Log {
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, testLog(i))
	}
	return logs
}

// wantBounds checks FirstIndex and LastIndex.
func wantBounds(t testing.TB, s *Store, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if f != first || l != last {
		t.Fatalf("bounds [%d, %d], want [%d, %d]", f, l, first, last)
	}
}

// wantLog checks that entry i is present and equal to want.
func wantLog(t testing.TB, s *Store, want *raft.Log) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(want.Index, &got); err != nil {
		t.Fatalf("GetLog(%d): %v", want.Index, err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("GetLog(%d) = %+v, want %+v", want.Index, got, *want)
	}
}

// wantNoLog checks that there is no entry i.
func wantNoLog(t testing.TB, s *Store, i uint64) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(%d) = %v, %+v; want ErrLogNotFound", i, err, got)
	}
}

func TestEmptyStore(t *testing.T) {
	s := openTestStore(t, Options{})
	for range 2 {
		wantBounds(t, s, 0, 0)
		wantNoLog(t, s, 0)
		wantNoLog(t, s, 1)
		if v, err := s.Get([]byte("k")); !errors.Is(err, ErrKeyNotFound) || v != nil {
			t.Fatalf("Get = %q, %v", v, err)
		}
		// hashicorp/raft tells a fresh store by this text.
		if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
			t.Fatalf("GetUint64 of a missing key: %v", err)
		}
		if err := s.DeleteRange(0, 100); err != nil {
			t.Fatal(err)
		}
		if err := s.StoreLogs(nil); err != nil {
			t.Fatal(err)
		}
		s = reopen(t, s, Options{})
	}
}

func TestStoreAndGetLogs(t *testing.T) {
	s := openTestStore(t, Options{})
	if err := s.StoreLog(testLog(1)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 1, 1)
	if err := s.StoreLogs(logsRange(2, 300)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 1, 300)
	for i := uint64(1); i <= 300; i++ {
		wantLog(t, s, testLog(i))
	}
	wantNoLog(t, s, 0)
	wantNoLog(t, s, 301)

	// Large entries (multi-page values, and past rivet's eight-page
	// out-of-line threshold) and zero-length or nil fields.
	big := testLog(301)
	big.Data = bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	mid := testLog(302)
	mid.Data = bytes.Repeat([]byte{7}, 5000)
	empty := &raft.Log{Index: 303, Data: []byte{}}
	bare := &raft.Log{Index: 304}
	if err := s.StoreLogs([]*raft.Log{big, mid, empty, bare}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*raft.Log{big, mid, empty, bare} {
		wantLog(t, s, l)
	}

	// Overwrite (a follower's conflicting suffix is deleted first in
	// raft, but a rewrite must work too).
	over := testLog(10)
	over.Term = 99
	if err := s.StoreLog(over); err != nil {
		t.Fatal(err)
	}
	wantLog(t, s, over)

	// GetLog copies: the returned slices stay valid and unchanged after
	// further writes.
	var kept raft.Log
	if err := s.GetLog(20, &kept); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 304); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(logsRange(1, 50)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&kept, testLog(20)) {
		t.Fatalf("kept entry changed: %+v", kept)
	}
}

func TestGapsAndIndexZero(t *testing.T) {
	s := openTestStore(t, Options{})
	// raft.LogStore allows gaps (after a user snapshot restore).
	if err := s.StoreLogs([]*raft.Log{testLog(5), testLog(6), testLog(100), testLog(1000)}); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 5, 1000)
	wantNoLog(t, s, 7)
	wantLog(t, s, testLog(100))
	if err := s.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 100, 1000)
	// raft-boltdb reports an entry at index 0 as a first index of 0, as
	// raft's bench package stores.
	if err := s.StoreLog(testLog(0)); err != nil {
		t.Fatal(err)
	}
	wantBounds(t, s, 0, 1000)
	wantLog(t, s, testLog(0))
	s = reopen(t, s, Options{})
	wantBounds(t, s, 0, 1000)
}

func TestDeleteRange(t *testing.T) {
	cases := []struct {
		lo, hi      uint64
		first, last uint64 // after; 0, 0 for empty
	}{
		{0, 9, 10, 50},   // below the log
		{51, 90, 10, 50}, // above
		{10, 10, 11, 50}, // the first
		{0, 20, 21, 50},  // a head, from below
		{50, 50, 10, 49}, // the last
		{45, 99, 10, 44}, // a tail, past the end
		{20, 30, 10, 50}, // the middle
		{10, 50, 0, 0},   // exactly everything
		{0, 1 << 62, 0, 0},
		{30, 20, 10, 50}, // lo > hi: nothing
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d-%d", c.lo, c.hi), func(t *testing.T) {
			s := openTestStore(t, Options{})
			if err := s.StoreLogs(logsRange(10, 50)); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(c.lo, c.hi); err != nil {
				t.Fatal(err)
			}
			for pass := range 2 {
				wantBounds(t, s, c.first, c.last)
				for i := uint64(8); i <= 52; i++ {
					if i >= 10 && i <= 50 && (i < c.lo || i > c.hi) {
						wantLog(t, s, testLog(i))
					} else {
						wantNoLog(t, s, i)
					}
				}
				if pass == 0 {
					s = reopen(t, s, Options{})
				}
			}
			// The log takes new entries after any deletion.
			if err := s.StoreLogs(logsRange(60, 61)); err != nil {
				t.Fatal(err)
			}
			wantLog(t, s, testLog(61))
			if l, _ := s.LastIndex(); l != 61 {
				t.Fatalf("LastIndex %d, want 61", l)
			}
		})
	}
}

// TestModelRandomized runs random StoreLogs and DeleteRange calls against
// a map, checking bounds and contents after each and across reopens.
func TestModelRandomized(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := openTestStore(t, Options{RivetOptions: &rivet.Options{Durability: rivet.None}})
	model := map[uint64]bool{}
	check := func(step int) {
		t.Helper()
		var first, last uint64
		seen := false
		for i := range model {
			if !seen || i < first {
				first = i
			}
			if !seen || i > last {
				last = i
			}
			seen = true
		}
		wantBounds(t, s, first, last)
		for i := first; i <= last+1 && i <= first+600; i++ {
			if model[i] {
				wantLog(t, s, testLog(i))
			} else {
				wantNoLog(t, s, i)
			}
		}
	}
	for step := range 400 {
		switch r := rng.IntN(10); {
		case r < 6:
			lo := rng.Uint64N(500)
			n := 1 + rng.Uint64N(40)
			if err := s.StoreLogs(logsRange(lo, lo+n-1)); err != nil {
				t.Fatal(err)
			}
			for i := lo; i < lo+n; i++ {
				model[i] = true
			}
		case r < 9:
			lo := rng.Uint64N(550)
			hi := lo + rng.Uint64N(100)
			if rng.IntN(10) == 0 {
				lo, hi = 0, 1000
			}
			if err := s.DeleteRange(lo, hi); err != nil {
				t.Fatal(err)
			}
			for i := lo; i <= hi; i++ {
				delete(model, i)
			}
		default:
			s = reopen(t, s, Options{RivetOptions: &rivet.Options{Durability: rivet.None}})
		}
		check(step)
	}
}

func TestStableStore(t *testing.T) {
	s := openTestStore(t, Options{})
	if err := s.Set([]byte("CurrentTerm"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("LastVoteTerm"), 1<<40+3); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), []byte{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("CurrentTerm"), []byte("overwritten")); err != nil {
		t.Fatal(err)
	}
	for pass := range 2 {
		v, err := s.Get([]byte("CurrentTerm"))
		if err != nil || string(v) != "overwritten" {
			t.Fatalf("Get = %q, %v", v, err)
		}
		v[0] = 'X' // a copy: the store is unchanged
		if v, _ := s.Get([]byte("CurrentTerm")); string(v) != "overwritten" {
			t.Fatalf("Get after changing a returned value = %q", v)
		}
		if u, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || u != 1<<40+3 {
			t.Fatalf("GetUint64 = %d, %v", u, err)
		}
		if v, err := s.Get([]byte("empty")); err != nil || v == nil || len(v) != 0 {
			t.Fatalf("Get of an empty value = %#v, %v", v, err)
		}
		if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil {
			t.Fatal("GetUint64 of an 11-byte value succeeded")
		}
		// The stable store and the log are separate: no entry appeared.
		wantBounds(t, s, 0, 0)
		if pass == 0 {
			s = reopen(t, s, Options{})
		}
	}
}

// TestClosedStore: every method fails with ErrDatabaseNotOpen after Close.
func TestClosedStore(t *testing.T) {
	s := openTestStore(t, Options{})
	if err := s.StoreLogs(logsRange(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	_, errFirst := s.FirstIndex()
	_, errLast := s.LastIndex()
	_, errGet := s.Get([]byte("k"))
	_, errGetU := s.GetUint64([]byte("k"))
	for i, err := range []error{
		errFirst, errLast, s.GetLog(1, &l), s.StoreLog(testLog(4)), s.StoreLogs(logsRange(4, 5)),
		s.DeleteRange(1, 2), s.Set([]byte("k"), []byte("v")), errGet, s.SetUint64([]byte("k"), 1), errGetU,
	} {
		if !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
			t.Errorf("call %d after Close: %v", i, err)
		}
	}
}

// TestOptions: ReadOnly and Timeout pass through to rivet; NoSync and the
// new time format work.
func TestOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openTestStore(t, Options{Path: path, NoSync: true, MsgpackUseNewTimeFormat: true})
	if err := s.StoreLogs(logsRange(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("k"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, s, testLog(3)) // read back in the new time format

	// The file is locked while open.
	if _, err := New(Options{Path: path, RivetOptions: &rivet.Options{Timeout: 50 * time.Millisecond}}); !errors.Is(err, rerrors.ErrTimeout) {
		t.Fatalf("second open: %v, want ErrTimeout", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro := openTestStore(t, Options{Path: path, RivetOptions: &rivet.Options{ReadOnly: true}})
	wantBounds(t, ro, 1, 10)
	wantLog(t, ro, testLog(10))
	if u, err := ro.GetUint64([]byte("k")); err != nil || u != 7 {
		t.Fatalf("GetUint64 = %d, %v", u, err)
	}
	if err := ro.StoreLog(testLog(11)); !errors.Is(err, rerrors.ErrDatabaseReadOnly) {
		t.Fatalf("StoreLog on a read-only store: %v", err)
	}
	// A second read-only open shares the file.
	ro2 := openTestStore(t, Options{Path: path, RivetOptions: &rivet.Options{ReadOnly: true}})
	wantBounds(t, ro2, 1, 10)
}

// TestConcurrentUse: an appender, a head truncator and readers at once,
// as raft runs them (the leader's log writes, the snapshot goroutine's
// compaction, replication reads). LastIndex is published only once its
// entry is readable, and bounds never go back.
func TestConcurrentUse(t *testing.T) {
	s := openTestStore(t, Options{RivetOptions: &rivet.Options{Durability: rivet.None}})
	if err := s.StoreLogs(logsRange(1, 10)); err != nil {
		t.Fatal(err)
	}
	const target = 3000
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	wg.Add(1)
	go func() { // appender
		defer wg.Done()
		defer done.Store(true)
		for next := uint64(11); next <= target; next += 10 {
			if err := s.StoreLogs(logsRange(next, next+9)); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // truncator: keeps at least 100 entries
		defer wg.Done()
		for !done.Load() {
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if last > first+200 {
				if err := s.DeleteRange(first, last-100); err != nil {
					errc <- err
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() { // readers
			defer wg.Done()
			var prevFirst, prevLast uint64
			for !done.Load() {
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if first < prevFirst || last < prevLast || first > last {
					errc <- fmt.Errorf("bounds [%d, %d] after [%d, %d]", first, last, prevFirst, prevLast)
					return
				}
				prevFirst, prevLast = first, last
				var l raft.Log
				err := s.GetLog(last, &l)
				if errors.Is(err, raft.ErrLogNotFound) {
					// Only if truncated since (the reader fell 100
					// entries behind).
					if now, _ := s.FirstIndex(); now > last {
						continue
					}
				}
				if err != nil || l.Index != last {
					errc <- fmt.Errorf("GetLog(LastIndex %d): %v", last, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if last, _ := s.LastIndex(); last != target {
		t.Fatalf("LastIndex %d, want %d", last, target)
	}
}

// TestStableStoreCache: values read back through the in-memory copy of the
// stable store are the committed ones, across Set, nil values, a failed
// Set, and concurrent Sets and Gets.
func TestStableStoreCache(t *testing.T) {
	s := openTestStore(t, Options{RivetOptions: &rivet.Options{Durability: rivet.None}})
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrKeyNotFound) {
		t.Fatal(err) // cached as absent
	}
	if err := s.Set([]byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("k")); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get after Set(nil) = %#v, %v", v, err)
	}
	if err := s.Set(nil, []byte("v")); !errors.Is(err, rerrors.ErrKeyRequired) {
		t.Fatalf("Set of an empty key: %v", err)
	}
	if _, err := s.Get(nil); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Get of an empty key: %v", err)
	}

	// Two writers and a reader at once; the cache agrees with the file at
	// the end (the last committed Set won in both).
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	var next atomic.Uint64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if err := s.SetUint64([]byte("n"), next.Add(1)); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 2000 {
			if _, err := s.GetUint64([]byte("n")); err != nil && !errors.Is(err, ErrKeyNotFound) {
				errc <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	cached, err := s.GetUint64([]byte("n"))
	if err != nil {
		t.Fatal(err)
	}
	var onFile uint64
	if err := s.db.View(func(tx *rivet.Tx) error {
		v := tx.Bucket(bucketConf).Get([]byte("n"))
		if len(v) == 8 {
			onFile = binary.BigEndian.Uint64(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if cached != onFile || cached == 0 {
		t.Fatalf("cached %d, file %d", cached, onFile)
	}
	s = reopen(t, s, Options{})
	if v, _ := s.GetUint64([]byte("n")); v != onFile {
		t.Fatalf("after reopen %d, want %d", v, onFile)
	}
}

// TestCompact: after most of the log is truncated, Compact gives the
// file's space back and the store keeps its content.
func TestCompact(t *testing.T) {
	s := openTestStore(t, Options{RivetOptions: &rivet.Options{Durability: rivet.None}})
	var logs []*raft.Log
	for i := uint64(1); i <= 4000; i++ {
		l := testLog(i)
		l.Data = bytes.Repeat([]byte{byte(i)}, 1000)
		logs = append(logs, l)
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 3900); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	released, err := s.Compact(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if released <= 0 || after.Size() >= fi.Size()/2 {
		t.Fatalf("Compact released %d bytes; file %d -> %d bytes", released, fi.Size(), after.Size())
	}
	t.Logf("file %d KiB -> %d KiB", fi.Size()/1024, after.Size()/1024)
	wantBounds(t, s, 3901, 4000)
	s = reopen(t, s, Options{})
	wantBounds(t, s, 3901, 4000)
	for _, l := range logs[3900:] {
		wantLog(t, s, l)
	}
}

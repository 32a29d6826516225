package vfs

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// mustCreate creates a file and makes its name durable, for tests of what
// a crash does to a file's bytes.
func mustCreate(t *testing.T, fs FS, name string) File {
	t.Helper()
	f := mustOpen(t, fs, name, rwCreate)
	if err := fs.SyncDir(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	return f
}

func readAll(t *testing.T, fs *CrashFS, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCrashSyncedWriteSurvives(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	synced := bytes.Repeat([]byte("S"), 3000)
	if _, err := f.WriteAt(synced, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	// An unsynced write elsewhere must not disturb the synced bytes, in any
	// crash: kept, dropped, torn.
	if _, err := f.WriteAt(bytes.Repeat([]byte("U"), 2000), 5000); err != nil {
		t.Fatal(err)
	}
	opts := []CrashOptions{
		{KeepProbability: 0, TearProbability: 0},
		{KeepProbability: 1, TearProbability: 1},
		DefaultCrashOptions,
	}
	for seed := uint64(0); seed < 200; seed++ {
		for _, o := range opts {
			got := readAll(t, fs.Crash(seeded(seed), o), "db")
			if len(got) < len(synced) || !bytes.Equal(got[:len(synced)], synced) {
				t.Fatalf("seed %d %+v: synced bytes lost", seed, o)
			}
		}
	}
}

func TestCrashUnsyncedWriteMayOrMayNotSurvive(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	if _, err := f.WriteAt([]byte("old!"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("new!"), 0); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for seed := uint64(0); seed < 200; seed++ {
		seen[string(readAll(t, fs.Crash(seeded(seed), CrashOptions{KeepProbability: 0.5}), "db"))]++
	}
	if len(seen) != 2 || seen["old!"] == 0 || seen["new!"] == 0 {
		t.Fatalf("outcomes %v, want both \"old!\" and \"new!\"", seen)
	}
	if got := string(readAll(t, fs.CrashKeepNone(), "db")); got != "old!" {
		t.Fatalf("CrashKeepNone: %q", got)
	}
	if got := string(readAll(t, fs.CrashKeepAll(), "db")); got != "new!" {
		t.Fatalf("CrashKeepAll: %q", got)
	}
}

// TestCrashTornWritesAreSectorGranular checks that a torn write leaves every
// 512-byte sector wholly old or wholly new, including the partial sectors at
// the ends of an unaligned write, and that tearing does mix them.
func TestCrashTornWritesAreSectorGranular(t *testing.T) {
	const sector = 512
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	old := bytes.Repeat([]byte{0xAA}, 10*sector)
	if _, err := f.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	// New bytes over [300, 4700): a partial first sector, 8 whole ones and a
	// partial last one.
	const lo, hi = 300, 4700
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x55}, hi-lo), lo); err != nil {
		t.Fatal(err)
	}
	mixed := 0
	for seed := uint64(0); seed < 100; seed++ {
		got := readAll(t, fs.Crash(seeded(seed), CrashOptions{KeepProbability: 1, TearProbability: 1}), "db")
		if len(got) != len(old) {
			t.Fatalf("seed %d: size %d", seed, len(got))
		}
		kinds := map[byte]bool{}
		for s := 0; s < len(got); s += sector {
			chunk := got[max(s, lo):min(s+sector, hi)]
			if s+sector <= lo || s >= hi {
				chunk = got[s : s+sector]
				if !bytes.Equal(chunk, old[:sector]) {
					t.Fatalf("seed %d: sector at %d outside the write changed", seed, s)
				}
				continue
			}
			if !bytes.Equal(chunk, bytes.Repeat(chunk[:1], len(chunk))) || (chunk[0] != 0xAA && chunk[0] != 0x55) {
				t.Fatalf("seed %d: sector at %d mixes old and new bytes", seed, s)
			}
			kinds[chunk[0]] = true
			// The part of a boundary sector outside the write keeps old bytes.
			if !bytes.Equal(got[s:max(s, lo)], old[s:max(s, lo)]) || !bytes.Equal(got[min(s+sector, hi):s+sector], old[min(s+sector, hi):s+sector]) {
				t.Fatalf("seed %d: bytes next to the write changed", seed)
			}
		}
		if len(kinds) == 2 {
			mixed++
		}
	}
	if mixed == 0 {
		t.Fatal("no crash tore the write into old and new sectors")
	}
}

func TestCrashTornExtendingWrite(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 2048), 0); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 50; seed++ {
		got := readAll(t, fs.Crash(seeded(seed), CrashOptions{KeepProbability: 1, TearProbability: 1}), "db")
		if len(got) != 2048 {
			t.Fatalf("seed %d: a kept write of 2048 bytes left size %d", seed, len(got))
		}
		for s := 0; s < 2048; s += 512 {
			if c := got[s : s+512]; !bytes.Equal(c, make([]byte, 512)) && !bytes.Equal(c, bytes.Repeat([]byte{1}, 512)) {
				t.Fatalf("seed %d: sector %d is neither zeros nor the new bytes", seed, s)
			}
		}
	}
}

func TestCrashDeterministic(t *testing.T) {
	fs := NewCrashable()
	for _, name := range []string{"a", "b", "c"} {
		f := mustCreate(t, fs, name)
		for i := 0; i < 20; i++ {
			if _, err := f.WriteAt(bytes.Repeat([]byte{byte(i)}, 700), int64(i*300)); err != nil {
				t.Fatal(err)
			}
		}
	}
	outcomes := map[string]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		var first []byte
		for rep := 0; rep < 2; rep++ {
			c := fs.Crash(seeded(seed), DefaultCrashOptions)
			var all []byte
			for _, name := range []string{"a", "b", "c"} {
				all = append(all, readAll(t, c, name)...)
				all = append(all, '|')
			}
			if rep == 0 {
				first = all
			} else if !bytes.Equal(first, all) {
				t.Fatalf("seed %d: two crashes from the same seed differ", seed)
			}
		}
		outcomes[string(first)] = true
	}
	if len(outcomes) < 10 {
		t.Fatalf("only %d distinct outcomes from 20 seeds", len(outcomes))
	}
}

func TestCrashTruncate(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(16384); err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, fs.CrashKeepNone(), "db")); got != 8192 {
		t.Fatalf("synced size lost: %d", got)
	}
	if got := len(readAll(t, fs.CrashKeepAll(), "db")); got != 16384 {
		t.Fatalf("unsynced grow not applied by CrashKeepAll: %d", got)
	}
	sizes := map[int]bool{}
	for seed := uint64(0); seed < 50; seed++ {
		sizes[len(readAll(t, fs.Crash(seeded(seed), CrashOptions{KeepProbability: 0.5}), "db"))] = true
	}
	if !sizes[8192] || !sizes[16384] || len(sizes) != 2 {
		t.Fatalf("sizes after crashes %v, want 8192 and 16384", sizes)
	}
}

// TestCrashBarrierOrders checks the weak barrier model: nothing written after
// a barrier survives unless everything written before it survived intact.
func TestCrashBarrierOrders(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	before := bytes.Repeat([]byte{0xB0}, 4*1024)
	for i := 0; i < 4; i++ {
		if _, err := f.WriteAt(before[:1024], int64(i*1024)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(SyncBarrier); err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 8; i++ {
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xA0}, 1024), int64(i*1024)); err != nil {
			t.Fatal(err)
		}
	}
	sawAfter, sawPartialBefore := false, false
	for seed := uint64(0); seed < 300; seed++ {
		got := readAll(t, fs.Crash(seeded(seed), CrashOptions{KeepProbability: 0.5, TearProbability: 0.5}), "db")
		if len(got) > 4096 && bytes.IndexByte(got[4096:], 0xA0) >= 0 {
			sawAfter = true
			if !bytes.Equal(got[:4096], before) {
				t.Fatalf("seed %d: a write after the barrier survived without everything before it", seed)
			}
		}
		if len(got) < 4096 || !bytes.Equal(got[:4096], before) {
			sawPartialBefore = true
		}
	}
	if !sawAfter || !sawPartialBefore {
		t.Fatalf("crash outcomes too narrow: after=%v partialBefore=%v", sawAfter, sawPartialBefore)
	}
	// A barrier makes nothing durable by itself ...
	if got := readAll(t, fs.CrashKeepNone(), "db"); len(got) != 0 {
		t.Fatalf("CrashKeepNone after only a barrier kept %d bytes", len(got))
	}
	// ... unless the platform's barrier is a full flush.
	for seed := uint64(0); seed < 50; seed++ {
		got := readAll(t, fs.Crash(seeded(seed), CrashOptions{BarrierDurable: true}), "db")
		if !bytes.Equal(got, before) {
			t.Fatalf("seed %d: BarrierDurable crash holds %d bytes, want exactly the pre-barrier writes", seed, len(got))
		}
	}
}

func TestCrashSyncCoversEveryOpen(t *testing.T) {
	fs := NewCrashable()
	a := mustCreate(t, fs, "db")
	b := mustOpen(t, fs, "db", os.O_RDWR)
	if _, err := a.WriteAt([]byte("via a"), 0); err != nil {
		t.Fatal(err)
	}
	// fsync flushes the file, not the descriptor: b's Sync covers a's write.
	if err := b.Sync(SyncData); err != nil {
		t.Fatal(err)
	}
	if got := string(readAll(t, fs.CrashKeepNone(), "db")); got != "via a" {
		t.Fatalf("durable %q", got)
	}
}

func TestCrashResultIsIndependent(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	if err := f.TryLock(true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("live"), 0); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, fs, "never-synced", rwCreate) // its name is never synced

	c := fs.CrashKeepAll()
	// The crashed FS starts with no open files, so no locks.
	g := mustOpen(t, c, "db", os.O_RDWR)
	if err := g.TryLock(true); err != nil {
		t.Fatalf("lock in the crashed FS: %v", err)
	}
	// Its files are durable as they are: crashing it again keeps them.
	if got := string(readAll(t, c.CrashKeepNone(), "db")); got != "live" {
		t.Fatalf("crash of a crash: %q", got)
	}
	// Writes to either FS do not reach the other.
	if _, err := g.WriteAt([]byte("XXXX"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("more"), 4); err != nil {
		t.Fatal(err)
	}
	if got := string(readAll(t, fs, "db")); got != "livemore" {
		t.Fatalf("live FS holds %q", got)
	}
	if got := string(readAll(t, c, "db")); got != "XXXX" {
		t.Fatalf("crashed FS holds %q", got)
	}
	// A file whose name was never synced is gone after KeepNone, and
	// exists, empty, after KeepAll.
	if _, err := fs.CrashKeepNone().ReadFile("never-synced"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("never-synced file after a crash that kept nothing: %v", err)
	}
	if got, err := fs.CrashKeepAll().ReadFile("never-synced"); err != nil || len(got) != 0 {
		t.Fatalf("never-synced file after a crash that kept everything: %q, %v", got, err)
	}
	// A removed file is gone.
	if err := fs.Remove("never-synced"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.CrashKeepAll().ReadFile("never-synced"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed file after crash: %v", err)
	}
}

func TestCrashNilRNGAndDefaults(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 5000), 0); err != nil {
		t.Fatal(err)
	}
	a := readAll(t, fs.Crash(nil, DefaultCrashOptions), "db")
	b := readAll(t, fs.Crash(nil, DefaultCrashOptions), "db")
	if !bytes.Equal(a, b) {
		t.Fatal("a nil rng is not a fixed seed")
	}
}

func TestCrashHugeSectorSize(t *testing.T) {
	fs := NewCrashable()
	f := mustCreate(t, fs, "db")
	if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 3000), 100); err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 20; seed++ {
		got := readAll(t, fs.Crash(seeded(seed), CrashOptions{KeepProbability: 1, TearProbability: 1, SectorSize: math.MaxInt}), "db")
		// One sector covers the whole write: all of it or none of it.
		if len(got) != 3100 || (!bytes.Equal(got[100:], bytes.Repeat([]byte{1}, 3000)) && !bytes.Equal(got, make([]byte, 3100))) {
			t.Fatalf("seed %d: a write inside one sector was split", seed)
		}
	}
}

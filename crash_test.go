package rivet

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/vfs"
)

// hookFS calls before(op) ahead of every WriteAt and Sync of its files, so a
// test can take a crash image at an exact point inside a commit; beforeOn,
// if set instead, is told the file's name as well.
type hookFS struct {
	vfs.FS
	before   func(op string)
	beforeOn func(name, op string)
}

func (h *hookFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	before := h.before
	if h.beforeOn != nil {
		before = func(op string) { h.beforeOn(name, op) }
	}
	return &hookFile{File: f, before: before}, nil
}

type hookFile struct {
	vfs.File
	before func(op string)
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	f.before("write")
	return f.File.WriteAt(p, off)
}

func (f *hookFile) Sync(kind vfs.SyncKind) error {
	f.before("sync")
	return f.File.Sync(kind)
}

// dumpDB flattens a database into "bucket/path\x00key" -> value, with
// buckets as "bucket/path/" -> "<bucket seq>".
func dumpDB(db *DB) (out map[string]string, err error) {
	err = db.View(func(tx *Tx) error {
		out, err = dumpTx(tx)
		return err
	})
	return out, err
}

// dumpTx is dumpDB of what tx sees.
func dumpTx(tx *Tx) (map[string]string, error) {
	out := map[string]string{}
	var walk func(prefix string, b *Bucket) error
	walk = func(prefix string, b *Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if child := b.Bucket(k); child != nil {
					p := prefix + string(k) + "/"
					out[p] = fmt.Sprint(child.Sequence())
					return walk(p, child)
				}
			}
			out[prefix+"\x00"+string(k)] = string(v)
			return nil
		})
	}
	return out, walk("", tx.root)
}

func sameDump(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

type crashPoint struct {
	image *vfs.CrashFS
	acked int // commits acknowledged (Update returned nil) before the crash
	low   int // the oldest state the image may hold (the last durable one)
	op    int
}

// TestCrashRecovery crashes a randomized workload at random I/O operations
// (writes and flushes, including inside commits), with a random subset of the
// unsynced writes surviving, reordered and torn at 512-byte sectors. Every
// crash image must open, pass Check and hold exactly the last acknowledged
// commit or the one in flight — never an older state, never a mix. Each
// image's recovery is crashed again at one of its first writes and
// flushes (verifyRecoveryCrash).
//
// -rivet.crashpoints=N sets the number of crash points (default 300, 60 with
// -short). They are taken in rounds of up to 300 (60 with -short): round r
// runs the workload with seed+r, so memory stays that of one round and a
// failing round replays alone with -rivet.seed=seed+r.
func TestCrashRecovery(t *testing.T) {
	seed := testSeed(t)
	perRound := 300
	if testing.Short() || raceEnabled {
		// Under the race detector this test checks for races; the full
		// count runs in scripts/test.sh's crash-scale step.
		perRound = 60
	}
	for _, m := range crashModes {
		t.Run(m.name, func(t *testing.T) {
			total := perRound
			if *crashPointsFlag > 0 {
				total = *crashPointsFlag
			}
			for round := 0; total > 0; round++ {
				n := min(total, perRound)
				total -= n
				if round > 0 {
					t.Logf("round %d: seed %d (replay alone with -rivet.seed=%d)", round, seed+int64(round), seed+int64(round))
				}
				crashRecoveryRound(t, seed+int64(round), n, m)
			}
		})
	}
}

// crashMode is a durability mode under crash test, with the crash model
// that matches its platform.
type crashMode struct {
	name string
	d    Durability
	// noJournal: Full without the commit journal (format 3's protocol).
	noJournal bool
	// barrierDurable: a write barrier survives power loss like a flush
	// (Linux, Windows); false is macOS's F_BARRIERFSYNC (ordering only).
	barrierDurable bool
	// syncEvery: the workload calls DB.Sync every n commits (None mode).
	syncEvery int
}

var crashModes = []crashMode{
	{name: "Full", d: Full},
	{name: "FullNoJournal", d: Full, noJournal: true},
	{name: "Barrier", d: Barrier, barrierDurable: true},
	{name: "BarrierOrderingOnly", d: Barrier},
	{name: "Periodic", d: Periodic(2 * time.Millisecond)},
	{name: "None", d: None, syncEvery: 10},
}

var crashPointsFlag = flag.Int("rivet.crashpoints", 0, "crash points for TestCrashRecovery (0: 300, or 60 with -short)")

// crashRecoveryRound runs one round of TestCrashRecovery: one workload with
// up to points crash points.
func crashRecoveryRound(t *testing.T, seed int64, points int, mode crashMode) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	crashRng := randv2.New(randv2.NewPCG(uint64(seed), 1))
	commits := 120
	if testing.Short() || raceEnabled {
		commits = 40
	}
	cfs := vfs.NewCrashable()
	var crashes []crashPoint
	acked := 0
	op := 0
	crashAt := map[int]bool{}
	// Ops per commit are about 3-4; spread the crash points over the run.
	for len(crashAt) < points {
		crashAt[rng.Intn(commits*4)] = true
	}
	var db *DB
	var txids []uint64 // txids[i]: the txid of states[i]
	var mu sync.Mutex  // the periodic syncer writes too
	hook := &hookFS{FS: cfs, before: func(string) {
		mu.Lock()
		defer mu.Unlock()
		if crashAt[op] {
			opts := vfs.DefaultCrashOptions
			opts.BarrierDurable = mode.barrierDurable
			switch op % 3 {
			case 1:
				opts.KeepProbability = 1
			case 2:
				opts.TearProbability = 0.9
			}
			// The oldest state the image may hold: the last one whose
			// sync point completed (barriers that only order count for
			// nothing in the ordering-only model).
			low := 0
			if db != nil && (mode.d != Barrier || mode.barrierDurable) {
				db.syncMu.Lock()
				durable := db.durable
				db.syncMu.Unlock()
				for i, id := range txids {
					if id <= durable {
						low = i
					}
				}
			}
			crashes = append(crashes, crashPoint{image: cfs.Crash(crashRng, opts), acked: acked, low: low, op: op})
		}
		op++
	}}
	var err error
	// Odd seeds allocate for locality (docs/design.md §4.3): pages land
	// elsewhere and the file grows at other times; recovery must not care.
	slack := float64(seed&1) * 0.4
	db, err = openFS(hook, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize, Durability: mode.d, LocalitySlack: slack, NoJournal: mode.noJournal})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if sw := uint64(seed) % 4; mode.d == Full && sw < 2 {
		// Switch journal files every few records: crashes then meet
		// switches and the checkpoints they start.
		db.jswitchBytes = int64(4096 + 2048*sw)
	}
	// Commits write their spilled pages in batches of 1-3 pages while
	// Spill goes on, before the commit's other pages exist (Full and
	// Barrier; btree.Env.WriteEarly), and the rest at commit.
	db.earlyWritePages.Store(1 + seed%3)
	states := []map[string]string{}
	record := func() {
		d, err := dumpDB(db)
		if err != nil {
			t.Fatal(err)
		}
		id := db.headTxid() // before mu: the syncer holds writer while it writes (and takes mu in the hook)
		mu.Lock()
		states = append(states, d)
		txids = append(txids, id)
		mu.Unlock()
	}
	record() // state 0: the empty file after creation
	acked = 0
	// Images are verified as soon as the commit they may contain has
	// finished, then dropped: each holds a copy of the file.
	fellBack, verified, compactions := 0, 0, 0
	var released int64
	verify := func(final bool) {
		mu.Lock()
		defer mu.Unlock()
		keep := crashes[:0]
		for _, c := range crashes {
			if !final && c.acked+1 >= len(states) {
				keep = append(keep, c)
				continue
			}
			if verifyCrashImage(t, c, states) {
				fellBack++
			}
			verified++
		}
		crashes = keep
	}
	for i := 1; i <= commits; i++ {
		// Every twelfth commit is large: past maxDeferredCommitPages,
		// which a journaled commit still defers and the others write.
		large := i%12 == 5
		err := db.Update(func(tx *Tx) error {
			for j := 0; large && j < 150 || j < 1+rng.Intn(20); j++ {
				name := []byte(fmt.Sprintf("b%d", rng.Intn(3)))
				keys, maxValue := 200, 600
				if rng.Intn(3) == 0 {
					// Small buckets of a few short keys: inline buckets
					// (format 3), some growing past the inline limit and
					// shrinking back.
					name = []byte(fmt.Sprintf("s%02d", rng.Intn(20)))
					keys, maxValue = 6, 60
				}
				b, err := tx.CreateBucketIfNotExists(name)
				if err != nil {
					return err
				}
				if rng.Intn(4) == 0 {
					if b, err = b.CreateBucketIfNotExists([]byte("nested")); err != nil {
						return err
					}
				}
				k := []byte(fmt.Sprintf("k%03d", rng.Intn(keys)))
				switch r := rng.Intn(10); {
				case r < 6:
					v := make([]byte, rng.Intn(maxValue))
					rng.Read(v)
					if err := b.Put(k, v); err != nil {
						return err
					}
				case r < 9:
					if err := b.Delete(k); err != nil {
						return err
					}
				default:
					if _, err := b.NextSequence(); err != nil {
						return err
					}
				}
			}
			if rng.Intn(15) == 0 {
				if err := tx.DeleteBucket([]byte(fmt.Sprintf("b%d", rng.Intn(3)))); err != nil && err != ErrBucketNotFound {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		mu.Lock()
		acked = i
		mu.Unlock()
		record()
		if mode.syncEvery > 0 && i%mode.syncEvery == 0 {
			if err := db.Sync(); err != nil {
				t.Fatalf("sync after commit %d: %v", i, err)
			}
		}
		if rng.Intn(8) == 0 {
			// Online compaction (docs/design.md §4.1): relocation
			// commits, the shrink, the clean meta and the truncation all
			// happen between two acknowledged commits and keep the data,
			// so every image must still hold state i (or i+1).
			r, err := db.Compact(context.Background())
			if err != nil {
				t.Fatalf("compact after commit %d: %v", i, err)
			}
			compactions++
			released += r
		}
		verify(false)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	verify(true)
	t.Logf("%d crash points over %d commits and %d online compactions (%d KiB released); %d recovered by falling back to the previous sync point", verified, commits, compactions, released>>10, fellBack)
	if verified < points/2 {
		t.Fatalf("only %d crash points taken", verified)
	}
}

// verifyCrashImage opens one crash image and checks it holds the
// acknowledged commit or the one in flight, passes Check and takes a new
// commit. It reports whether recovery fell back to the previous sync point.
func verifyCrashImage(t *testing.T, c crashPoint, states []map[string]string) bool {
	t.Helper()
	// A second crash during the recovery below, at one of its first
	// operations (the journal's replay, its background sync point, the
	// commit after it, Close).
	rng := randv2.New(randv2.NewPCG(uint64(c.op), 2))
	var again *vfs.CrashFS
	var mu sync.Mutex
	op, againAt := 0, rng.IntN(12)
	hook := &hookFS{FS: c.image, before: func(string) {
		mu.Lock()
		defer mu.Unlock()
		if op == againAt {
			again = c.image.Crash(rng, vfs.DefaultCrashOptions)
		}
		op++
	}}
	cdb, err := openFS(hook, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatalf("crash at op %d (after commit %d): open: %v", c.op, c.acked, err)
	}
	fellBack := cdb.Recovery().FellBack
	mustCheck(t, cdb)
	got, err := dumpDB(cdb)
	if err != nil {
		t.Fatalf("crash at op %d: read: %v", c.op, err)
	}
	// The image must hold exactly one committed state, no older than the
	// last durable one and no newer than the commit in flight.
	ok := false
	for i := c.low; i <= c.acked+1 && i < len(states); i++ {
		if sameDump(got, states[i]) {
			ok = true
			break
		}
	}
	if !ok {
		match := -1
		for i := range states {
			if sameDump(got, states[i]) {
				match = i
			}
		}
		t.Fatalf("crash at op %d: state matches no commit in [%d, %d] (durable .. in flight; it is state %d; recovery %+v)\n%s", c.op, c.low, c.acked+1, match, cdb.Recovery(), describeDiff(got, states[c.acked]))
	}
	// The recovered file must take new commits.
	if err := cdb.Update(func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("after"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), bytes.Repeat([]byte("v"), 300))
	}); err != nil {
		t.Fatalf("crash at op %d: commit after recovery: %v", c.op, err)
	}
	mustCheck(t, cdb)
	if err := cdb.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if again != nil {
		verifyRecoveryCrash(t, c, again, got)
	}
	return fellBack
}

// verifyRecoveryCrash checks the image of a crash during the recovery of
// crash point c, which found the state recovered: it must open at that
// state, or at it with the commit made after it.
func verifyRecoveryCrash(t *testing.T, c crashPoint, image *vfs.CrashFS, recovered map[string]string) {
	t.Helper()
	db, err := openFS(image, "/db", 0o600, &Options{PageSize: 1024, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatalf("crash at op %d, then during recovery: open: %v", c.op, err)
	}
	defer db.Close()
	mustCheck(t, db)
	got, err := dumpDB(db)
	if err != nil {
		t.Fatalf("crash at op %d, then during recovery: read: %v", c.op, err)
	}
	withAfter := maps.Clone(recovered)
	withAfter["after/"] = "0"
	withAfter["after/\x00k"] = strings.Repeat("v", 300)
	if !sameDump(got, recovered) && !sameDump(got, withAfter) {
		t.Fatalf("crash at op %d, then during recovery: state is not the recovered one (recovery %+v)\n%s", c.op, db.Recovery(), describeDiff(got, recovered))
	}
}

func describeDiff(got, want map[string]string) string {
	var lines []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			lines = append(lines, fmt.Sprintf("missing %q", k))
		} else if g != v {
			lines = append(lines, fmt.Sprintf("differs %q (%d vs %d bytes)", k, len(g), len(v)))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("extra %q", k))
		}
	}
	sort.Strings(lines)
	if len(lines) > 10 {
		lines = lines[:10]
	}
	return fmt.Sprint(lines)
}

// TestCreationCrash crashes the machine at every write and flush of a new
// file's creation, and once after Open returned, keeping none, all, or a
// random part of the unflushed operations. Every image must be a file that
// never held data: a writable Open creates it (again) or opens the empty
// database, which passes Check; a read-only Open opens the empty database
// or refuses the file with ErrInvalid, or finds no file (a crash before
// creation's directory flush may lose the file's name). No image may be taken for a damaged
// file (for instance "file size too small": creation makes the length
// durable before it writes a meta).
func TestCreationCrash(t *testing.T) {
	seed := testSeed(t)
	crashRng := randv2.New(randv2.NewPCG(uint64(seed), 3))
	for _, ps := range []int{1024, 4096} {
		cfs := vfs.NewCrashable()
		var images []*vfs.CrashFS
		take := func(string) {
			images = append(images, cfs.CrashKeepNone(), cfs.CrashKeepAll())
			for i := 0; i < 4; i++ {
				opts := vfs.DefaultCrashOptions
				opts.KeepProbability = crashRng.Float64()
				images = append(images, cfs.Crash(crashRng, opts))
			}
		}
		db, err := openFS(&hookFS{FS: cfs, before: take}, "/db", 0o600, &Options{PageSize: ps, InitialMmapSize: memMapSize})
		if err != nil {
			t.Fatal(err)
		}
		take("after Open")
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if len(images) < 6*4 {
			t.Fatalf("page size %d: only %d crash images; creation did fewer I/O operations than its three flushes need", ps, len(images))
		}
		for i, img := range images {
			ro, err := openFS(img, "/db", 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
			if err == nil {
				if d, err := dumpDB(ro); err != nil || len(d) != 0 {
					t.Errorf("page size %d, image %d: read-only Open of a crashed creation holds %v (%v)", ps, i, d, err)
				}
				_ = ro.Close()
			} else if !(errors.Is(err, ErrInvalid) || errors.Is(err, os.ErrNotExist)) || strings.Contains(err.Error(), "too small") {
				t.Errorf("page size %d, image %d: read-only Open: %v, want success or ErrInvalid for a file never created", ps, i, err)
			}
			rw, err := openFS(img, "/db", 0o600, &Options{PageSize: ps, InitialMmapSize: memMapSize})
			if err != nil {
				t.Errorf("page size %d, image %d: writable Open of a crashed creation: %v", ps, i, err)
				continue
			}
			mustCheck(t, rw)
			if err := rw.Update(func(tx *Tx) error {
				b, err := tx.CreateBucket([]byte("b"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k"), []byte("v"))
			}); err != nil {
				t.Errorf("page size %d, image %d: first commit after a crashed creation: %v", ps, i, err)
			}
			mustCheck(t, rw)
			_ = rw.Close()
		}
		t.Logf("page size %d: %d crash images of creation, each reopened read-only and writable", ps, len(images))
	}
}

package rivet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// compactLoad fills db with n keys spread over a plain bucket, a nested
// bucket, small (inline) buckets and a few blobs, in transactions of 500.
func compactLoad(t *testing.T, db *DB, n int, rng *rand.Rand) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("data"))
			if err != nil {
				return err
			}
			nb, err := b.CreateBucketIfNotExists([]byte("nested"))
			if err != nil {
				return err
			}
			for i := start; i < min(start+500, n); i++ {
				v := make([]byte, 50+rng.Intn(400))
				rng.Read(v)
				target := b
				switch {
				case i%7 == 0:
					target = nb
				case i%1000 == 3:
					v = bytes.Repeat([]byte{byte(i)}, 40000) // a blob
				case i%97 == 0:
					small, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprintf("small%06d", i)))
					if err != nil {
						return err
					}
					target = small
				}
				if err := target.Put([]byte(fmt.Sprintf("key%08d", i)), v); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// compactDelete deletes every key of the data buckets whose index keep
// rejects, in transactions of 2,000.
func compactDelete(t *testing.T, db *DB, n int, keep func(i int) bool) {
	t.Helper()
	for start := 0; start < n; start += 2000 {
		if err := db.Update(func(tx *Tx) error {
			b := tx.Bucket([]byte("data"))
			nb := b.Bucket([]byte("nested"))
			for i := start; i < min(start+2000, n); i++ {
				if keep(i) {
					continue
				}
				k := []byte(fmt.Sprintf("key%08d", i))
				if err := b.Delete(k); err != nil {
					return err
				}
				if err := nb.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func fileLen(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCompactOnline: a file grown to ~30 MB and then emptied to 100 keys
// (and, separately, with half its keys deleted) is compacted while a reader
// holding an older snapshot and a writer making commits run. The reader
// keeps reading its snapshot unchanged; every commit succeeds; afterwards
// the data equal the model, Check passes (free space included), the file
// is small (emptied: ≤ 2 MiB; half: within 1.10x of an offline Compact),
// and all of it holds after a reopen.
func TestCompactOnline(t *testing.T) {
	n := 60000
	if testing.Short() || raceEnabled {
		n = 15000
	}
	for _, shape := range []string{"emptied", "half"} {
		t.Run(shape, func(t *testing.T) {
			seed := testSeed(t)
			rng := rand.New(rand.NewSource(seed))
			path := filepath.Join(t.TempDir(), "db")
			db, err := Open(path, 0o600, &Options{PageSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			compactLoad(t, db, n, rng)
			keep := func(i int) bool { return i%(n/100) == 0 }
			if shape == "half" {
				half := rand.New(rand.NewSource(seed + 1))
				kept := make([]bool, n)
				for i := range kept {
					kept[i] = half.Intn(2) == 0
				}
				keep = func(i int) bool { return kept[i] }
			}
			compactDelete(t, db, n, keep)
			grown := fileLen(t, path)
			want, err := dumpDB(db)
			if err != nil {
				t.Fatal(err)
			}

			// A reader whose snapshot predates compaction, and a writer.
			reader, err := db.Begin(false)
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var writerErr error
			written := 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if err := db.Update(func(tx *Tx) error {
						b, err := tx.CreateBucketIfNotExists([]byte("writer"))
						if err != nil {
							return err
						}
						return b.Put([]byte(fmt.Sprintf("w%06d", i)), []byte("during compaction"))
					}); err != nil {
						writerErr = err
						return
					}
					written = i + 1
				}
			}()
			released, err := db.Compact(context.Background())
			if err != nil {
				t.Fatalf("Compact: %v", err)
			}
			got, err := dumpTx(reader)
			if err != nil || !sameDump(got, want) {
				t.Fatalf("the reader's snapshot changed during compaction (%v): %s", err, describeDiff(got, want))
			}
			if err := reader.Rollback(); err != nil {
				t.Fatal(err)
			}
			close(stop)
			wg.Wait()
			if writerErr != nil {
				t.Fatalf("a commit during compaction failed: %v", writerErr)
			}
			// Now that the old reader is gone, a second call can cut what
			// the first had to leave.
			released2, err := db.Compact(context.Background())
			if err != nil {
				t.Fatalf("second Compact: %v", err)
			}
			mustCheck(t, db)
			for i := 0; i < written; i++ {
				want[fmt.Sprintf("writer/\x00w%06d", i)] = "during compaction"
			}
			if written > 0 {
				want["writer/"] = "0"
			}
			got, err = dumpDB(db)
			if err != nil || !sameDump(got, want) {
				t.Fatalf("data after compaction (%v): %s", err, describeDiff(got, want))
			}
			compacted := fileLen(t, path)
			t.Logf("%s: %d keys loaded, file %d KiB -> %d KiB (released %d + %d KiB of state), %d commits during the first call",
				shape, n, grown>>10, compacted>>10, released>>10, released2>>10, written)

			// The offline copy, for comparison.
			offline := filepath.Join(t.TempDir(), "offline")
			dst, err := Open(offline, 0o600, &Options{PageSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			if err := Compact(dst, db, 0); err != nil {
				t.Fatal(err)
			}
			if err := dst.Close(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			closed := fileLen(t, path)
			offlineSize := fileLen(t, offline)
			t.Logf("%s: after Close %d KiB; an offline Compact of the same data: %d KiB", shape, closed>>10, offlineSize>>10)
			switch shape {
			case "emptied":
				if closed > 2<<20 {
					t.Errorf("emptied file is %d KiB after online compaction, want <= 2 MiB", closed>>10)
				}
			case "half":
				// Random deletes leave leaves half empty all through the
				// file; the repacking pass fills them, so the file ends
				// about where an offline copy does (within 1.10x of
				// bbolt's offline Compact, which writes the same data
				// into about as many pages as rivet's).
				if float64(closed) > 1.10*float64(offlineSize) {
					t.Errorf("half-deleted file is %d KiB after online compaction, %.2fx the %d KiB of an offline copy, want <= 1.10x", closed>>10, float64(closed)/float64(offlineSize), offlineSize>>10)
				}
			}
			db, err = Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
			got, err = dumpDB(db)
			if err != nil || !sameDump(got, want) {
				t.Fatalf("data after reopen (%v): %s", err, describeDiff(got, want))
			}
		})
	}
}

// TestAutoCompact: with Options.AutoCompact a file emptied to a few keys
// shrinks by itself while it stays open, and Close stops the background
// compactor (also while a compaction may be running).
func TestAutoCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, 0o600, &Options{PageSize: 4096, AutoCompact: &AutoCompact{Interval: 10 * time.Millisecond, FreeFraction: 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(testSeed(t)))
	const n = 20000
	compactLoad(t, db, n, rng)
	grown := fileLen(t, path)
	compactDelete(t, db, n, func(i int) bool { return i%(n/100) == 0 })
	want, err := dumpDB(db)
	if err != nil {
		t.Fatal(err)
	}
	// Functional wait, not a speed target: the compactor looks every
	// 10 ms; give it up to 30 s on a loaded machine.
	deadline := time.Now().Add(30 * time.Second)
	for fileLen(t, path) > grown/8 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	shrunk := fileLen(t, path)
	if shrunk > grown/8 {
		t.Fatalf("file still %d KiB (grown to %d KiB) after 30 s of automatic compaction", shrunk>>10, grown>>10)
	}
	mustCheck(t, db)
	got, err := dumpDB(db)
	if err != nil || !sameDump(got, want) {
		t.Fatalf("data after automatic compaction (%v): %s", err, describeDiff(got, want))
	}
	// Keep it busy and close: Close must stop it, not hang or race.
	compactDelete(t, db, n, func(i int) bool { return false })
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("file %d KiB -> %d KiB by itself", grown>>10, shrunk>>10)
	db, err = Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db)
	_ = db.Close()
}

// TestCompactResumeNested: many buckets, nested two deep, with values of
// every size (inline, multi-page, blobs), most keys deleted at random, are
// compacted in steps of 7 pages, so that nearly every step ends inside a
// tree or between buckets and the next resumes there; a first call is
// cancelled part way. Afterwards the data equal the model, Check passes,
// the steps were many, and the file is within 1.10x of an offline copy.
func TestCompactResumeNested(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	db := openTestDB(t, &Options{PageSize: 4096})
	db.compactBudget = 7
	value := func() []byte {
		var n int
		switch rng.Intn(10) {
		case 0:
			n = 4096 + rng.Intn(3*4096) // multi-page, inline
		case 1:
			n = 9*4096 + rng.Intn(4096) // a blob
		default:
			n = 20 + rng.Intn(300)
		}
		v := make([]byte, n)
		rng.Read(v)
		return v
	}
	var keys [][3]string // top bucket, nested bucket ("" for none), key
	if err := db.Update(func(tx *Tx) error {
		for b := 0; b < 12; b++ {
			top, err := tx.CreateBucket(fmt.Appendf(nil, "top%02d", b))
			if err != nil {
				return err
			}
			for k := 0; k < 300; k++ {
				key := fmt.Sprintf("k%05d", rng.Intn(100000))
				keys = append(keys, [3]string{fmt.Sprintf("top%02d", b), "", key})
				if err := top.Put([]byte(key), value()); err != nil {
					return err
				}
			}
			for c := 0; c < 4; c++ {
				name := fmt.Sprintf("nested%d", c)
				nb, err := top.CreateBucket([]byte(name))
				if err != nil {
					return err
				}
				for k := 0; k < 150; k++ {
					key := fmt.Sprintf("n%05d", rng.Intn(100000))
					keys = append(keys, [3]string{fmt.Sprintf("top%02d", b), name, key})
					if err := nb.Put([]byte(key), value()); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for start := 0; start < len(keys)*2/3; start += 500 {
		if err := db.Update(func(tx *Tx) error {
			for _, k := range keys[start:min(start+500, len(keys)*2/3)] {
				b := tx.Bucket([]byte(k[0]))
				if k[1] != "" {
					b = b.Bucket([]byte(k[1]))
				}
				if err := b.Delete([]byte(k[2])); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := dumpDB(db.DB)
	if err != nil {
		t.Fatal(err)
	}
	before := db.Stats()

	// A call cancelled after a few steps, then one that finishes.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for db.Stats().CompactSteps-before.CompactSteps < 20 {
			time.Sleep(50 * time.Microsecond)
		}
		cancel()
	}()
	if _, err := db.Compact(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Compact: %v, want context.Canceled", err)
	}
	mustCheck(t, db.DB)
	if _, err := db.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, db.DB)
	got, err := dumpDB(db.DB)
	if err != nil || !sameDump(got, want) {
		t.Fatalf("data after compaction (%v): %s", err, describeDiff(got, want))
	}
	d := db.Stats()
	d = d.Sub(&before)
	if d.CompactSteps < 50 {
		t.Errorf("%d compaction steps of at most 7 pages rewrote %d pages: want many steps", d.CompactSteps, d.CompactPagesRewritten)
	}
	offline := filepath.Join(t.TempDir(), "offline")
	dst, err := Open(offline, 0o600, &Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := Compact(dst, db.DB, 0); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	db.reopen()
	got, err = dumpDB(db.DB)
	if err != nil || !sameDump(got, want) {
		t.Fatalf("data after reopening (%v): %s", err, describeDiff(got, want))
	}
	size, offSize := fileLen(t, db.Path()), fileLen(t, offline)
	t.Logf("%d steps rewrote %d pages; file %d KiB, offline copy %d KiB (%.2fx)", d.CompactSteps, d.CompactPagesRewritten, size>>10, offSize>>10, float64(size)/float64(offSize))
	if float64(size) > 1.10*float64(offSize) {
		t.Errorf("file is %d KiB after compaction, %.2fx the %d KiB of an offline copy, want <= 1.10x", size>>10, float64(size)/float64(offSize), offSize>>10)
	}
}

// TestCompactUnderTraffic: while short readers (one Get per transaction)
// and a writer (one-key overwrites) run, a file with half its keys deleted
// is compacted several times in small steps. Every read finds what the
// model says, every commit succeeds, and Check passes afterwards.
func TestCompactUnderTraffic(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	db := openTestDB(t, &Options{PageSize: 4096})
	db.compactBudget = 16
	const n = 40000
	val := func(i int) []byte { return fmt.Appendf(nil, "%0100d", i) }
	for start := 0; start < n; start += 1000 {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("data"))
			if err != nil {
				return err
			}
			for i := start; i < start+1000; i++ {
				if err := b.Put(fmt.Appendf(nil, "key%08d", i), val(i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	live := make([]bool, n)
	perm := rng.Perm(n)
	for i := range live {
		live[i] = true
	}
	for start := 0; start < n/2; start += 5000 {
		if err := db.Update(func(tx *Tx) error {
			b := tx.Bucket([]byte("data"))
			for _, i := range perm[start : start+5000] {
				live[i] = false
				if err := b.Delete(fmt.Appendf(nil, "key%08d", i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	errs := make(chan error, 3)
	for r := 0; r < 2; r++ {
		go func(r int) {
			rr := rand.New(rand.NewSource(seed + int64(r) + 10))
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				i := rr.Intn(n)
				err := db.View(func(tx *Tx) error {
					v := tx.Bucket([]byte("data")).Get(fmt.Appendf(nil, "key%08d", i))
					if live[i] != (v != nil) || (v != nil && !bytes.Equal(v, val(i))) {
						return fmt.Errorf("key %d: got %q, live %v", i, v, live[i])
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}(r)
	}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if err := db.Update(func(tx *Tx) error {
				return tx.Bucket([]byte("data")).Put(fmt.Appendf(nil, "w%04d", i%500), val(i))
			}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for round := 0; round < 3; round++ {
		if _, err := db.Compact(context.Background()); err != nil {
			t.Fatalf("Compact round %d: %v", round, err)
		}
		mustCheck(t, db.DB)
	}
	close(stop)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestAutoCompactBacksOff: while a reader holds the pages a compaction
// would give back, the automatic compactor does not read the trees every
// interval: it backs off. Once the reader ends, it shrinks the file.
func TestAutoCompactBacksOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, 0o600, &Options{PageSize: 4096, AutoCompact: &AutoCompact{Interval: time.Millisecond, FreeFraction: 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewSource(testSeed(t)))
	const n = 20000
	compactLoad(t, db, n, rng)
	reader, err := db.Begin(false) // holds every page of the full state
	if err != nil {
		t.Fatal(err)
	}
	grown := fileLen(t, path)
	compactDelete(t, db, n, func(i int) bool { return i%(n/100) == 0 })
	before := db.Stats()
	time.Sleep(400 * time.Millisecond)
	d := db.Stats()
	d = d.Sub(&before)
	// Without backoff: about one call per millisecond (several hundred);
	// with it, about 1 + log2 of the wait plus 400/64.
	if d.CompactCalls > 40 {
		t.Errorf("%d automatic compactions in 400 ms while a reader held the pages: not backing off", d.CompactCalls)
	}
	t.Logf("%d automatic compactions in 400 ms with the pages held", d.CompactCalls)
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Functional wait, not a speed target.
	deadline := time.Now().Add(30 * time.Second)
	for fileLen(t, path) > grown/8 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if size := fileLen(t, path); size > grown/8 {
		t.Fatalf("file still %d KiB (grown to %d KiB) 30 s after the reader ended", size>>10, grown>>10)
	}
	mustCheck(t, db)
}

// TestCompactProgress: CompactWith reports every phase in order, the bytes
// moved never go down or pass the bytes to move, the last report has
// moved everything it expected, and Stats shows the same progress while
// the compaction runs and none after it.
func TestCompactProgress(t *testing.T) {
	n := 20000
	if testing.Short() || raceEnabled {
		n = 8000
	}
	rng := rand.New(rand.NewSource(testSeed(t)))
	tdb := openTestDB(t, &Options{PageSize: 4096})
	db := tdb.DB
	compactLoad(t, db, n, rng)
	// Keep the last keys of every 100: the live pages lie all through the
	// file, those near its end must move.
	compactDelete(t, db, n, func(i int) bool { return i%100 >= 90 })
	before := db.Stats()
	var reports []CompactProgress
	var during []Stats
	released, err := db.CompactWith(context.Background(), &CompactOptions{Progress: func(p CompactProgress) {
		reports = append(reports, p)
		if len(reports)%16 == 1 {
			during = append(during, db.Stats())
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if released <= 0 {
		t.Fatalf("compaction released %d bytes", released)
	}
	phases := []string{}
	for i, p := range reports {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
		if p.Moved > p.ToMove {
			t.Fatalf("report %d: moved %d of %d", i, p.Moved, p.ToMove)
		}
		if i > 0 && p.Moved < reports[i-1].Moved {
			t.Fatalf("report %d: moved went down from %d to %d", i, reports[i-1].Moved, p.Moved)
		}
	}
	if len(phases) < 3 || phases[0] != "pack" || phases[len(phases)-1] != "cut" || !slices.Contains(phases, "relocate") {
		t.Fatalf("phases %v, want pack, relocate..., cut", phases)
	}
	last := reports[len(reports)-1]
	after := db.Stats()
	rewritten := (after.CompactPagesRewritten - before.CompactPagesRewritten) * 4096
	if last.Moved != last.ToMove || last.Moved != rewritten || rewritten == 0 {
		t.Fatalf("last report moved %d of %d; stats count %d bytes rewritten", last.Moved, last.ToMove, rewritten)
	}
	if len(during) == 0 {
		t.Fatal("no Stats taken during the compaction")
	}
	for _, s := range during {
		if !s.Compacting || s.CompactPhase == "" || s.CompactBytesMoved > s.CompactBytesToMove {
			t.Fatalf("Stats during compaction: compacting %v, phase %q, moved %d of %d", s.Compacting, s.CompactPhase, s.CompactBytesMoved, s.CompactBytesToMove)
		}
	}
	if after.Compacting || after.CompactPhase != "" || after.CompactBytesMoved != 0 {
		t.Fatalf("Stats after compaction: %+v", after)
	}
	if after.CompactLongestHold <= 0 {
		t.Fatalf("CompactLongestHold %v after %d steps", after.CompactLongestHold, after.CompactSteps-before.CompactSteps)
	}
}

// TestNextTruncateChunk pins how truncateTail sizes its pieces by the time
// the last one took.
func TestNextTruncateChunk(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		chunk int64
		held  time.Duration
		want  int64
	}{
		{2 * mib, truncateHold / 4, 4 * mib},                       // quick: doubled
		{2 * mib, truncateHold * 3 / 2, 2 * mib},                   // about right: kept
		{8 * mib, truncateHold * 3, 4 * mib},                       // slow: halved
		{truncateMinChunk, truncateHold * 10, truncateMinChunk},    // never below the least
		{truncateMaxChunk, 0, truncateMaxChunk},                    // never above the most
		{truncateMaxChunk / 2, time.Microsecond, truncateMaxChunk}, // up to the most
	} {
		if got := nextTruncateChunk(c.chunk, c.held); got != c.want {
			t.Errorf("nextTruncateChunk(%d, %v) = %d, want %d", c.chunk, c.held, got, c.want)
		}
	}
}

// TestWaitForReaders: Compact's wait before its cut returns once every
// read transaction began on the given state or a newer one, and no later
// than its bound while an older one stays open.
func TestWaitForReaders(t *testing.T) {
	db := openTestDB(t, nil)
	mustPutOne(t, db.DB, "b", "k", "v0")
	old, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	mustPutOne(t, db.DB, "b", "k", "v1")
	head := db.headTxid()

	start := time.Now()
	db.waitForReaders(head, 30*time.Millisecond)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("returned after %v with an older reader open, want its bound 30ms", d)
	}

	done := make(chan struct{})
	go func() {
		db.waitForReaders(head, time.Minute)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("returned while an older reader is open")
	case <-time.After(20 * time.Millisecond):
	}
	// A reader on the newest state does not hold it up.
	cur, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Rollback()
	if err := old.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the older reader ended")
	}
}

// TestWritersNeedTurn: compaction gives way to writers queued for the
// lock, and to a sync point in flight only where durable writers wait
// for one (no journal); a journaled writer waits for no checkpoint.
func TestWritersNeedTurn(t *testing.T) {
	for _, journaled := range []bool{true, false} {
		t.Run(fmt.Sprint("journal=", journaled), func(t *testing.T) {
			db := openTestDB(t, &Options{NoJournal: !journaled})
			mustPutOne(t, db.DB, "b", "k", "v")
			if db.journals() != journaled {
				t.Fatalf("journals() = %v", db.journals())
			}
			if db.writersNeedTurn() {
				t.Error("turn wanted with no writer waiting and nothing in flight")
			}
			db.writersWaiting.Add(1)
			if !db.writersNeedTurn() {
				t.Error("no turn for a writer queued for the lock")
			}
			db.writersWaiting.Add(-1)
			db.syncMu.Lock()
			for db.syncing {
				db.syncCond.Wait()
			}
			db.syncing = true
			db.syncMu.Unlock()
			if got := db.writersNeedTurn(); got == journaled {
				t.Errorf("with a sync point in flight: turn wanted %v, want %v", got, !journaled)
			}
			db.releaseSync()
		})
	}
}

// TestCompactStepsLeaveCommitsLone: a compaction step waits for no flush,
// so it does not count among the commits a journal write or sync point
// takes up, nor among the writers waiting for the lock; a durable commit
// that follows one still leads its own journal write at once, covering
// itself alone, rather than joining a group and lingering for more.
func TestCompactStepsLeaveCommitsLone(t *testing.T) {
	db := openTestDB(t, nil)
	for i := range 3 {
		mustPutOne(t, db.DB, "b", fmt.Sprint("k", i), "v")
	}
	if !db.jready.Load() || db.joff.Load() {
		t.Fatal("the default options commit through no journal")
	}
	// A step's transaction, as compactStep makes it: here it only moves
	// nothing and commits the free-space map's operations.
	tx, err := db.beginRWAs(false)
	if err != nil {
		t.Fatal(err)
	}
	tx.lazy = true
	tx.journaling = false
	tx.spaceOps++
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := db.unsyncedCommits.Load(); n != 0 {
		t.Errorf("a compaction step counts as %d commits waiting for a flush, want 0", n)
	}
	before := db.Stats()
	mustPutOne(t, db.DB, "b", "k", "after the step")
	if d := db.Stats().JournalWrites - before.JournalWrites; d != 1 {
		t.Fatalf("%d journal writes for one durable commit", d)
	}
	// (A background sync point after the write would leave 0 here.)
	if n := db.lastSyncCommits.Load(); n > 1 {
		t.Errorf("the journal write after a step covered %d commits, want 1 (itself)", n)
	}
}

//go:build unix

package rivet

// TestKillDuringCompaction SIGKILLs a child process in the middle of a
// large online compaction while it also commits durable one-key
// transactions, as etcd's leader would, and checks the reopened file: Check
// finds nothing, every acknowledged commit is there, and every key holds
// exactly the value written for it.

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	killCompactSize  = flag.Int64("rivet.killcompact.size", 0, "file size TestKillDuringCompaction builds (0: 48 MiB, or 16 MiB with -short)")
	killCompactKills = flag.Int("rivet.killcompact.kills", 0, "kills of TestKillDuringCompaction (0: 6, or 3 with -short)")
)

// The etcd-shaped data: revision keys appended in order, values of 512
// bytes to 8 KiB, and a meta key naming the newest revision.
var (
	killCompactBucket = []byte("key")
	killCompactMeta   = []byte("meta")
	killCompactIndex  = []byte("consistent_index")
)

func killCompactKey(rev uint64) []byte {
	k := make([]byte, 17)
	binary.BigEndian.PutUint64(k, rev)
	k[8] = '_'
	return k
}

// killCompactValue is revision rev's value: its length and bytes follow
// from rev alone, so the parent can check any key without a model.
func killCompactValue(rev uint64) []byte {
	h := rev * 0x9e3779b97f4a7c15
	v := make([]byte, 512+int(h>>40)%(8192-512))
	for i := range v {
		v[i] = byte(h>>(8*(i%8))) ^ byte(i)
	}
	return v
}

// killChildCompact runs in the child (TestKillChild, mode "compact"): it
// reports "ready L" with the newest revision L in the file, then commits
// revisions L+1, L+2, ... durably one per transaction ("ack N") while
// CompactWith runs ("moved X of Y" after every step, "phase P" when a
// phase begins, "compacted" at the end), until it is killed.
func killChildCompact(report *os.File) error {
	db, err := Open(os.Getenv(killEnvPath), 0o600, &Options{Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	var last uint64
	if err := db.View(func(tx *Tx) error {
		k, _ := tx.Bucket(killCompactBucket).Cursor().Last()
		last = binary.BigEndian.Uint64(k)
		return nil
	}); err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(5)
	}()
	if _, err := fmt.Fprintf(report, "ready %d\n", last); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		for rev := last + 1; ; rev++ {
			err := db.Update(func(tx *Tx) error {
				if err := tx.Bucket(killCompactBucket).Put(killCompactKey(rev), killCompactValue(rev)); err != nil {
					return err
				}
				return tx.Bucket(killCompactMeta).Put(killCompactIndex, killCompactKey(rev))
			})
			if err == nil {
				_, err = fmt.Fprintf(report, "ack %d\n", rev)
			}
			if err != nil {
				errc <- fmt.Errorf("revision %d: %w", rev, err)
				return
			}
		}
	}()
	phase := ""
	_, err = db.CompactWith(context.Background(), &CompactOptions{Progress: func(p CompactProgress) {
		if p.Phase != phase {
			phase = p.Phase
			fmt.Fprintf(report, "phase %s\n", phase)
		}
		fmt.Fprintf(report, "moved %d of %d\n", p.Moved, p.ToMove)
	}})
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if _, err := fmt.Fprintln(report, "compacted"); err != nil {
		return err
	}
	return <-errc
}

// buildKillCompactFile writes revisions 1..n of the etcd-shaped data, n
// such that the file reaches size bytes, in transactions of 2,000 puts,
// then deletes the oldest half. It returns n.
func buildKillCompactFile(t *testing.T, path string, size int64) uint64 {
	t.Helper()
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rev uint64
	for {
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists(killCompactBucket)
			if err != nil {
				return err
			}
			m, err := tx.CreateBucketIfNotExists(killCompactMeta)
			if err != nil {
				return err
			}
			for range 2000 {
				rev++
				if err := b.Put(killCompactKey(rev), killCompactValue(rev)); err != nil {
					return err
				}
			}
			return m.Put(killCompactIndex, killCompactKey(rev))
		}); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil {
			t.Fatal(err)
		} else if fi.Size() >= size {
			break
		}
	}
	for lo := uint64(1); lo <= rev/2; lo += 2000 {
		if err := db.Update(func(tx *Tx) error {
			b := tx.Bucket(killCompactBucket)
			for r := lo; r < lo+2000 && r <= rev/2; r++ {
				if err := b.Delete(killCompactKey(r)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return rev
}

func TestKillDuringCompaction(t *testing.T) {
	size, kills := *killCompactSize, *killCompactKills
	if size == 0 {
		size = 48 << 20
		if testing.Short() {
			size = 16 << 20
		}
	}
	if kills == 0 {
		kills = 6
		if testing.Short() {
			kills = 3
		}
	}
	rng := rand.New(rand.NewSource(testSeed(t)))
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	built := buildKillCompactFile(t, path, size)
	// Small files start every kill from the same uncompacted file; large
	// ones go on from where the last kill left the compaction.
	restore := size <= 256<<20
	if restore {
		copyFile(t, path, path+".built")
	}
	// committed is the newest revision the file holds; revisions above the
	// built ones exist from built+1 to committed.
	committed := built
	midway, aimedMidway := 0, 0
	for k := range kills {
		if restore {
			copyFile(t, path+".built", path)
			committed = built
		}
		at := 0.05 + 0.9*rng.Float64() // kill when this share of the bytes to move has moved
		// Every third kill aims at the cut instead: the file goes down in
		// pieces while the child commits.
		aimCut := k%3 == 2
		cutDelay := time.Duration(rng.Int63n(int64(30 * time.Millisecond)))
		if !aimCut {
			aimedMidway++
		}
		var killedIn string
		c := startKillChild(t, killEnvMode+"=compact", killEnvPath+"="+path)
		var lastAck uint64
		killed := false
		note := func(ev string) {
			if s, ok := strings.CutPrefix(ev, "ack "); ok {
				lastAck, _ = strconv.ParseUint(s, 10, 64)
			}
		}
		deadline := time.After(10 * time.Minute)
	events:
		for !killed {
			select {
			case ev, ok := <-c.events:
				if !ok {
					break events
				}
				note(ev)
				switch {
				case strings.HasPrefix(ev, "ready "):
					if l, _ := strconv.ParseUint(ev[len("ready "):], 10, 64); l != committed {
						t.Fatalf("kill %d: the child found revision %d, the file held %d", k, l, committed)
					}
				case strings.HasPrefix(ev, "moved "):
					var moved, toMove int64
					if _, err := fmt.Sscanf(ev, "moved %d of %d", &moved, &toMove); err != nil {
						t.Fatalf("kill %d: event %q: %v", k, ev, err)
					}
					if !aimCut && toMove > 0 && float64(moved) >= at*float64(toMove) && moved < toMove {
						c.kill(note)
						killed = true
						midway++
						killedIn = fmt.Sprintf("at %.0f%% of the bytes to move", 100*at)
					}
				case aimCut && ev == "phase cut":
					time.Sleep(cutDelay)
					c.kill(note)
					killed = true
					killedIn = fmt.Sprintf("%v into the cut", cutDelay.Round(time.Millisecond))
				case ev == "compacted":
					c.kill(note)
					killed = true
					killedIn = "after the compaction"
				}
			case <-deadline:
				t.Fatalf("kill %d: no kill point within 10 minutes; child output:\n%s", k, c.output())
			}
		}
		if !killed {
			t.Fatalf("kill %d: the child exited by itself: %v\n%s", k, c.wait(), c.output())
		}
		newest := verifyKillCompactFile(t, path, built, committed, lastAck)
		t.Logf("kill %d %s: acknowledged up to revision %d, the file holds %d", k, killedIn, lastAck, newest)
		committed = newest
	}
	// A kill lands while pages move only once the compaction knows what it
	// has to move (relocation; packing's total is known only at its end).
	// Restored files give every kill a whole compaction; on a large file
	// each kill leaves less for the next compaction, which may finish
	// before its kill point.
	want := (aimedMidway + 1) / 2
	if !restore {
		want = 1
	}
	if midway < want {
		t.Fatalf("only %d of %d kills landed while the compaction was moving pages", midway, kills)
	}
}

// verifyKillCompactFile opens path after a kill and checks it: Check finds
// nothing; the revisions run without a gap from built/2+1 (the oldest half
// was deleted) to newest, where newest is at least from (what the file held
// when the child began) and is the last acknowledged revision or the one
// after it (committed, killed before its acknowledgement); every value is
// the one written for its revision; the meta key names newest. It returns
// newest.
func verifyKillCompactFile(t *testing.T, path string, built, from, lastAck uint64) uint64 {
	t.Helper()
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("reopen after a kill: %v", err)
	}
	defer db.Close()
	mustCheck(t, db)
	acked := max(lastAck, from)
	var newest uint64
	err = db.View(func(tx *Tx) error {
		want := built/2 + 1
		c := tx.Bucket(killCompactBucket).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			rev := binary.BigEndian.Uint64(k)
			if rev != want {
				return fmt.Errorf("revision %d where %d was expected", rev, want)
			}
			if !bytes.Equal(v, killCompactValue(rev)) {
				return fmt.Errorf("revision %d holds a value of %d bytes, not the one written", rev, len(v))
			}
			newest = rev
			want++
		}
		if newest < acked || newest > acked+1 {
			return fmt.Errorf("the file ends at revision %d; acknowledged: up to %d (the file held %d before)", newest, acked, from)
		}
		if idx := tx.Bucket(killCompactMeta).Get(killCompactIndex); binary.BigEndian.Uint64(idx) != newest {
			return fmt.Errorf("the meta key names revision %d, the newest is %d", binary.BigEndian.Uint64(idx), newest)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return newest
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

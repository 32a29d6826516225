package rivet

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// TestLocalitySlack runs random updates on the same data with and without
// Options.LocalitySlack (docs/design.md §4.3): with a slack of one half a
// commit writes far fewer runs, the file grows no further than the slack
// allows, every value read back is the last one written, and Check (run
// by openTestDB's cleanup) finds the file sound, also after a reopen.
func TestLocalitySlack(t *testing.T) {
	const keys, commits, perCommit = 20_000, 300, 50
	seed := uint64(testSeed(t))
	type result struct {
		runsPerCommit float64
		hwm, live     uint64
	}
	run := func(slack float64) result {
		// The runs a sync point of the file writes: without the journal.
		db := openTestDB(t, &Options{LocalitySlack: slack, NoJournal: true})
		model := make(map[uint64][]byte, keys)
		key := func(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }
		if err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucket([]byte("b"))
			if err != nil {
				return err
			}
			for i := range uint64(keys) {
				model[i] = bytes.Repeat([]byte{1}, 100)
				if err := b.Put(key(i), model[i]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		s0 := db.Stats()
		for c := range commits {
			if err := db.Update(func(tx *Tx) error {
				b := tx.Bucket([]byte("b"))
				for range perCommit {
					i := rng.Uint64N(keys)
					v := binary.BigEndian.AppendUint64(bytes.Repeat([]byte{2}, 92), uint64(c))
					model[i] = v
					if err := b.Put(key(i), v); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		runs := float64(db.Stats().WriteRuns-s0.WriteRuns) / commits
		db.reopen()
		if err := db.View(func(tx *Tx) error {
			b := tx.Bucket([]byte("b"))
			for i, v := range model {
				if got := b.Get(key(i)); !bytes.Equal(got, v) {
					t.Fatalf("slack %v: key %d = %x, want %x", slack, i, got, v)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		st := db.Stats()
		hwm := headHWM(db.DB)
		return result{runs, hwm, hwm - uint64(st.FreePageN)}
	}
	packed, loose := run(0), run(0.5)
	t.Logf("runs per commit: slack 0 %.1f, slack 0.5 %.1f; pages: %d (%d live) and %d (%d live)",
		packed.runsPerCommit, loose.runsPerCommit, packed.hwm, packed.live, loose.hwm, loose.live)
	if loose.runsPerCommit > packed.runsPerCommit/2 {
		t.Errorf("a slack of 0.5 wrote %.1f runs per commit, without one %.1f: want at most half", loose.runsPerCommit, packed.runsPerCommit)
	}
	// The slack bounds growth: at most half the file free, plus what one
	// commit takes at the end and the pages the last commits freed.
	if limit := 2*loose.live + 2*perCommit*4; loose.hwm > limit {
		t.Errorf("with a slack of 0.5 the file holds %d pages for %d live: want at most %d", loose.hwm, loose.live, limit)
	}
}

// TestLocalitySlackOption checks Open's validation of LocalitySlack.
func TestLocalitySlackOption(t *testing.T) {
	for _, s := range []float64{-0.1, 0.95, 2} {
		_, err := openFS(vfs.NewMem(), "/db", 0o600, &Options{LocalitySlack: s, InitialMmapSize: memMapSize})
		if err == nil || !strings.Contains(err.Error(), "LocalitySlack") {
			t.Errorf("LocalitySlack %v: Open = %v, want an error naming the option", s, err)
		}
	}
}

// TestAutoCompactLeavesTheSlack checks the free part above which
// AutoCompact compacts: its FreeFraction, but never within 0.1 of a
// locality slack, which keeps that much free on purpose.
func TestAutoCompactLeavesTheSlack(t *testing.T) {
	for _, c := range []struct {
		free, slack, want float64
	}{
		{0, 0, 0.25},
		{0.4, 0, 0.4},
		{0, 0.25, 0.35},
		{0.5, 0.25, 0.5},
		{0.2, 0.5, 0.6},
	} {
		if got := autoCompactFraction(AutoCompact{FreeFraction: c.free}, c.slack); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("FreeFraction %v, slack %v: compacts above %v, want %v", c.free, c.slack, got, c.want)
		}
	}
}

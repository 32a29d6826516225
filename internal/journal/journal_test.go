package journal

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/vfs"
)

var seedFlag = flag.Int64("rivet.seed", 0, "seed for randomized tests (0: time-based); printed on every run")

func testRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -rivet.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32|1))
}

const testMaxRecord = 1 << 20

func openFile(t *testing.T, fs vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// readAll reads the journal in f and returns copies of its records.
func readAll(t *testing.T, f vfs.File) ([]Record, Summary) {
	t.Helper()
	var got []Record
	sum, err := Read(f, testMaxRecord, func(r Record) error {
		r.Payload = bytes.Clone(r.Payload)
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if sum.Records != len(got) {
		t.Fatalf("Summary.Records = %d, fn saw %d", sum.Records, len(got))
	}
	return got, sum
}

// randPayload returns a payload of a random size: often small, sometimes
// empty, sometimes large. Its bytes depend on tag so that records differ.
func randPayload(rng *rand.Rand, large int) []byte {
	var n int
	switch r := rng.IntN(10); {
	case r == 0:
		n = 0
	case r < 7:
		n = rng.IntN(300)
	default:
		n = rng.IntN(large + 1)
	}
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// sameRecords fails the test unless got equals want (seq, txid, payload
// with nil and empty alike: the journal stores lengths).
func sameRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Txid != w.Txid || !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("record %d: got seq %d txid %d len %d, want seq %d txid %d len %d",
				i, g.Seq, g.Txid, len(g.Payload), w.Seq, w.Txid, len(w.Payload))
		}
	}
}

// appendBatch appends recs and returns them with the seqs they got.
func appendBatch(t *testing.T, w *Writer, recs []Record) []Record {
	t.Helper()
	seq := w.NextSeq()
	if err := w.Append(recs); err != nil {
		t.Fatalf("Append: %v", err)
	}
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = Record{Seq: seq + uint64(i), Txid: r.Txid, Payload: r.Payload}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	rng := testRand(t)
	f := openFile(t, vfs.NewMem(), "j")
	w, err := NewWriter(f, rng.Uint64(), 1000, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if got, sum := readAll(t, f); len(got) != 0 || !sum.HeaderValid || sum.End != HeaderSize || sum.FirstSeq != 1000 {
		t.Fatalf("empty journal: %d records, %+v", len(got), sum)
	}
	var want []Record
	txid := uint64(7)
	for len(want) < 300 {
		batch := make([]Record, 1+rng.IntN(4))
		for i := range batch {
			// A Seq given by the caller is ignored.
			batch[i] = Record{Seq: rng.Uint64(), Txid: txid, Payload: randPayload(rng, 200<<10)}
			txid++
		}
		want = append(want, appendBatch(t, w, batch)...)
	}
	if err := w.Sync(vfs.SyncData); err != nil {
		t.Fatal(err)
	}
	got, sum := readAll(t, f)
	sameRecords(t, got, want)
	if sum.End != w.End() || sum.FirstSeq != 1000 || w.NextSeq() != 1000+uint64(len(want)) {
		t.Fatalf("summary %+v, writer end %d next seq %d", sum, w.End(), w.NextSeq())
	}
	// The bytes after the last record are the zeros of the growth, or
	// nothing.
	if sum.Stop != "bad magic" && sum.Stop != "end of file" {
		t.Fatalf("Stop = %q after a clean journal", sum.Stop)
	}
}

func TestReadStopsAtBound(t *testing.T) {
	f := openFile(t, vfs.NewMem(), "j")
	w, err := NewWriter(f, 1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendBatch(t, w, []Record{{Txid: 1, Payload: make([]byte, 100)}, {Txid: 2, Payload: make([]byte, 101)}})
	got := 0
	sum, err := Read(f, 100, func(Record) error { got++; return nil })
	if err != nil || got != 1 || sum.Stop != "length" || sum.End != HeaderSize+RecordHeaderSize+100 {
		t.Fatalf("maxRecord 100: %d records, %+v, %v", got, sum, err)
	}
	stop := errors.New("stop")
	sum, err = Read(f, 1000, func(Record) error { return stop })
	if err != stop || sum.Records != 0 || sum.End != HeaderSize {
		t.Fatalf("callback error: %+v, %v", sum, err)
	}
}

func TestReadInvalidHeader(t *testing.T) {
	fs := vfs.NewMem()
	f := openFile(t, fs, "j")
	if _, sum := readAll(t, f); sum.HeaderValid || sum.End != 0 || sum.Stop != "short header" {
		t.Fatalf("empty file: %+v", sum)
	}
	w, err := NewWriter(f, 5, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	appendBatch(t, w, []Record{{Txid: 1, Payload: []byte("x")}})
	for _, c := range []struct {
		off  int64
		stop string
	}{{0, "bad header magic"}, {20, "header checksum"}, {61, "header checksum"}} {
		g := openFile(t, fs, fmt.Sprintf("copy%d", c.off))
		img, _ := fs.ReadFile("j")
		img[c.off] ^= 0x40
		if _, err := g.WriteAt(img, 0); err != nil {
			t.Fatal(err)
		}
		if got, sum := readAll(t, g); len(got) != 0 || sum.HeaderValid || sum.End != 0 || sum.Stop != c.stop {
			t.Fatalf("flip at %d: %d records, %+v", c.off, len(got), sum)
		}
	}
}

func TestRewind(t *testing.T) {
	rng := testRand(t)
	for _, aligned := range []bool{true, false} {
		t.Run(fmt.Sprint("aligned=", aligned), func(t *testing.T) {
			f := openFile(t, vfs.NewMem(), "j")
			w, err := NewWriter(f, 11, 1, 8192)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				appendBatch(t, w, []Record{{Txid: uint64(i), Payload: bytes.Repeat([]byte{byte(i)}, 500)}})
			}
			if err := w.Sync(vfs.SyncData); err != nil {
				t.Fatal(err)
			}
			oldEnd := w.End()
			if err := w.Rewind(22); err != nil {
				t.Fatal(err)
			}
			if w.End() != HeaderSize || w.NextSeq() != 41 {
				t.Fatalf("after Rewind: end %d next seq %d", w.End(), w.NextSeq())
			}
			var want []Record
			for i := range 5 {
				n := 500
				if !aligned {
					n = rng.IntN(400)
				}
				// Same txids and payload bytes as the old records at these
				// places: only the salt and seq tell them apart.
				want = append(want, appendBatch(t, w, []Record{{Txid: uint64(i), Payload: bytes.Repeat([]byte{byte(i)}, n)}})...)
			}
			if err := w.Sync(vfs.SyncData); err != nil {
				t.Fatal(err)
			}
			if w.End() >= oldEnd {
				t.Fatalf("new epoch ends at %d, not before the old one's end %d", w.End(), oldEnd)
			}
			got, sum := readAll(t, f)
			sameRecords(t, got, want)
			if sum.Salt != 22 || sum.FirstSeq != 41 || sum.End != w.End() {
				t.Fatalf("summary %+v, writer end %d", sum, w.End())
			}
			switch sum.Stop {
			case "salt", "seq", "checksum":
			case "bad magic", "reserved", "length", "end of file":
				if aligned {
					t.Fatalf("Stop = %q where an old record starts", sum.Stop)
				}
			default:
				t.Fatalf("Stop = %q", sum.Stop)
			}
			if aligned && sum.Stop != "salt" {
				t.Fatalf("Stop = %q at an old record, want salt", sum.Stop)
			}
		})
	}
}

// TestNewWriterOverOldJournal starts a new epoch in a file that holds an
// older one, as after recovery: none of the old records is read.
func TestNewWriterOverOldJournal(t *testing.T) {
	fs := vfs.NewMem()
	f := openFile(t, fs, "j")
	w, err := NewWriter(f, 1, 1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		appendBatch(t, w, []Record{{Txid: uint64(i), Payload: []byte("old")}})
	}
	size, _ := f.Size()
	w, err = NewWriter(f, 2, 11, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got, sum := readAll(t, f); len(got) != 0 || sum.Stop != "salt" || sum.FirstSeq != 11 {
		t.Fatalf("fresh epoch over an old one: %d records, %+v", len(got), sum)
	}
	want := appendBatch(t, w, []Record{{Txid: 0, Payload: []byte("old")}})
	got, sum := readAll(t, f)
	sameRecords(t, got, want)
	if sum.Stop != "salt" {
		t.Fatalf("Stop = %q, want salt", sum.Stop)
	}
	if s, _ := f.Size(); s != size {
		t.Fatalf("size %d, was %d: a new epoch reuses the file", s, size)
	}
}

func TestGrowth(t *testing.T) {
	rng := testRand(t)
	const chunk = 16 << 10
	cfs := vfs.NewCounting(vfs.NewMem())
	f := openFile(t, cfs, "j")
	w, err := NewWriter(f, 3, 1, chunk)
	if err != nil {
		t.Fatal(err)
	}
	checkSize := func(what string) int64 {
		t.Helper()
		size, err := f.Size()
		if err != nil {
			t.Fatal(err)
		}
		if size%chunk != 0 || size != roundUp(w.End(), chunk) {
			t.Fatalf("%s: size %d, end %d: want the end rounded up to %d", what, size, w.End(), chunk)
		}
		return size
	}
	checkSize("new")
	// oneWrite checks that the append just made was one WriteAt of its
	// records' bytes.
	oneWrite := func(rec Record) {
		t.Helper()
		c := cfs.Snapshot()
		if c.WriteCalls != 1 || c.WriteBytes != int64(RecordHeaderSize+len(rec.Payload)) {
			t.Fatalf("append of a %d-byte payload at end %d: %d writes of %d bytes", len(rec.Payload), w.End(), c.WriteCalls, c.WriteBytes)
		}
	}
	grown := 0
	for i := range 200 {
		before := checkSize(fmt.Sprint("before append ", i))
		cfs.Reset()
		rec := appendBatch(t, w, []Record{{Txid: uint64(i), Payload: randPayload(rng, 3*chunk)}})[0]
		if checkSize(fmt.Sprint("append ", i)) == before {
			oneWrite(rec)
		} else {
			grown++
		}
	}
	if grown < 5 {
		t.Fatalf("the file grew only %d times", grown)
	}
	size := checkSize("before rewind")
	if err := w.Rewind(4); err != nil {
		t.Fatal(err)
	}
	var want []Record
	for w.End()+2000 < size-chunk {
		cfs.Reset()
		want = append(want, appendBatch(t, w, []Record{{Txid: 1, Payload: randPayload(rng, 2000)}})...)
		oneWrite(want[len(want)-1])
		if s, _ := f.Size(); s != size {
			t.Fatalf("an append after Rewind changed the size from %d to %d at end %d", size, s, w.End())
		}
	}
	got, _ := readAll(t, f)
	sameRecords(t, got, want)
}

// TestFailedAppend fails an append whose bytes nevertheless reach the file
// whole, then retries the same transactions: the retried records are read
// and no stale record of the failed write after them.
func TestFailedAppend(t *testing.T) {
	rng := testRand(t)
	for _, c := range []struct {
		name    string
		first   int // records appended before the failure
		failed  int // records in the failed append
		retried int // how many of them the retry appends again
		scrub   bool
	}{
		{"retry-all", 3, 3, 3, false},
		{"retry-one", 3, 3, 1, false},
		{"retry-one-scrubbed", 3, 3, 1, true},
		{"empty-epoch-retry-one", 0, 3, 1, false},
		{"empty-epoch-retry-all", 0, 2, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ffs := vfs.NewFaulty(vfs.NewMem())
			f := openFile(t, ffs, "j")
			w, err := NewWriter(f, rng.Uint64(), 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			var want []Record
			for i := range c.first {
				want = append(want, appendBatch(t, w, []Record{{Txid: uint64(i + 1), Payload: randPayload(rng, 5000)}})...)
			}
			failed := make([]Record, c.failed)
			total := 0
			for i := range failed {
				// Equal lengths, so that a stale record starts exactly
				// where the retried ones end.
				failed[i] = Record{Txid: uint64(c.first + i + 1), Payload: bytes.Repeat([]byte{byte(i)}, 100)}
				total += RecordHeaderSize + 100
			}
			if c.first == 0 {
				total += HeaderSize // the first append of an epoch whose header changes rewrites it too
			}
			end, seq := w.End(), w.NextSeq()
			// The whole write lands, yet it fails; unless scrub, the
			// writer's erasure of the first header fails too.
			ffs.Arm(vfs.Fault{Op: vfs.OpWrite, Nth: 1, ShortWrite: total, Name: "j"})
			if !c.scrub {
				ffs.Arm(vfs.Fault{Op: vfs.OpWrite, Nth: 2, Name: "j"})
			}
			if err := w.Append(failed); err == nil {
				t.Fatal("Append succeeded under a write fault")
			}
			if w.End() != end || w.NextSeq() != seq+uint64(c.failed) {
				t.Fatalf("after a failed Append: end %d (was %d), next seq %d (was %d)", w.End(), end, w.NextSeq(), seq)
			}
			if n := ffs.Injected(); n != 2 && !c.scrub || n != 1 && c.scrub {
				t.Fatalf("%d faults fired", n)
			}
			ffs.Disarm()
			if !c.scrub && c.first > 0 {
				// Nothing has replaced the failed records: their outcome is
				// unknown, and here they are whole, so they are read.
				got, _ := readAll(t, f)
				if len(got) != c.first+c.failed {
					t.Fatalf("before the retry: %d records, want the %d appended and the %d failed", len(got), c.first, c.failed)
				}
			}
			want = append(want, appendBatch(t, w, failed[:c.retried])...)
			if err := w.Sync(vfs.SyncData); err != nil {
				t.Fatal(err)
			}
			got, sum := readAll(t, f)
			sameRecords(t, got, want)
			if sum.End != w.End() {
				t.Fatalf("Summary.End %d, writer end %d", sum.End, w.End())
			}
			if c.retried < c.failed && !c.scrub && sum.Stop != "seq" {
				t.Fatalf("Stop = %q at a stale record, want seq", sum.Stop)
			}
			// Later appends continue the chain.
			want = append(want, appendBatch(t, w, []Record{{Txid: 99, Payload: []byte("later")}})...)
			got, _ = readAll(t, f)
			sameRecords(t, got, want)
		})
	}
}

// TestFailedRewind fails the header write of a Rewind: the next Append
// writes the header again, and the new epoch reads back.
func TestFailedRewind(t *testing.T) {
	for _, viaSync := range []bool{false, true} {
		ffs := vfs.NewFaulty(vfs.NewMem())
		f := openFile(t, ffs, "j")
		w, err := NewWriter(f, 1, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		appendBatch(t, w, []Record{{Txid: 1, Payload: []byte("a")}, {Txid: 2, Payload: []byte("b")}})
		ffs.Arm(vfs.Fault{Op: vfs.OpWrite})
		if err := w.Rewind(2); err == nil {
			t.Fatal("Rewind succeeded under a write fault")
		}
		ffs.Disarm()
		if viaSync {
			if err := w.Sync(vfs.SyncData); err != nil {
				t.Fatal(err)
			}
			if got, sum := readAll(t, f); len(got) != 0 || sum.Salt != 2 || sum.FirstSeq != 3 {
				t.Fatalf("after Sync of a failed Rewind: %d records, %+v", len(got), sum)
			}
		}
		want := appendBatch(t, w, []Record{{Txid: 3, Payload: []byte("c")}})
		got, sum := readAll(t, f)
		sameRecords(t, got, want)
		if sum.Salt != 2 || sum.FirstSeq != 3 {
			t.Fatalf("summary %+v", sum)
		}
	}
}

// TestCrash appends and syncs at random and crashes at random points: the
// crashed journal holds every record a returned Sync covered and after them
// a prefix of the later ones, nothing else.
func TestCrash(t *testing.T) {
	rng := testRand(t)
	rounds, minCrashes := 3000, 600
	if testing.Short() {
		rounds, minCrashes = 600, 100
	}
	fs := vfs.NewCrashable()
	f := openFile(t, fs, "j")
	// The file's name is durable; its bytes are what the test is about.
	if err := fs.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, rng.Uint64(), 1, 8192)
	if err != nil {
		t.Fatal(err)
	}
	var (
		epoch, prevEpoch []Record
		salt, prevSalt   = uint64(0), uint64(0) // salt set below
		durable          = 0                    // records of epoch a returned Sync covers
		headerDurable    = false
		crashes, torn    int
		txid             uint64
	)
	_, sum := readAll(t, f)
	salt = sum.Salt
	for round := 0; round < rounds; round++ {
		switch r := rng.IntN(20); {
		case r < 12:
			batch := make([]Record, 1+rng.IntN(3))
			for i := range batch {
				txid++
				batch[i] = Record{Txid: txid, Payload: randPayload(rng, 3000)}
			}
			epoch = append(epoch, appendBatch(t, w, batch)...)
		case r < 17:
			kind := vfs.SyncData
			if rng.IntN(4) == 0 {
				kind = vfs.SyncBarrier // orders, makes nothing durable
			}
			if err := w.Sync(kind); err != nil {
				t.Fatal(err)
			}
			if kind == vfs.SyncData {
				durable, headerDurable = len(epoch), true
			}
		default:
			// A checkpoint covered everything: flush, then start a new
			// epoch. Until the next Sync a crash may leave either header.
			if err := w.Sync(vfs.SyncData); err != nil {
				t.Fatal(err)
			}
			prevEpoch, prevSalt = epoch, salt
			salt = rng.Uint64()
			if err := w.Rewind(salt); err != nil {
				t.Fatal(err)
			}
			epoch, durable, headerDurable = nil, 0, false
		}
		if rng.IntN(3) != 0 {
			continue
		}
		opts := vfs.CrashOptions{KeepProbability: rng.Float64(), TearProbability: rng.Float64() / 2}
		if opts.TearProbability > 0.05 {
			torn++
		}
		crashed := fs.Crash(rng, opts)
		cf := openFile(t, crashed, "j")
		got, sum := readAll(t, cf)
		crashes++
		switch {
		case !sum.HeaderValid:
			if headerDurable || prevSalt != 0 {
				t.Fatalf("round %d: no valid header after a flushed one: %+v", round, sum)
			}
		case sum.Salt == salt:
			if len(got) < durable || len(got) > len(epoch) {
				t.Fatalf("round %d: read %d records, %d durable of %d appended (%+v)", round, len(got), durable, len(epoch), sum)
			}
			sameRecords(t, got, epoch[:len(got)])
		case sum.Salt == prevSalt && !headerDurable:
			// The new header was lost: the old epoch's records are
			// checkpointed, and a prefix of them may still be there.
			if len(got) > len(prevEpoch) {
				t.Fatalf("round %d: read %d records of an old epoch of %d", round, len(got), len(prevEpoch))
			}
			sameRecords(t, got, prevEpoch[:len(got)])
		default:
			t.Fatalf("round %d: header of salt %d, current %d, previous %d (new header durable: %v)", round, sum.Salt, salt, prevSalt, headerDurable)
		}
	}
	t.Logf("%d rounds, %d crashes (%d with tearing likely), %d records appended", rounds, crashes, torn, txid)
	if crashes < minCrashes {
		t.Fatalf("only %d crash cases ran, want at least %d", crashes, minCrashes)
	}
}

package rivet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime/debug"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// Values of hundreds of MiB (bbolt #931: bbolt 1.3.9 to 1.4 crashed storing
// or reading a value above 256 MiB). They are stored as blob chains of
// 16 MiB extents and returned as copies.

// TestValue300MiB stores a 300 MiB value, the size past bbolt #931's limit
// that CI runs.
func TestValue300MiB(t *testing.T) { largeValueRoundTrip(t, 300<<20) }

// TestOneGiBValue stores a 1 GiB value.
func TestOneGiBValue(t *testing.T) { largeValueRoundTrip(t, 1<<30) }

// largeValueRoundTrip puts a value of size bytes in one transaction, reads
// it back before and after a reopen (bytes compared, Check run at the
// reopen and at the end), checks that Get returns a copy the caller may
// change, then deletes it (Check at the end finds its pages free, none
// leaked).
func largeValueRoundTrip(t *testing.T, size int) {
	if testing.Short() || raceEnabled {
		t.Skipf("%d MiB value: not in -short mode or under the race detector (scripts/test.sh runs it without -race)", size>>20)
	}
	db := openTestDB(t, nil)
	want := largeValue(size)
	key := []byte("large")
	if err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if err := b.Put(key, want); err != nil {
			return err
		}
		// Neighbours on both sides: the value's leaf holds other keys.
		if err := b.Put([]byte("after"), []byte("a")); err != nil {
			return err
		}
		return b.Put([]byte("before"), []byte("b"))
	}); err != nil {
		t.Fatal(err)
	}
	// The commit's write buffers are garbage now: return them, so that
	// the reads below do not add to them.
	debug.FreeOSMemory()
	get := func(when string) {
		t.Helper()
		if err := db.View(func(tx *Tx) error {
			got := tx.Bucket([]byte("b")).Get(key)
			if !bytes.Equal(got, want) {
				return errors.New("value differs")
			}
			// A copy: changing it changes neither the file nor the
			// next Get's result. The first copy is collected and its
			// memory returned before the second is made, so the test
			// holds at most the value, one copy and the mapped file.
			got[0] ^= 0xff
			got = nil
			debug.FreeOSMemory()
			if again := tx.Bucket([]byte("b")).Get(key); !bytes.Equal(again, want) {
				return errors.New("changing the returned value changed the stored one")
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %d MiB value: %v", when, size>>20, err)
		}
		debug.FreeOSMemory()
	}
	get("after commit")
	db.reopen()
	get("after reopen")
	if err := db.Update(func(tx *Tx) error { return tx.Bucket([]byte("b")).Delete(key) }); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *Tx) error {
		if v := tx.Bucket([]byte("b")).Get(key); v != nil {
			return errors.New("deleted value still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// largeValue returns size bytes that differ at every 8-byte word (a
// xorshift stream), so a misplaced extent or page cannot compare equal.
func largeValue(size int) []byte {
	v := make([]byte, size)
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i+8 <= size; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(v[i:], x)
	}
	return v
}

// TestValueTooLarge: a value above MaxValueSize is refused with bbolt's
// error before anything is written. The value is never read, so the slice
// need not be backed by memory the test touches.
func TestValueTooLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocates a 2 GiB slice: not in -short mode or under the race detector")
	}
	db := openTestDB(t, nil)
	err := db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), make([]byte, MaxValueSize+1))
	})
	if !errors.Is(err, rerrors.ErrValueTooLarge) {
		t.Fatalf("Put of MaxValueSize+1 bytes: %v, want ErrValueTooLarge", err)
	}
}

package rivet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/page"
)

// fuzzOpenBase is the valid file FuzzOpen damages: built once per process.
var fuzzOpenBase struct {
	once sync.Once
	img  []byte
	err  error
}

// fuzzOpenImage builds a small database with several commits (so pages carry
// different txids), nested buckets and blob values (> page/4), closes it and
// returns its bytes.
func fuzzOpenImage(tb testing.TB) []byte {
	b := &fuzzOpenBase
	b.once.Do(func() {
		path := filepath.Join(tb.TempDir(), "base.db")
		db, err := Open(path, 0o600, &Options{PageSize: hostilePS})
		if err != nil {
			b.err = err
			return
		}
		for c := 0; c < 4 && err == nil; c++ {
			err = db.Update(func(tx *Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprintf("bucket%d", c%2)))
				if err != nil {
					return err
				}
				for i := 0; i < 60; i++ {
					if err := bk.Put([]byte(fmt.Sprintf("k%d-%03d", c, i)), []byte(fmt.Sprintf("v%d", i*c))); err != nil {
						return err
					}
				}
				if err := bk.Put([]byte(fmt.Sprintf("blob%d", c)), make([]byte, 300+c*500)); err != nil {
					return err
				}
				in, err := bk.CreateBucketIfNotExists([]byte("inner"))
				if err != nil {
					return err
				}
				deeper, err := in.CreateBucketIfNotExists([]byte("deeper"))
				if err != nil {
					return err
				}
				if err := deeper.Put([]byte(fmt.Sprintf("d%d", c)), []byte("x")); err != nil {
					return err
				}
				if c == 3 {
					return bk.Delete([]byte("k1-010"))
				}
				return in.Put([]byte(fmt.Sprintf("i%d", c)), make([]byte, 200))
			})
		}
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			b.img, err = os.ReadFile(path)
		}
		b.err = err
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.img
}

// fuzzMutate applies a mutation descriptor to a copy of img. The descriptor
// is a list of 6-byte edits: op, a 24-bit position and a 16-bit argument.
func fuzzMutate(img, desc []byte) []byte {
	out := append([]byte(nil), img...)
	ps := hostilePS
	for len(desc) >= 6 && len(out) > 0 {
		op, arg := desc[0], binary.LittleEndian.Uint16(desc[4:])
		pos := int(uint32(desc[1]) | uint32(desc[2])<<8 | uint32(desc[3])<<16)
		desc = desc[6:]
		pages := (len(out) + ps - 1) / ps
		off := pos % len(out)
		pg := pos % pages
		pgEnd := min((pg+1)*ps, len(out))
		switch op % 9 {
		case 0: // flip a bit
			out[off] ^= 1 << (arg % 8)
		case 1: // set a byte
			out[off] = byte(arg)
		case 2: // zero a page
			clear(out[pg*ps : pgEnd])
		case 3: // copy page arg over page pos
			src := int(arg) % pages
			copy(out[pg*ps:pgEnd], out[src*ps:min((src+1)*ps, len(out))])
		case 4: // truncate to pos bytes (at least one byte remains)
			out = out[:max(1, off)]
		case 5: // a huge count into a page header (count or overflow field)
			field := 4
			if arg&1 != 0 {
				field = 24
			}
			if pg*ps+field+4 <= len(out) {
				binary.LittleEndian.PutUint32(out[pg*ps+field:], 0xffffff00|uint32(arg>>8))
			}
		case 6: // a small u32 (page ids, txids, lengths)
			if off+4 <= len(out) {
				binary.LittleEndian.PutUint32(out[off:], uint32(arg))
			}
		case 7: // a large u64 (lengths, page ids)
			if off+8 <= len(out) {
				binary.LittleEndian.PutUint64(out[off:], uint64(arg)<<48|uint64(arg))
			}
		case 8: // re-seal both metas' checksums, so edits to them are read
			for id := 0; id < 2 && (id+1)*ps <= len(out); id++ {
				m := out[id*ps : (id+1)*ps]
				end := 128 + 2*page.BitmapLen(uint64(binary.LittleEndian.Uint32(m[64:])))
				if end <= ps {
					binary.LittleEndian.PutUint32(m[12:], page.ChecksumSkipping(m[:end], 12))
				}
			}
		}
	}
	return out
}

// fuzzOpenOnce writes img to path, opens it (read-only or read-write), walks
// everything, drains Check and, when writable, commits a change. It returns
// the unexpected errors: anything from View, Check or Update that is not one
// of the corruption classes.
func fuzzOpenOnce(path string, img []byte, readOnly bool) (bad []string) {
	if err := os.WriteFile(path, img, 0o600); err != nil {
		return []string{err.Error()}
	}
	db, err := Open(path, 0o600, &Options{ReadOnly: readOnly, Timeout: time.Second})
	if err != nil {
		return nil // any error is an acceptable answer to a damaged file
	}
	defer db.Close()
	expect := func(what string, err error) {
		if err != nil && !classified(err) {
			bad = append(bad, fmt.Sprintf("%s (read-only %t): %v (%T)", what, readOnly, err, err))
		}
	}
	var bounded bool
	expect("View", db.View(func(tx *Tx) error {
		// BUG(bucket-nesting-cycle): a bucket record pointing at its own
		// leaf nests forever; the walk stops at 100 levels instead of
		// failing on it until the library bounds nesting.
		_, bounded = walkAll(tx, 100000, 100)
		return nil
	}))
	if !bounded {
		// BUG(cursor-dag, bucket-nesting-cycle): see TestHostileBranchDAG and
		// TestHostileBucketRecordCycle. Not reachable from small edits of
		// this image so far; reported rather than skipped if it happens.
		bad = append(bad, fmt.Sprintf("walk did not end within 100000 steps / 100 nesting levels (read-only %t)", readOnly))
	}
	expect("Check", db.View(func(tx *Tx) error {
		n := 0
		for err := range tx.Check() {
			if n++; !classified(err) {
				bad = append(bad, fmt.Sprintf("Check: %v (%T)", err, err))
			}
		}
		if n > 100000 {
			bad = append(bad, fmt.Sprintf("Check reported %d problems", n))
		}
		return nil
	}))
	if !readOnly {
		// A flipped bit in a key or a flag (not checksummed on the read
		// path) can legitimately make a bucket disappear or turn into a
		// value: those answers are fine.
		semantic := func(err error) error {
			if errors.Is(err, ErrBucketNotFound) || errors.Is(err, ErrIncompatibleValue) || errors.Is(err, ErrBucketExists) {
				return nil
			}
			return err
		}
		expect("Update", semantic(db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("bucket0"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k0-005"), []byte("new")); err != nil {
				return err
			}
			if err := b.Delete([]byte("k0-007")); err != nil {
				return err
			}
			return tx.DeleteBucket([]byte("bucket1"))
		})))
	}
	return bad
}

// FuzzOpen damages a real database file with fuzzer-chosen edits (bit flips,
// zeroed pages, pages copied over others, truncation, huge counts, re-sealed
// metas) and opens it read-only and read-write. Nothing may panic or hang;
// every error from View, Check and Update must be a corruption class
// (ErrCorrupt, ErrInvalid, ErrVersionMismatch, ErrChecksum).
func FuzzOpen(f *testing.F) {
	img := fuzzOpenImage(f)
	dir := f.TempDir()
	pages := len(img) / hostilePS
	f.Add([]byte{})
	f.Add([]byte{0, 0x10, 0x10, 0, 3, 0})                                    // a bit in a data page
	f.Add([]byte{2, 0, 0, 0, 0, 0})                                          // zero meta 0
	f.Add([]byte{3, byte(pages - 1), 0, 0, byte(pages - 2), 0})              // copy a page over the last
	f.Add([]byte{4, 0, 0x40, 0, 0, 0})                                       // truncate
	f.Add([]byte{5, byte(pages - 1), 0, 0, 0, 0x10})                         // huge count in the last page
	f.Add([]byte{6, 40, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0})                       // meta 0 root := 7, re-sealed
	f.Add([]byte{7, 32, 4, 0, 1, 0, 8, 0, 0, 0, 0, 0})                       // meta 1 HWM huge, re-sealed
	f.Add([]byte{1, 4, 0, 0, 2, 0, 8, 0, 0, 0, 0, 0})                        // meta version 2
	f.Add([]byte{2, 2, 0, 0, 0, 0, 2, 3, 0, 0, 0, 0})                        // zero both map slots
	f.Add([]byte{3, byte(pages - 2), 0, 0, 4, 0, 0, 0x33, 0x20, 0, 0x81, 0}) // copy + flip
	f.Fuzz(func(t *testing.T, desc []byte) {
		damaged := fuzzMutate(img, desc)
		path := filepath.Join(dir, "fuzz.db")
		done := make(chan []string, 1)
		go func() {
			bad := fuzzOpenOnce(path, damaged, true)
			bad = append(bad, fuzzOpenOnce(path, damaged, false)...)
			done <- bad
		}()
		select {
		case bad := <-done:
			for _, b := range bad {
				t.Error(b)
			}
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("open/walk/check did not finish in 10s:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})
}

// The image FuzzOpen starts from is valid and has what the fuzzer needs to
// damage: blobs, nested buckets, several txids.
func TestFuzzOpenImageIsValid(t *testing.T) {
	img := fuzzOpenImage(t)
	path := filepath.Join(t.TempDir(), "valid.db")
	for _, ro := range []bool{true, false} {
		if bad := fuzzOpenOnce(path, img, ro); len(bad) > 0 {
			t.Fatal(bad)
		}
	}
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		d := tx.Bucket([]byte("bucket1")).Bucket([]byte("inner")).Bucket([]byte("deeper"))
		if d == nil || d.Get([]byte("d3")) == nil {
			return errors.New("nested bucket bucket1/inner/deeper missing d3")
		}
		if v := tx.Bucket([]byte("bucket1")).Get([]byte("blob3")); len(v) != 1800 {
			return fmt.Errorf("blob3: %d bytes", len(v))
		}
		if tx.ID() < 5 {
			return fmt.Errorf("only %d txns", tx.ID())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

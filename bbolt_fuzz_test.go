package rivet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/vfs"
)

// fuzzBoltImage is the bbolt file FuzzOpenBbolt damages: bbolt's own, of
// 1 KiB pages (hostilePS, which fuzzMutate's page edits use), with nested
// and empty buckets, values spanning overflow pages, a freelist, branch
// pages; cut to its high-water mark.
func fuzzBoltImage(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("internal", "boltfile", "testdata", "mixed-1k.bbolt"))
	if err != nil {
		tb.Fatal(err)
	}
	ms, err := boltfile.ReadMetas(bytes.NewReader(b), int64(len(b)))
	if err != nil || ms.Meta.PageSize != hostilePS {
		tb.Fatalf("fuzz image: %+v, %v", ms.Meta, err)
	}
	return b[:ms.Meta.HWM*hostilePS]
}

// resealBolt recomputes both bbolt metas' checksums, so that fuzzer edits
// to a meta's fields are read rather than refused by the checksum.
func resealBolt(img []byte) {
	for slot := 0; slot < 2 && (slot+1)*hostilePS <= len(img); slot++ {
		m := img[slot*hostilePS+boltfile.HeaderSize:]
		h := fnv.New64a()
		h.Write(m[:56])
		binary.LittleEndian.PutUint64(m[56:], h.Sum64())
	}
}

// fuzzBoltOnce opens img read-only and walks all of it (within a budget),
// checks it, copies it, then converts it at Open. It returns what went
// wrong: an error of the read path that is not a corruption class, a
// failed conversion that left anything behind or changed the bbolt file,
// or a conversion that produced a file that fails Check.
func fuzzBoltOnce(img []byte) (bad []string) {
	const path = "/d/f.db"
	fs := vfs.NewMem()
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return []string{err.Error()}
	}
	_, _ = f.WriteAt(img, 0)
	_ = f.Close()
	expect := func(what string, err error) {
		if err != nil && !classified(err) {
			bad = append(bad, fmt.Sprintf("%s: %v (%T)", what, err, err))
		}
	}
	db, err := openFS(fs, path, 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
	if err == nil {
		expect("View", db.View(func(tx *Tx) error {
			walkAll(tx, 100000, 100)
			return tx.ForEach(func(_ []byte, b *Bucket) error {
				b.Stats()
				return nil
			})
		}))
		expect("Check", db.View(func(tx *Tx) error {
			for err := range tx.Check() {
				expect("Check", err)
			}
			return nil
		}))
		expect("WriteTo", db.View(func(tx *Tx) error {
			_, err := tx.WriteTo(io.Discard)
			return err
		}))
		_ = db.Close()
	} else {
		expect("Open", err)
	}
	db, err = openFS(fs, path, 0o600, &Options{ConvertBbolt: true, InitialMmapSize: memMapSize})
	if err != nil {
		if now, _ := readFS(fs, path); !bytes.Equal(now, img) && isBoltImage(img) {
			bad = append(bad, fmt.Sprintf("a failed conversion (%v) changed the bbolt file", err))
		}
		for _, name := range []string{path + convertingSuffix, path + BboltBackupSuffix + partialSuffix} {
			if b, _ := readFS(fs, name); b != nil {
				bad = append(bad, fmt.Sprintf("a failed conversion (%v) left %s", err, name))
			}
		}
		return bad
	}
	expect("View after conversion", db.View(func(tx *Tx) error {
		for err := range tx.Check() {
			bad = append(bad, fmt.Sprintf("a converted file fails Check: %v", err))
		}
		return nil
	}))
	_ = db.Close()
	return bad
}

// isBoltImage reports whether img is a file Open would take for bbolt's.
func isBoltImage(img []byte) bool {
	_, err := boltfile.ReadMetas(bytes.NewReader(img), int64(len(img)))
	return err == nil
}

// FuzzOpenBbolt damages a real bbolt file with fuzzer-chosen edits
// (fuzzMutate's: bit flips, zeroed and copied pages, truncation, huge
// counts; a descriptor whose first byte is 0x80 or more also re-seals
// bbolt's meta checksums: 0x84 is a re-sealed u32 edit) and reads it read-only through rivet's whole API, checks
// it, copies it and converts it. Nothing may panic or hang; read errors
// must be corruption classes; a conversion either fails leaving the bbolt
// file as it was and nothing beside it, or makes a file that passes Check.
func FuzzOpenBbolt(f *testing.F) {
	img := fuzzBoltImage(f)
	pages := len(img) / hostilePS
	f.Add([]byte{})
	f.Add([]byte{0, 0x10, 0x10, 0, 3, 0})                       // a bit in a data page
	f.Add([]byte{2, 0, 0, 0, 0, 0})                             // zero meta 0
	f.Add([]byte{3, byte(pages - 1), 0, 0, byte(pages - 2), 0}) // copy a page over the last
	f.Add([]byte{4, 0, 0x40, 0, 0, 0})                          // truncate
	f.Add([]byte{5, byte(pages - 1), 0, 0, 0, 0x10})            // huge count in the last page
	f.Add([]byte{0x84, 0x20, 0, 0, 7, 0})                       // meta 0's root := 7, re-sealed
	f.Add([]byte{0x84, 0x38, 4, 0, 0xff, 0xff})                 // meta 1's HWM huge, re-sealed
	f.Fuzz(func(t *testing.T, desc []byte) {
		damaged := fuzzMutate(img, desc)
		if len(desc) > 0 && desc[0] >= 0x80 {
			resealBolt(damaged)
		}
		done := make(chan []string, 1)
		go func() { done <- fuzzBoltOnce(damaged) }()
		select {
		case bad := <-done:
			for _, b := range bad {
				t.Error(b)
			}
		case <-time.After(20 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("read/check/convert did not finish in 20s:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})
}

// TestConvertRefusesSharedPages: a bbolt file whose branch page points at
// itself, or whose branch elements all point at one child, is refused by
// a conversion (corruption), before anything is copied.
func TestConvertRefusesSharedPages(t *testing.T) {
	img := fuzzBoltImage(t)
	ms, _ := boltfile.ReadMetas(bytes.NewReader(img), int64(len(img)))
	bf, err := boltfile.New(img, ms.Meta)
	if err != nil {
		t.Fatal(err)
	}
	branch, child := findBranch(t, bf)
	for _, dag := range []bool{false, true} {
		damaged := bytes.Clone(img)
		p, _ := bf.Node(branch)
		for i := 0; i < p.Count(); i++ {
			e := damaged[branch*hostilePS+boltfile.HeaderSize+uint64(16*i):]
			switch {
			case dag:
				binary.LittleEndian.PutUint64(e[8:], child)
			case i == 0:
				binary.LittleEndian.PutUint64(e[8:], branch)
			}
		}
		const path = "/d/f.db"
		fs := vfs.NewMem()
		writeMem(t, fs, path, damaged)
		_, err := openFS(fs, path, 0o600, &Options{ConvertBbolt: true, InitialMmapSize: memMapSize})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("dag %t: %v, want ErrCorrupt", dag, err)
		}
		assertUntouched(t, fs, path, damaged)
		// Read-only, the API's walks end on it too.
		db, err := openFS(fs, path, 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.View(func(tx *Tx) error {
			if _, bounded := walkAll(tx, 100000, 100); !bounded {
				return errors.New("the walk did not end")
			}
			n := 0
			for range tx.Check() {
				n++
			}
			if n == 0 {
				return errors.New("Check found nothing")
			}
			return nil
		}); err != nil && !classified(err) {
			t.Fatalf("dag %t: %v", dag, err)
		}
		_ = db.Close()
	}
}

// findBranch returns a branch page the tree reaches and its first child.
func findBranch(t *testing.T, f *boltfile.File) (id, child uint64) {
	t.Helper()
	var find func(pid uint64, depth int) bool
	find = func(pid uint64, depth int) bool {
		p, err := f.Node(pid)
		if err != nil || depth > 10 {
			return false
		}
		if !p.IsLeaf() {
			_, c, _ := p.BranchElem(0)
			id, child = pid, c
			return true
		}
		for i := 0; i < p.Count(); i++ {
			if bucket, _, v, _ := p.LeafElem(i); bucket {
				if b, err := f.DecodeBucket(pid, v); err == nil && b.Root != 0 && find(b.Root, depth+1) {
					return true
				}
			}
		}
		return false
	}
	if !find(f.Meta().Root, 0) {
		t.Fatal("no branch page reachable")
	}
	return id, child
}

// boltDAG builds a bbolt file (1 KiB pages) whose bucket "b" is a tree of
// levels branch pages, each with fanout elements all pointing at the next
// one, over one leaf: fanout^levels paths through levels+1 pages, none of
// them cycles. Unfolded, no walk would end.
func boltDAG(levels, fanout int) []byte {
	const ps = 1024
	const first = 4 // page 2: the freelist, 3: the root bucket's leaf
	hwm := uint64(first + levels + 1)
	img := make([]byte, hwm*ps)
	le := binary.LittleEndian
	header := func(id uint64, flags uint16, count int) []byte {
		p := img[id*ps : (id+1)*ps]
		le.PutUint64(p[0:], id)
		le.PutUint16(p[8:], flags)
		le.PutUint16(p[10:], uint16(count))
		return p
	}
	for slot := 0; slot < 2; slot++ {
		boltfile.EncodeMeta(img[slot*ps:], boltfile.Meta{PageSize: ps, Root: 3, Freelist: 2, HWM: hwm, Txid: uint64(slot + 1)}, slot)
	}
	header(2, 0x10, 0)
	// The root bucket: one bucket element "b" whose root is page first.
	p := header(3, 0x02, 1)
	le.PutUint32(p[16:], 1)     // bucket flag
	le.PutUint32(p[20:], 16)    // key at element + 16
	le.PutUint32(p[24:], 1)     // key length
	le.PutUint32(p[28:], 16)    // value length: a bucket header
	copy(p[32:], "b")           // key
	le.PutUint64(p[33:], first) // bucket root
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%03d", i)) }
	for l := 0; l < levels; l++ {
		id := uint64(first + l)
		p := header(id, 0x01, fanout)
		data := 16 + 16*fanout
		for i := 0; i < fanout; i++ {
			e := p[16+16*i:]
			le.PutUint32(e[0:], uint32(data-(16+16*i)))
			le.PutUint32(e[4:], 4)
			le.PutUint64(e[8:], id+1)
			data += copy(p[data:], key(i))
		}
	}
	p = header(hwm-1, 0x02, fanout)
	data := 16 + 16*fanout
	for i := 0; i < fanout; i++ {
		e := p[16+16*i:]
		le.PutUint32(e[4:], uint32(data-(16+16*i)))
		le.PutUint32(e[8:], 4)
		le.PutUint32(e[12:], 1)
		data += copy(p[data:], key(i))
		data += copy(p[data:], "v")
	}
	return img
}

// TestBboltDeepDAG: a bbolt file with 40^6 paths through 7 pages reads,
// checks and refuses conversion in time bounded by its pages: the cursor's
// edge-key rule ends a walk at the second entry into the leaf, Check and
// the conversion's walk enter each page once.
func TestBboltDeepDAG(t *testing.T) {
	img := boltDAG(6, 40)
	const path = "/d/dag.db"
	fs := vfs.NewMem()
	writeMem(t, fs, path, img)
	db, err := openFS(fs, path, 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		steps, bounded := walkAll(tx, 100000, 100)
		if !bounded || steps > 1000 {
			return fmt.Errorf("the walk took %d steps (bounded %t)", steps, bounded)
		}
		problems := 0
		for err := range tx.Check() {
			if !errors.Is(err, ErrCorrupt) {
				return fmt.Errorf("Check: %v", err)
			}
			problems++
		}
		// At most two per element (out of order, reached twice), not per
		// path.
		if problems == 0 || problems > 2*7*40 {
			return fmt.Errorf("Check reported %d problems on a file of 7 tree pages of 40 elements", problems)
		}
		t.Logf("walk: %d steps; Check: %d problems", steps, problems)
		return nil
	})
	if err != nil && !classified(err) {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := openFS(fs, path, 0o600, &Options{ConvertBbolt: true, InitialMmapSize: memMapSize}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("converting: %v, want ErrCorrupt", err)
	}
	assertUntouched(t, fs, path, img)
}

package rivet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/testing/hostile"
)

// Hostile files: each test builds a small valid database, damages one
// specific thing the way a broken disk or a malicious file would, and checks
// that Open, a View walk and Check report it as a typed error (naming the
// page) instead of panicking, hanging or allocating without bound.

// hostilePS is the page size of the hostile databases: small, so a bucket of
// a couple of hundred keys is a branch over several leaves.
const hostilePS = 1024

// hostileBlob is the length of the hostile file's blob value: past the
// eight-page inline limit, so it is stored out of line.
const hostileBlob = 8*hostilePS + 600

// hostileDB builds the database the hostile tests damage:
//
//   - txn 2: bucket "b" (hostileKeys keys, a branch root) with a blob value "blob"
//     and a nested bucket "inner" holding a key and a 300-byte value (a
//     root page of its own), and a nested bucket "tiny" with three keys (an
//     inline bucket, stored in b's leaf);
//   - txn 3: bucket "z" with one 350-byte value (a root page of its own). Nothing else changes, so every page of
//     "b" is older than the newest meta's steady txid and recovery at Open
//     does not read it: damage there is met by reads and by Check.
//
// It returns the file's path and bytes.
func hostileDB(t testing.TB) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hostile.db")
	// Without the journal each Update is a sync point of the file, as
	// the layout above says.
	db, err := Open(path, 0o600, &Options{PageSize: hostilePS, NoJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		// In descending order: leaves split at half a page, as bbolt's
		// do, so the bucket has the node pages the tests forge with (an
		// ascending load packs its leaves full).
		for i := hostileKeys - 1; i >= 0; i-- {
			if err := b.Put(hkey(i), []byte(fmt.Sprintf("value-%d", i))); err != nil {
				return err
			}
		}
		if err := b.Put([]byte("blob"), bytes.Repeat([]byte("L"), hostileBlob)); err != nil {
			return err
		}
		in, err := b.CreateBucket([]byte("inner"))
		if err != nil {
			return err
		}
		if err := in.Put([]byte("ik"), []byte("iv")); err != nil {
			return err
		}
		// Past the inline limit: "inner" has a root page of its own.
		if err := in.Put([]byte("pad"), bytes.Repeat([]byte("p"), 300)); err != nil {
			return err
		}
		tiny, err := b.CreateBucket([]byte("tiny"))
		if err != nil {
			return err
		}
		for _, k := range []string{"t1", "t2", "t3"} {
			if err := tiny.Put([]byte(k), []byte("v-"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		z, err := tx.CreateBucket([]byte("z"))
		if err != nil {
			return err
		}
		// Over a quarter page, so "z" has a root page of its own
		// rather than being inline.
		return z.Put([]byte("last"), bytes.Repeat([]byte("commit "), 50))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The image is taken before Close, as a process killed after its last
	// commit leaves it: the newest meta's sync point is still to be
	// verified at Open (a clean Close would add a meta that needs none).
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, img
}

// hostileKeys is the number of keys in bucket "b": enough for dozens of
// leaves at 1 KiB pages.
const hostileKeys = 800

func hkey(i int) []byte { return []byte(fmt.Sprintf("key%04d", i)) }

// himg is a database image with helpers to find and re-seal pages.
type himg struct {
	t   testing.TB
	b   []byte
	ps  int
	mid int // the newest meta's slot
}

func newHimg(t testing.TB, b []byte) *himg {
	h := &himg{t: t, b: b, ps: hostilePS}
	m0, err0 := page.DecodeMeta(0, b[:h.ps])
	m1, err1 := page.DecodeMeta(1, b[h.ps:2*h.ps])
	if err0 != nil || err1 != nil {
		t.Fatalf("metas: %v, %v", err0, err1)
	}
	if m1.Txid > m0.Txid {
		h.mid = 1
	}
	return h
}

func (h *himg) meta() *page.Meta {
	m, err := page.DecodeMeta(page.ID(h.mid), h.b[h.mid*h.ps:(h.mid+1)*h.ps])
	if err != nil {
		h.t.Fatalf("meta %d: %v", h.mid, err)
	}
	return m
}

func (h *himg) pg(id page.ID) []byte { return h.b[int(id)*h.ps : int(id+1)*h.ps] }

func (h *himg) node(id page.ID) page.Node {
	n, err := page.ReadNode(h.b, h.ps, id, 0, uint64(len(h.b)/h.ps))
	if err != nil {
		h.t.Fatalf("node %d: %v", id, err)
	}
	return n
}

// leafValue returns the flags, value and the value's byte offset inside
// the page of the leaf element with key.
func (h *himg) leafValue(id page.ID, key string) (uint32, []byte, int) {
	n := h.node(id)
	for i := 0; i < n.Count(); i++ {
		f, k, v, err := n.LeafElem(i)
		if err == nil && string(k) == key {
			off := int(binary.LittleEndian.Uint32(h.pg(id)[page.HeaderSize+i*page.LeafElemSize+4:])) + len(k)
			return f, v, off
		}
	}
	h.t.Fatalf("key %q not in leaf %d", key, id)
	return 0, nil, 0
}

// bucketRoot returns the root page of bucket name in the root bucket.
func (h *himg) bucketRoot(name string) page.ID {
	_, v, _ := h.leafValue(h.meta().Root.ID, name)
	rec, err := page.DecodeBucketRecord(0, v)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec.Root.ID
}

// pathTo returns the pages from the meta's root down to the leaf of bucket
// name's tree that holds key: the path reseal needs.
func (h *himg) pathTo(bucket, key string) []page.ID {
	path := []page.ID{h.meta().Root.ID}
	id := h.bucketRoot(bucket)
	for {
		path = append(path, id)
		n := h.node(id)
		if n.IsLeaf() {
			return path
		}
		next := n.BranchChild(0).ID
		for i := 0; i < n.Count(); i++ {
			if k, _ := n.BranchKey(i); string(k) <= key {
				next = n.BranchChild(i).ID
			}
		}
		id = next
	}
}

// runPages returns a run's length from its header, 1 if the header is not
// sane any more (the hostile edit may have destroyed it).
func (h *himg) runPages(id page.ID) uint64 {
	hd, err := page.ReadHeader(id, h.pg(id))
	if err != nil || hd.Pages() > uint64(len(h.b)/h.ps)-id {
		return 1
	}
	return hd.Pages()
}

func (h *himg) crc(id page.ID) uint32 {
	return page.Checksum(h.b[int(id)*h.ps : int(id+h.runPages(id))*h.ps])
}

// reseal recomputes the checksums recorded for the last page of path in
// each of its ancestors, bottom-up, then the newest meta's root checksum and
// its own checksum: after a hostile edit, only the edit itself is wrong.
// path starts at the root bucket's root page; each next page is a branch
// child, a bucket root or a blob's first extent of the one before.
func (h *himg) reseal(path ...page.ID) {
	le := binary.LittleEndian
	for i := len(path) - 1; i > 0; i-- {
		parent, child := h.pg(path[i-1]), path[i]
		sum := h.crc(child)
		hd, _ := page.ReadHeader(path[i-1], parent)
		found := false
		for e := 0; e < int(hd.Count) && !found; e++ {
			if hd.Type == page.TypeBranch {
				el := parent[page.HeaderSize+e*page.BranchElemSize:]
				if le.Uint64(el) == child {
					le.PutUint32(el[16:], sum)
					found = true
				}
				continue
			}
			el := parent[page.HeaderSize+e*page.LeafElemSize:]
			flags, vo := le.Uint32(el), int(le.Uint32(el[4:])+le.Uint32(el[8:]))
			switch {
			case flags == page.FlagBucket && le.Uint64(parent[vo:]) == child:
				le.PutUint32(parent[vo+16:], sum)
				found = true
			case flags == page.FlagBlob && le.Uint64(parent[vo+8:]) == child:
				le.PutUint32(parent[vo+24:], sum)
				found = true
			}
		}
		if !found {
			h.t.Fatalf("reseal: page %d does not reference %d", path[i-1], child)
		}
	}
	m := h.meta()
	m.Root.Checksum = h.crc(m.Root.ID)
	page.EncodeMeta(h.pg(page.ID(h.mid)), m)
}

func (h *himg) write(path string) {
	if err := os.WriteFile(path, h.b, 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// classified reports whether err is one of the error classes bad bytes may
// produce.
func classified(err error) bool {
	return errors.Is(err, rerrors.ErrCorrupt) || errors.Is(err, rerrors.ErrInvalid) ||
		errors.Is(err, rerrors.ErrVersionMismatch) || errors.Is(err, rerrors.ErrChecksum)
}

// walkAll visits every bucket recursively: First/Next and Last/Prev over
// each, Get of every key, Seek of a few. It returns the number of steps it
// took; it gives up (and reports false) past maxSteps or maxNest levels.
func walkAll(tx *Tx, maxSteps, maxNest int) (steps int, bounded bool) {
	var walk func(b *Bucket, depth int) bool
	walk = func(b *Bucket, depth int) bool {
		if depth > maxNest {
			return false
		}
		var kids [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if steps++; steps > maxSteps {
				return false
			}
			if v == nil && b.Bucket(k) != nil {
				kids = append(kids, bytes.Clone(k))
			}
			b.Get(k)
		}
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if steps++; steps > maxSteps {
				return false
			}
		}
		for _, s := range []string{"", "key0100", "blob", "zzzz"} {
			c.Seek([]byte(s))
			c.Next()
			steps++
		}
		for _, k := range kids {
			if c := b.Bucket(k); c != nil && !walk(c, depth+1) {
				return false
			}
		}
		return true
	}
	var kids [][]byte
	c := tx.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if steps++; steps > maxSteps {
			return steps, false
		}
		kids = append(kids, bytes.Clone(k))
	}
	for _, k := range kids {
		if b := tx.Bucket(k); b != nil && !walk(b, 1) {
			return steps, false
		}
	}
	return steps, true
}

// hostileResult is what opening and reading a damaged file produced.
type hostileResult struct {
	openErr  error
	viewErr  error
	checkErr []error
	bounded  bool
	statsErr error
}

// openHostile opens path read-only, walks everything and runs Check, all
// within a deadline so a hang fails the test instead of the run.
func openHostile(t *testing.T, path string) hostileResult {
	t.Helper()
	done := make(chan hostileResult, 1)
	go func() {
		var r hostileResult
		db, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			r.openErr = err
			done <- r
			return
		}
		defer db.Close()
		r.viewErr = db.View(func(tx *Tx) error {
			_, r.bounded = walkAll(tx, 100000, 100)
			return nil
		})
		_ = db.View(func(tx *Tx) error {
			for err := range tx.Check() {
				r.checkErr = append(r.checkErr, err)
			}
			return nil
		})
		// Bucket.Stats walks every tree too; it must stay bounded (the
		// 20 s limit below) and report, not panic.
		r.statsErr = db.View(func(tx *Tx) error {
			return tx.ForEach(func(_ []byte, b *Bucket) error {
				_ = b.Stats()
				return nil
			})
		})
		done <- r
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("opening, walking and checking %s did not finish in 20s", path)
		return hostileResult{}
	}
}

// wantDetected checks that the walk stayed bounded and failed with
// ErrCorrupt, and that Check reported a CorruptError naming page id.
func wantDetected(t *testing.T, r hostileResult, id page.ID) {
	t.Helper()
	if r.openErr != nil {
		t.Fatalf("open: %v", r.openErr)
	}
	if !r.bounded {
		t.Fatalf("walk did not end within its bounds (view error %v)", r.viewErr)
	}
	if !errors.Is(r.viewErr, rerrors.ErrCorrupt) {
		t.Fatalf("View walk returned %v, want ErrCorrupt", r.viewErr)
	}
	wantCheckNames(t, r.checkErr, id)
}

func wantCheckNames(t *testing.T, errs []error, id page.ID) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("Check found nothing wrong")
	}
	named := false
	for _, err := range errs {
		if !errors.Is(err, rerrors.ErrCorrupt) {
			t.Errorf("Check error %v is not ErrCorrupt", err)
		}
		var ce *rerrors.CorruptError
		if errors.As(err, &ce) && ce.Page == id && strings.Contains(err.Error(), " "+strconv.FormatUint(id, 10)+":") {
			named = true
		}
	}
	if !named {
		t.Fatalf("no Check error names page %d: %v", id, errs)
	}
}

// The baseline: the undamaged file is clean, so every test below fails for
// its damage alone.
func TestHostileBaselineIsClean(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	br := h.bucketRoot("b")
	if h.node(br).IsLeaf() {
		t.Fatalf("bucket b's root %d is a leaf; the tests need a branch", br)
	}
	if m := h.meta(); m.Txid <= h.node(br).Header().Txid || m.Steady < h.node(br).Header().Txid {
		t.Fatalf("bucket b (txn %d) is not older than the steady state (meta %d, steady %d)", h.node(br).Header().Txid, m.Txid, m.Steady)
	}
	h.reseal(h.meta().Root.ID, br) // a no-op re-seal must leave the file valid
	h.write(path)
	r := openHostile(t, path)
	if r.openErr != nil || r.viewErr != nil || len(r.checkErr) != 0 || !r.bounded {
		t.Fatalf("clean file: open %v, view %v, check %v, bounded %t", r.openErr, r.viewErr, r.checkErr, r.bounded)
	}
}

// (a) A branch whose first child is the branch itself.
func TestHostileBranchCycle(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	br := h.bucketRoot("b")
	el := h.pg(br)[page.HeaderSize:]
	binary.LittleEndian.PutUint64(el[0:], br)
	binary.LittleEndian.PutUint64(el[8:], h.node(br).Header().Txid)
	h.reseal(h.meta().Root.ID, br)
	h.write(path)
	wantDetected(t, openHostile(t, path), br)
}

// (b) A leaf element whose key lies past the end of the page.
func TestHostileKeyPastPageEnd(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "key0000")
	leaf := chain[len(chain)-1]
	binary.LittleEndian.PutUint32(h.pg(leaf)[page.HeaderSize+4:], uint32(hostilePS-2))
	h.reseal(chain...)
	h.write(path)
	wantDetected(t, openHostile(t, path), leaf)
}

// (c) A leaf whose element count is enormous.
func TestHostileHugeElementCount(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "key0100")
	leaf := chain[len(chain)-1]
	binary.LittleEndian.PutUint32(h.pg(leaf)[4:], 0xffffffff)
	h.reseal(chain...)
	h.write(path)
	wantDetected(t, openHostile(t, path), leaf)
}

// (d) A blob extent's page type where a leaf is expected.
func TestHostileWrongPageType(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "key0150")
	leaf := chain[len(chain)-1]
	binary.LittleEndian.PutUint16(h.pg(leaf)[0:], uint16(page.TypeBlob))
	h.reseal(chain...)
	h.write(path)
	wantDetected(t, openHostile(t, path), leaf)
}

// (e) A stale page: the child's header says an older txn than the parent
// recorded (a lost write left the previous version in place).
func TestHostileStalePage(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "key0050")
	leaf := chain[len(chain)-1]
	hd := h.node(leaf).Header()
	binary.LittleEndian.PutUint64(h.pg(leaf)[8:], hd.Txid-1)
	h.reseal(chain...)
	h.write(path)
	r := openHostile(t, path)
	wantDetected(t, r, leaf)
	if !strings.Contains(r.viewErr.Error(), "stale") {
		t.Errorf("view error %q does not call the page stale", r.viewErr)
	}
}

// (f) The file cut short below its high-water mark: Open must fail with an
// error, not map pages past the end of the file and fault on them. Cut by
// one page, the previous state (whose HWM may fit) is a legitimate fallback.
func TestHostileTruncatedBelowHWM(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	m := h.meta()
	for _, pages := range []uint64{m.HWM - 1, m.HWM / 2, 3} {
		for _, ro := range []bool{true, false} {
			if err := os.WriteFile(path, img[:pages*hostilePS], 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path, 0o600, &Options{ReadOnly: ro, Timeout: time.Second})
			if err == nil {
				rec := db.Recovery()
				verr := db.View(func(tx *Tx) error {
					if _, ok := walkAll(tx, 100000, 100); !ok {
						return errors.New("walk did not end")
					}
					return nil
				})
				_ = db.Close()
				if !rec.FellBack || rec.Txid != m.Steady || pages != m.HWM-1 {
					t.Fatalf("truncated to %d of %d pages (read-only %t): Open succeeded (%+v)", pages, m.HWM, ro, rec)
				}
				if verr != nil && !classified(verr) {
					t.Fatalf("truncated, fell back: view %v", verr)
				}
				continue
			}
			if !classified(err) {
				t.Errorf("truncated to %d pages (read-only %t): %v is not a corruption error", pages, ro, err)
			}
		}
	}
}

// (g2) Meta 0 zeroed (a lost or zero-filled meta write) while meta 1 holds a
// valid committed state: Open must use meta 1, never treat the file as
// never-committed and initialise it afresh.
func TestHostileMeta0ZeroedMeta1Valid(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	m1, err := page.DecodeMeta(1, h.pg(1))
	if err != nil {
		t.Fatal(err)
	}
	clear(img[:hostilePS])
	var lost []string
	for _, ro := range []bool{true, false} {
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, 0o600, &Options{ReadOnly: ro, Timeout: time.Second})
		if err != nil {
			lost = append(lost, fmt.Sprintf("read-only %t: Open: %v", ro, err))
			continue
		}
		var keys int
		verr := db.View(func(tx *Tx) error {
			if b := tx.Bucket([]byte("b")); b != nil {
				keys = b.Stats().KeyN
			}
			return nil
		})
		rec := db.Recovery()
		_ = db.Close()
		if verr != nil || keys < hostileKeys {
			lost = append(lost, fmt.Sprintf("read-only %t: opened at %+v with %d keys in bucket b (view %v)", ro, rec, keys, verr))
		}
	}
	if len(lost) > 0 {
		t.Fatalf("regression zero-meta0-is-fresh: meta 0 zero, meta 1 valid (txn %d), yet: %s", m1.Txid, strings.Join(lost, "; "))
	}
}

// (g) Both metas zeroed in a file that holds data.
func TestHostileBothMetasZeroed(t *testing.T) {
	path, img := hostileDB(t)
	clear(img[:2*hostilePS])
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: time.Second})
	if !errors.Is(err, rerrors.ErrInvalid) {
		t.Fatalf("read-only open with both metas zero: %v, want ErrInvalid", err)
	}
	db, err := Open(path, 0o600, &Options{Timeout: time.Second})
	if err == nil {
		_ = db.Close()
		t.Fatal("regression zero-metas-with-data: read-write Open initialises afresh a file whose metas are zero but which holds data pages past the creation size (should be ErrInvalid)")
	}
	if !errors.Is(err, rerrors.ErrInvalid) {
		t.Fatalf("read-write open with both metas zero: %v, want ErrInvalid", err)
	}
}

// (h) A newer format version, with a correct checksum.
func TestHostileNewerFormatVersion(t *testing.T) {
	// Both metas newer, or only one: a newer build wrote one of them, and
	// the other is an older state the open must not roll back to.
	for _, ids := range [][]int{{0, 1}, {0}, {1}} {
		path, img := hostileDB(t)
		for _, id := range ids {
			m := img[id*hostilePS : (id+1)*hostilePS]
			binary.LittleEndian.PutUint32(m[4:], page.FormatVersion+1)
			count := uint64(binary.LittleEndian.Uint32(m[64:]))
			deltas := int(binary.LittleEndian.Uint32(m[84:]))
			end := 128 + 2*page.BitmapLen(count) + deltas*page.DeltaRunSize
			binary.LittleEndian.PutUint32(m[12:], page.ChecksumSkipping(m[:end], 12))
		}
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{true, false} {
			_, err := Open(path, 0o600, &Options{ReadOnly: ro, Timeout: time.Second})
			if !errors.Is(err, rerrors.ErrVersionMismatch) {
				t.Fatalf("metas %v newer, read-only %t: %v, want ErrVersionMismatch", ids, ro, err)
			}
		}
	}
}

// (i) Files that are not rivet files.
func TestHostileNotARivetFile(t *testing.T) {
	dir := t.TempDir()
	rnd := rand.New(rand.NewSource(1))
	random := make([]byte, 64*1024)
	rnd.Read(random)
	text := bytes.Repeat([]byte("this is a text file, not a database\n"), 500)
	// A bbolt-like file: bbolt's magic 0xED0CDAED at its meta offset.
	boltish := make([]byte, 4*4096)
	binary.LittleEndian.PutUint32(boltish[16:], 0xED0CDAED)
	binary.LittleEndian.PutUint32(boltish[4096+16:], 0xED0CDAED)
	binary.LittleEndian.PutUint16(boltish[8:], 0x04)
	binary.LittleEndian.PutUint16(boltish[4096+8:], 0x04)
	// Its meta 0 damaged: meta 1 alone, at bbolt's page size, names it.
	boltMeta1 := bytes.Clone(boltish)
	clear(boltMeta1[:4096])
	boltMeta1[100] = 1
	for name, content := range map[string][]byte{"random": random, "text": text, "boltish": boltish, "bolt meta 1": boltMeta1, "short": []byte("RIVT")} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{true, false} {
			db, err := Open(path, 0o600, &Options{ReadOnly: ro, Timeout: time.Second})
			if err == nil {
				_ = db.Close()
				t.Errorf("%s (read-only %t): opened", name, ro)
				continue
			}
			if !errors.Is(err, rerrors.ErrInvalid) {
				t.Errorf("%s (read-only %t): %v, want ErrInvalid", name, ro, err)
			}
			// A writable Open refuses a bbolt file with ErrBboltFile; a
			// read-only one reads it, and says why it cannot (these two
			// have no valid meta) in an error that wraps ErrBboltFile.
			isBolt := strings.HasPrefix(name, "bolt")
			if isBolt != errors.Is(err, ErrBboltFile) || (isBolt && !ro && err != ErrBboltFile) {
				t.Errorf("%s (read-only %t): %v; a bbolt file must be ErrBboltFile and nothing else", name, ro, err)
			}
		}
		if now, _ := os.ReadFile(path); !bytes.Equal(now, content) {
			t.Errorf("%s: a failed Open changed the file", name)
		}
	}
}

// (j) A torn last commit: the newest meta is intact but a page its commit
// wrote is garbage. Open falls back to the previous commit, whose data is
// intact, and says so.
func TestHostileTornLastCommit(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	zroot := h.bucketRoot("z") // written only by the last commit
	rnd := rand.New(rand.NewSource(2))
	rnd.Read(h.pg(zroot)[page.HeaderSize:])
	h.write(path)
	db, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := db.Recovery()
	if !rec.FellBack || rec.Txid != h.meta().Steady || rec.Reason == "" {
		t.Fatalf("recovery %+v, want a fallback to txn %d with a reason", rec, h.meta().Steady)
	}
	err = db.View(func(tx *Tx) error {
		if tx.Bucket([]byte("z")) != nil {
			return errors.New("bucket z of the torn commit is visible")
		}
		b := tx.Bucket([]byte("b"))
		if b == nil {
			return errors.New("bucket b missing")
		}
		for i := 0; i < hostileKeys; i++ {
			if v := b.Get(hkey(i)); string(v) != fmt.Sprintf("value-%d", i) {
				return fmt.Errorf("key %d: %q", i, v)
			}
		}
		if v := b.Get([]byte("blob")); len(v) != hostileBlob {
			return fmt.Errorf("blob: %d bytes", len(v))
		}
		for err := range tx.Check() {
			return fmt.Errorf("check after fallback: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// (k) A blob whose extent's successor is the extent itself.
func TestHostileBlobCycle(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "blob")
	leaf := chain[len(chain)-1]
	_, v, _ := h.leafValue(leaf, "blob")
	ref, err := page.DecodeBlobRef(leaf, v)
	if err != nil {
		t.Fatal(err)
	}
	ext := h.pg(ref.First.ID)
	binary.LittleEndian.PutUint64(ext[32:], ref.First.ID)
	binary.LittleEndian.PutUint64(ext[40:], ref.First.Txid)
	binary.LittleEndian.PutUint32(ext[52:], ref.First.Pages)
	h.reseal(append(chain, ref.First.ID)...)
	h.write(path)
	r := openHostile(t, path)
	wantDetected(t, r, ref.First.ID)
}

// (k2) The same cycle with the checksums forged to agree (CRC-32C is
// affine, so four free payload bytes fix any checksum) and an enormous
// length: the read path bounds the length, but Check's blob walk only stops
// when the running total passes the length, and records "reachable twice"
// for every lap.
func TestHostileForgedBlobCycle(t *testing.T) {
	if !walkerBoundsBlobCycles() {
		t.Fatal("regression walker-blob-cycle: Check would loop ~2^64 times and grow its error list without bound (see internal/btree TestWalkerBlobCycleTerminates)")
	}
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "blob")
	leaf := chain[len(chain)-1]
	_, _, voff := h.leafValue(leaf, "blob")
	lv := h.pg(leaf)[voff:]
	id := page.ID(binary.LittleEndian.Uint64(lv[8:]))
	binary.LittleEndian.PutUint64(lv[0:], 1<<64-1) // length
	ext := h.pg(id)
	const forged = 0x5eed1e55
	binary.LittleEndian.PutUint64(ext[32:], id)
	binary.LittleEndian.PutUint64(ext[40:], binary.LittleEndian.Uint64(ext[8:]))
	binary.LittleEndian.PutUint32(ext[48:], forged)
	binary.LittleEndian.PutUint32(ext[52:], 1)
	hostile.ForgeCRC(ext, page.BlobPayloadStart, forged)
	if page.Checksum(ext) != forged {
		t.Fatal("forge failed")
	}
	h.reseal(append(chain, id)...)
	h.write(path)
	wantDetected(t, openHostile(t, path), id)
}

// walkerBoundsBlobCycles probes whether btree.Walker stops on a cyclic blob
// chain without help, using a Fetch that gives up after a bound.
func walkerBoundsBlobCycles() bool {
	img := make([]byte, 6*hostilePS)
	page.EncodeBlobExtent(img[5*hostilePS:], hostilePS, 5, 1, page.ExtentRef{Ref: page.Ref{ID: 5, Txid: 1}, Pages: 1}, []byte("x"))
	ref := page.BlobRef{Length: 1<<64 - 1, First: page.ExtentRef{Ref: page.Ref{ID: 5, Txid: 1}, Pages: 1}}
	page.EncodeLeaf(img[4*hostilePS:5*hostilePS], hostilePS, 4, 1, []page.LeafElem{{Flags: page.FlagBlob, Key: []byte("k"), Value: ref.Encode()}})
	fetches := 0
	w := btree.Walker{
		Fetch: func(id page.ID, n uint64) ([]byte, error) {
			if fetches++; fetches > 1000 {
				return nil, errors.New("ran away")
			}
			return img[id*hostilePS : (id+n)*hostilePS], nil
		},
		PageSize: hostilePS, HWM: 6, All: true,
		Report: func(error) bool { return true },
	}
	_ = w.Walk(page.Ref{ID: 4, Txid: 1})
	return fetches <= 1000
}

// (l) A bucket record whose root is the leaf holding the record: every
// level of Bucket() opens the same page again, so a recursive walk never
// ends unless nesting is bounded (the tree depth cap restarts per bucket).
func TestHostileBucketRecordCycle(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	chain := h.pathTo("b", "inner")
	leaf := chain[len(chain)-1]
	_, _, voff := h.leafValue(leaf, "inner")
	rv := h.pg(leaf)[voff:]
	binary.LittleEndian.PutUint64(rv[0:], leaf)
	binary.LittleEndian.PutUint64(rv[8:], h.node(leaf).Header().Txid)
	binary.LittleEndian.PutUint32(rv[16:], h.crc(leaf)) // not a fixpoint: Check sees it
	h.reseal(chain...)
	h.write(path)
	r := openHostile(t, path)
	if r.openErr != nil {
		t.Fatal(r.openErr)
	}
	wantCheckNames(t, r.checkErr, leaf)
	if !r.bounded {
		t.Fatalf("regression bucket-nesting-cycle: Bucket(\"inner\") opens the leaf %d that holds its own record, so nested Bucket calls never fail (walk stopped at its own nesting bound; view error %v)", leaf, r.viewErr)
	}
	if !errors.Is(r.viewErr, rerrors.ErrCorrupt) {
		t.Fatalf("view: %v, want ErrCorrupt", r.viewErr)
	}
}

// (m) A DAG of branches: both elements of every branch point to the same
// child, 40 levels deep, all checksums and txids consistent. There is no
// cycle and no path is deeper than the cap, but there are 2^40 paths.
func TestHostileBranchDAG(t *testing.T) {
	path, img := hostileDB(t)
	h := newHimg(t, img)
	root, br := h.meta().Root.ID, h.bucketRoot("b")
	const levels = 40
	brTxid := h.node(br).Header().Txid
	leaf := h.pathTo("b", "key0000")[len(h.pathTo("b", "key0000"))-1]
	// The DAG's branches reuse the pages of bucket b's other nodes.
	var spare []page.ID
	var collect func(id page.ID)
	collect = func(id page.ID) {
		n := h.node(id)
		if id != br && id != leaf {
			spare = append(spare, id)
		}
		for i := 0; !n.IsLeaf() && i < n.Count(); i++ {
			collect(n.BranchChild(i).ID)
		}
	}
	collect(br)
	if len(spare) < levels {
		t.Fatalf("bucket b has only %d spare node pages, the DAG needs %d", len(spare), levels)
	}
	child := page.Ref{ID: leaf, Txid: h.node(leaf).Header().Txid, Checksum: h.crc(leaf)}
	for l := 0; l < levels-1; l++ {
		id := spare[l]
		page.EncodeBranch(h.pg(id), hostilePS, id, brTxid, []page.BranchElem{{Key: []byte("key0000"), Child: child}, {Key: []byte("key0001"), Child: child}})
		child = page.Ref{ID: id, Txid: brTxid, Checksum: h.crc(id)}
	}
	page.EncodeBranch(h.pg(br), hostilePS, br, brTxid, []page.BranchElem{{Key: []byte("key0000"), Child: child}, {Key: []byte("key0001"), Child: child}})
	h.reseal(root, br)
	h.write(path)
	r := openHostile(t, path)
	if r.openErr != nil {
		t.Fatal(r.openErr)
	}
	wantCheckNames(t, r.checkErr, leaf)
	if !r.bounded {
		t.Fatalf("regression cursor-dag: a cursor walk over a 40-level branch DAG returned the same leaf's keys 100000 times and would go on 2^40 times (view error %v)", r.viewErr)
	}
	if !errors.Is(r.viewErr, rerrors.ErrCorrupt) {
		t.Fatalf("view: %v, want ErrCorrupt", r.viewErr)
	}
	if !errors.Is(r.statsErr, rerrors.ErrCorrupt) {
		t.Fatalf("Bucket.Stats over a branch DAG: %v, want ErrCorrupt", r.statsErr)
	}
	// Compaction's relocation walk visits every tree too: asked to move
	// everything above the metas (Compact itself would find nothing worth
	// moving in a file this small), it must stop with ErrCorrupt, not
	// follow the 2^40 paths.
	// The repacking walk too.
	for _, pass := range []struct {
		name  string
		fn    compactPassFunc
		limit page.ID
	}{{"relocation", relocatePass, page.MinPages}, {"repacking", repackPass, 0}} {
		done := make(chan error, 1)
		go func() {
			db, err := Open(path, 0o600, &Options{Timeout: time.Second})
			if err != nil {
				done <- err
				return
			}
			defer db.Close()
			// No budget: only the visit bound can stop the walk.
			db.compactBudget = math.MaxUint64
			_, _, err = db.compactStep(&compactRun{db: db}, pass.fn, pass.limit, compactNormal, &compactPos{})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("compaction's %s walk over a branch DAG: %v, want ErrCorrupt", pass.name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("compaction's %s walk over a 40-level branch DAG did not finish in 20 s", pass.name)
		}
	}
}

// (k) A forged free-space delta in the newest meta (format 2): a run that
// frees a page the tree still uses, and a run that marks as used a page its
// region map already has in use. Neither may panic: Check reports both, and
// the second is ErrCorrupt as soon as the region is loaded.
func TestHostileMetaDelta(t *testing.T) {
	for _, free := range []bool{true, false} {
		path, img := hostileDB(t)
		h := newHimg(t, img)
		m := h.meta()
		victim := h.bucketRoot("b") // live, so in use in the map
		// Insert the run in order, dropping runs that touch it, and mark
		// no region changed, so the run is structurally valid.
		var delta []page.DeltaRun
		added := false
		for _, d := range m.Delta {
			if victim >= d.ID && victim < d.ID+d.N {
				continue
			}
			if !added && d.ID > victim {
				delta = append(delta, page.DeltaRun{ID: victim, N: 1, Free: free})
				added = true
			}
			delta = append(delta, d)
		}
		if !added {
			delta = append(delta, page.DeltaRun{ID: victim, N: 1, Free: free})
		}
		m.Delta = delta
		clear(m.Changed)
		page.EncodeMeta(h.pg(page.ID(h.mid)), m)
		h.write(path)

		db, err := Open(path, 0o600, &Options{Timeout: time.Second})
		if err != nil {
			t.Fatalf("free %t: Open: %v (the delta is only checked against the map when a region loads)", free, err)
		}
		var problems []error
		_ = db.View(func(tx *Tx) error {
			for err := range tx.Check() {
				problems = append(problems, err)
			}
			return nil
		})
		if len(problems) == 0 {
			t.Errorf("free %t (page %d): Check found nothing", free, victim)
		}
		for _, p := range problems {
			if !classified(p) {
				t.Errorf("free %t: unclassified problem %v", free, p)
			}
		}
		err = db.Update(func(tx *Tx) error {
			return tx.Bucket([]byte("b")).Put([]byte("new"), []byte("value"))
		})
		if !free && !errors.Is(err, rerrors.ErrCorrupt) {
			t.Errorf("run marking a used page used: Update = %v, want ErrCorrupt", err)
		}
		_ = db.Close()
	}
}

// TestOpenFileTooSmall cuts files shorter than page.MinPages pages (bbolt's
// TestOpen_FileTooSmall): a fresh file whose meta 0 is still the creation
// meta, and a file with data. Open must refuse them with ErrInvalid ("file
// size too small"), writable or not, and leave the bytes alone — never
// take the creation meta for an interrupted creation and start the file
// again over what is left.
func TestOpenFileTooSmall(t *testing.T) {
	for _, withData := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "db")
		db, err := Open(path, 0o600, &Options{PageSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if withData {
			mustPutOne(t, db, "b", "k", "v")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, pages := range []int64{1, 2, 3} {
			if err := os.Truncate(path, pages*4096); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			for _, ro := range []bool{false, true} {
				db, err := Open(path, 0o600, &Options{ReadOnly: ro})
				if err == nil {
					_ = db.Close()
					t.Fatalf("data %t, cut to %d pages, read-only %t: Open succeeded", withData, pages, ro)
				}
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "file size too small") {
					t.Errorf("data %t, cut to %d pages, read-only %t: %v, want ErrInvalid: file size too small", withData, pages, ro, err)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Fatalf("data %t, cut to %d pages: Open changed the file", withData, pages)
				}
			}
		}
	}
}

// warnLog records Warningf messages; every other level is discarded.
type warnLog struct {
	discardLogger
	warnings []string
}

func (l *warnLog) Warningf(format string, v ...interface{}) {
	l.warnings = append(l.warnings, fmt.Sprintf(format, v...))
}

// TestDamagedMetaIsReported corrupts one byte of one meta page of a
// cleanly closed file: Open must not silently use the other meta and
// report that it did not fall back. Damage to the newer meta must be
// reported as a fall-back (Recovery.FellBack, Reason, DamagedMeta naming the
// slot and the txn the page claims, a warning in the log); damage to the
// older one as DamagedMeta and a warning, without FellBack. Either way the
// file opens at the valid meta and passes Check.
func TestDamagedMetaIsReported(t *testing.T) {
	for _, newer := range []bool{true, false} {
		for _, where := range []int{20, 100} { // the txid field, a reserved byte
			path, img := hostileDB(t)
			m0, err0 := page.DecodeMeta(0, img[:hostilePS])
			m1, err1 := page.DecodeMeta(1, img[hostilePS:2*hostilePS])
			if err0 != nil || err1 != nil {
				t.Fatalf("metas of the clean file: %v, %v", err0, err1)
			}
			slot, kept := 0, m1
			if (m1.Txid > m0.Txid) == newer {
				slot, kept = 1, m0
			}
			claimed := []*page.Meta{m0, m1}[slot].Txid
			img[slot*hostilePS+where] ^= 0x40
			if where == 20 {
				claimed ^= 0x40 << 32
			}
			if err := os.WriteFile(path, img, 0o600); err != nil {
				t.Fatal(err)
			}
			log := &warnLog{}
			db, err := Open(path, 0o600, &Options{ReadOnly: true, Logger: log})
			if err != nil {
				t.Fatalf("newer %t, byte %d: Open: %v", newer, where, err)
			}
			rec := db.Recovery()
			mustCheck(t, db)
			_ = db.Close()
			what := fmt.Sprintf("newer %t, byte %d: %+v", newer, where, rec)
			if rec.Txid != kept.Txid {
				t.Errorf("%s: opened at txn %d, want %d", what, rec.Txid, kept.Txid)
			}
			wantClaim := fmt.Sprintf("meta %d (claims txn %d) is damaged", slot, claimed)
			if !strings.Contains(rec.DamagedMeta, wantClaim) {
				t.Errorf("%s: DamagedMeta does not say %q", what, wantClaim)
			}
			if rec.FellBack != (claimed > kept.Txid) {
				t.Errorf("%s: FellBack %t, but the damaged meta claims txn %d and the one opened is %d", what, rec.FellBack, claimed, kept.Txid)
			}
			if rec.FellBack && rec.Reason == "" {
				t.Errorf("%s: fell back without a reason", what)
			}
			if len(log.warnings) != 1 || !strings.Contains(log.warnings[0], wantClaim) {
				t.Errorf("%s: warnings %q, want one naming the damaged meta", what, log.warnings)
			}
		}
	}
}

// (q) Inline buckets (format 3) whose bytes lie. The record of the inline
// bucket "tiny" sits in a leaf of bucket b; each case rewrites part of it
// (resealing checksums, so only structure can catch it) and must be
// reported by Check naming that leaf and by reads as ErrCorrupt — never a
// panic, a hang, or pages freed or reached through the forged record.
func TestHostileInlineBucket(t *testing.T) {
	cases := []struct {
		name  string
		forge func(rec []byte)
	}{
		{"reserved bytes set", func(rec []byte) { rec[8] = 1 }},
		{"huge count", func(rec []byte) { binary.LittleEndian.PutUint32(rec[0:], 1<<31) }},
		{"count past its elements", func(rec []byte) { binary.LittleEndian.PutUint32(rec[0:], 4) }},
		{"zero count", func(rec []byte) { binary.LittleEndian.PutUint32(rec[0:], 0) }},
		{"element claims a nested bucket", func(rec []byte) {
			binary.LittleEndian.PutUint32(rec[page.HeaderSize:], page.FlagBucket)
		}},
		{"element claims a blob", func(rec []byte) {
			binary.LittleEndian.PutUint32(rec[page.HeaderSize+page.LeafElemSize:], page.FlagBlob)
		}},
		{"element past the end", func(rec []byte) {
			binary.LittleEndian.PutUint32(rec[page.HeaderSize+12:], 1<<20)
		}},
		{"key inside the header", func(rec []byte) {
			binary.LittleEndian.PutUint32(rec[page.HeaderSize+4:], 8)
		}},
		{"keys out of order", func(rec []byte) {
			// Swap the second bytes of keys t1 and t3: "t3" < "t1" fails.
			k0 := int(binary.LittleEndian.Uint32(rec[page.HeaderSize+4:]))
			k2 := int(binary.LittleEndian.Uint32(rec[page.HeaderSize+2*page.LeafElemSize+4:]))
			rec[k0+1], rec[k2+1] = rec[k2+1], rec[k0+1]
		}},
		{"unknown record flags", func(rec []byte) { binary.LittleEndian.PutUint32(rec[20:], 6) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, img := hostileDB(t)
			h := newHimg(t, img)
			chain := h.pathTo("b", "tiny")
			leaf := chain[len(chain)-1]
			flags, v, voff := h.leafValue(leaf, "tiny")
			if flags != page.FlagBucket || len(v) <= page.RecordSize {
				t.Fatalf("bucket tiny is not inline: flags %d, record of %d bytes", flags, len(v))
			}
			c.forge(h.pg(leaf)[voff : voff+len(v)])
			h.reseal(chain...)
			h.write(path)
			r := openHostile(t, path)
			if r.openErr != nil {
				t.Fatal(r.openErr)
			}
			wantCheckNames(t, r.checkErr, leaf)
			db, err := Open(path, 0o600, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.View(func(tx *Tx) error {
				if b := tx.Bucket([]byte("b")).Bucket([]byte("tiny")); b != nil {
					// Reading may succeed for damage only Check sees
					// (keys out of order); it must not panic.
					_ = b.ForEach(func(k, v []byte) error { return nil })
					_ = b.Get([]byte("t2"))
				}
				return nil
			})
			if err != nil && !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("reading the forged bucket: %v, want nil or ErrCorrupt", err)
			}
		})
	}
}

package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/page"
)

// pagesPS is the page size of the files the page-walk tests build: small,
// so a few hundred keys make branches and several regions are cheap.
const pagesPS = 1024

// pagesDB builds a file with nested buckets, a blob, an inline bucket and
// free space left by deletes, closes it and returns its path:
//
//   - "a": 600 keys (a branch root), a nested bucket "n" with pages of its
//     own, a nested inline bucket "tiny" and the blob value "blob";
//   - "b": 300 keys, every other one deleted in a later transaction.
func pagesDB(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.db")
	db, err := Open(path, 0o600, &Options{PageSize: pagesPS})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		for i := 0; i < 600; i++ {
			if err := a.Put([]byte(fmt.Sprintf("key%04d", i)), bytes.Repeat([]byte{'v'}, 40)); err != nil {
				return err
			}
		}
		if err := a.Put([]byte("blob"), bytes.Repeat([]byte("L"), 8*pagesPS+600)); err != nil {
			return err
		}
		n, err := a.CreateBucket([]byte("n"))
		if err != nil {
			return err
		}
		for i := 0; i < 40; i++ {
			if err := n.Put([]byte(fmt.Sprintf("n%03d", i)), bytes.Repeat([]byte{'n'}, 60)); err != nil {
				return err
			}
		}
		tiny, err := a.CreateBucket([]byte("tiny"))
		if err != nil {
			return err
		}
		if err := tiny.Put([]byte("t"), []byte("x")); err != nil {
			return err
		}
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := 0; i < 300; i++ {
			if err := b.Put([]byte(fmt.Sprintf("b%04d", i)), bytes.Repeat([]byte{'b'}, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		b := tx.Bucket([]byte("b"))
		for i := 0; i < 300; i += 2 {
			if err := b.Delete([]byte(fmt.Sprintf("b%04d", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// collectPages runs WalkPages and fails the test unless the uses cover
// [0, HWM) exactly once, in order.
func collectPages(t testing.TB, tx *Tx) []PageUse {
	t.Helper()
	var uses []PageUse
	if err := tx.WalkPages(func(u PageUse) error { uses = append(uses, u); return nil }); err != nil {
		t.Fatalf("WalkPages: %v", err)
	}
	next := Pgid(0)
	for _, u := range uses {
		if u.ID != next || u.Pages < 1 {
			t.Fatalf("use %+v: want a run starting at page %d", u, next)
		}
		next += Pgid(u.Pages)
	}
	if hwm := Pgid(tx.Size() / pagesPS); next != hwm {
		t.Fatalf("uses cover [0, %d), the HWM is %d", next, hwm)
	}
	return uses
}

// pageTotals sums pages per kind.
func pageTotals(uses []PageUse) map[PageKind]int {
	m := map[PageKind]int{}
	for _, u := range uses {
		m[u.Kind] += u.Pages
	}
	return m
}

func bucketIs(u PageUse, names ...string) bool {
	if len(u.Bucket) != len(names) {
		return false
	}
	for i, n := range names {
		if string(u.Bucket[i]) != n {
			return false
		}
	}
	return true
}

// TestWalkPages: on a healthy file with nested buckets, a blob and free
// space, every page in [0, HWM) is reported exactly once, nothing is
// wrong, the counts agree with Bucket.Stats, Stats and Check, owners and
// depths are right, and the writable (free-space map) and read-only
// (region maps on disk) views agree.
func TestWalkPages(t *testing.T) {
	path := pagesDB(t)
	var views [2][]PageUse
	for i, ro := range []bool{false, true} {
		db, err := Open(path, 0o600, &Options{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *Tx) error {
			uses := collectPages(t, tx)
			views[i] = uses
			tot := pageTotals(uses)
			for _, u := range uses {
				if u.Err != nil || u.Kind == PageDamaged || u.Kind == PageUnreachable || u.Kind == PageUnknown {
					t.Errorf("read-only %t: healthy file has %v use %+v", ro, u.Kind, u)
				}
				switch u.Kind {
				case PageBranch, PageLeaf, PageBlob:
					if u.Checksum != ChecksumOK || u.Txid == 0 || u.Count == 0 {
						t.Errorf("reachable run %+v: checksum, txid or count missing", u)
					}
				case PageFree:
					if u.Checksum != ChecksumNotStored || u.Txid != 0 {
						t.Errorf("free run %+v", u)
					}
				}
			}
			// Metas and map slots: one current of each pair.
			regions := int((uint64(tx.Size()/pagesPS) + page.RegionPages(pagesPS) - 1) / page.RegionPages(pagesPS))
			cur := map[PageKind]int{}
			for _, u := range uses {
				if u.Current {
					cur[u.Kind]++
				}
				if (u.Kind == PageMeta || u.Kind == PageRegionMap) && u.Checksum == ChecksumBad {
					t.Errorf("%v page %d: checksum bad", u.Kind, u.ID)
				}
			}
			if tot[PageMeta] != 2 || cur[PageMeta] != 1 || tot[PageRegionMap] != 2*regions || cur[PageRegionMap] != regions {
				t.Errorf("read-only %t: metas %d (%d current), map slots %d (%d current), %d regions", ro, tot[PageMeta], cur[PageMeta], tot[PageRegionMap], cur[PageRegionMap], regions)
			}
			if st := db.Stats(); tot[PageFree] != st.FreePageN || st.FreePageN == 0 {
				t.Errorf("read-only %t: %d free pages walked, Stats says %d", ro, tot[PageFree], st.FreePageN)
			}
			// Per top-level bucket, the runs agree with Bucket.Stats.
			for _, name := range []string{"a", "b"} {
				st := tx.Bucket([]byte(name)).Stats()
				var branches, leaves, overflow int
				for _, u := range uses {
					if len(u.Bucket) == 0 || string(u.Bucket[0]) != name {
						continue
					}
					switch u.Kind {
					case PageBranch:
						branches++
					case PageLeaf:
						leaves++
						overflow += u.Pages - 1
					case PageBlob:
						overflow += u.Pages
					}
				}
				if branches != st.BranchPageN || leaves != st.LeafPageN || overflow != st.LeafOverflowN {
					t.Errorf("bucket %s: walked %d branches, %d leaves, %d overflow; Stats %d, %d, %d",
						name, branches, leaves, overflow, st.BranchPageN, st.LeafPageN, st.LeafOverflowN)
				}
			}
			// Owners and depths: a's leaves all lie at one depth below
			// its branch root (a B+tree), and its blob at theirs.
			leafDepths := map[int]int{}
			var blobs, nested, rootLeaves, aRoots int
			for _, u := range uses {
				if u.Kind != PageBranch && u.Kind != PageLeaf && u.Kind != PageBlob {
					continue
				}
				switch {
				case u.Kind == PageBlob:
					blobs++
					if !bucketIs(u, "a") || string(u.Key) != "blob" || u.Pages != 9 {
						t.Errorf("blob run %+v: want bucket a, key blob, 9 pages", u)
					}
				case bucketIs(u, "a", "n"):
					nested++
				case len(u.Bucket) == 0:
					if u.Kind != PageLeaf || u.Depth != 0 {
						t.Errorf("root tree run %+v: want one leaf at depth 0", u)
					}
					rootLeaves++
				case bucketIs(u, "a") && u.Kind == PageLeaf:
					leafDepths[u.Depth]++
				case bucketIs(u, "a") && u.Kind == PageBranch && u.Depth == 0:
					aRoots++
				case bucketIs(u, "a", "tiny"):
					t.Errorf("inline bucket tiny owns a page: %+v", u)
				}
			}
			if blobs != 1 || nested == 0 || rootLeaves != 1 || aRoots != 1 || len(leafDepths) != 1 {
				t.Errorf("blobs %d, runs of a/n %d, root leaves %d, roots of a %d, depths of a's leaves %v", blobs, nested, rootLeaves, aRoots, leafDepths)
			}
			for _, u := range uses {
				if u.Kind == PageBlob && leafDepths[u.Depth] == 0 {
					t.Errorf("blob at depth %d, a's leaves at %v", u.Depth, leafDepths)
				}
			}
			// Check agrees: nothing wrong, and the reachable pages are what
			// is neither free nor fixed.
			for err := range tx.Check() {
				t.Errorf("check: %v", err)
			}
			reach := tot[PageBranch] + tot[PageLeaf] + tot[PageBlob]
			if reach+tot[PageFree]+tot[PageMeta]+tot[PageRegionMap] != int(tx.Size()/pagesPS) {
				t.Errorf("pages do not add up: %v", tot)
			}
			// Page agrees with the walk, for a page inside the blob's run.
			for _, u := range uses {
				if u.Kind != PageBlob {
					continue
				}
				info, err := tx.Page(int(u.ID) + 3)
				if err != nil || info == nil || info.ID != int(u.ID) || info.Type != "blob" || info.OverflowCount != u.Pages-1 || info.Count != u.Count || string(info.Use.Key) != "blob" {
					t.Errorf("Page(%d) = %+v, %v; the walk says %+v", u.ID+3, info, err, u)
				}
			}
			if info, err := tx.Page(int(tx.Size() / pagesPS)); info != nil || err != nil {
				t.Errorf("Page(HWM) = %+v, %v; want nil, nil", info, err)
			}
			if info, err := tx.Page(0); err != nil || info == nil || info.Type != "meta" {
				t.Errorf("Page(0) = %+v, %v", info, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(views[0]) != len(views[1]) {
		t.Fatalf("writable view has %d uses, read-only %d", len(views[0]), len(views[1]))
	}
	for i := range views[0] {
		a, b := views[0][i], views[1][i]
		if a.ID != b.ID || a.Pages != b.Pages || a.Kind != b.Kind || a.Current != b.Current {
			t.Errorf("use %d: writable %+v, read-only %+v", i, a, b)
		}
	}
}

// TestWalkPagesLeak: a page the region map marks used that no tree reaches
// is reported as unreachable — the page Check reports as leaked.
func TestWalkPagesLeak(t *testing.T) {
	src := pagesDB(t)
	path := filepath.Join(t.TempDir(), "copy.db")
	// A copy has its maps rebuilt and no delta, so the leak is made by
	// editing one map page.
	db, err := Open(src, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var leak page.ID
	err = db.View(func(tx *Tx) error {
		for _, u := range collectPages(t, tx) {
			if u.Kind == PageFree {
				leak = page.ID(u.ID)
				break
			}
		}
		return tx.CopyFile(path, 0o600)
	})
	db.Close()
	if err != nil || leak == 0 {
		t.Fatalf("copy: %v, free page %d", err, leak)
	}
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	slot := page.MapSlot(pagesPS, 0, 0)
	buf := img[slot*pagesPS : (slot+1)*pagesPS]
	txid, free, err := page.DecodeRegionMap(buf, pagesPS, slot)
	if err != nil || free[leak/64]&(1<<(leak%64)) == 0 {
		t.Fatalf("map of the copy: %v, page %d free %t", err, leak, err == nil && free[leak/64]&(1<<(leak%64)) != 0)
	}
	free[leak/64] &^= 1 << (leak % 64)
	page.EncodeRegionMap(buf, pagesPS, slot, txid, free)
	for m := 0; m < 2; m++ {
		mb := img[m*pagesPS : (m+1)*pagesPS]
		meta, err := page.DecodeMeta(page.ID(m), mb)
		if err != nil {
			t.Fatal(err)
		}
		meta.FreePages--
		page.EncodeMeta(mb, meta)
	}
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		db, err := Open(path, 0o600, &Options{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *Tx) error {
			var unreachable []PageUse
			for _, u := range collectPages(t, tx) {
				if u.Kind == PageUnreachable {
					unreachable = append(unreachable, u)
				} else if u.Err != nil {
					t.Errorf("read-only %t: %+v", ro, u)
				}
			}
			if len(unreachable) != 1 || unreachable[0].ID != Pgid(leak) || unreachable[0].Pages != 1 || !errors.Is(unreachable[0].Err, rerrors.ErrCorrupt) {
				t.Errorf("read-only %t: unreachable %+v, want page %d", ro, unreachable, leak)
			}
			if ro {
				return nil // Check compares free space on a writable DB only
			}
			var errs []error
			for err := range tx.Check() {
				errs = append(errs, err)
			}
			wantCheckNames(t, errs, leak)
			if len(errs) != 1 {
				t.Errorf("Check: %v; want the one leak", errs)
			}
			return nil
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// damage flips bytes inside page id of the file at path.
func damage(t testing.TB, path string, id page.ID, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4)
	at := int64(id)*pagesPS + int64(off)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0x5a
	}
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// TestWalkPagesDamaged: a damaged leaf is reported as damaged, with the
// bucket it belongs to and an error naming it, and the walk goes on; a
// damaged region map makes its region's free set unknown, not a panic or
// a stop.
func TestWalkPagesDamaged(t *testing.T) {
	path := pagesDB(t)
	db, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var leaf, other PageUse
	var before []PageUse
	_ = db.View(func(tx *Tx) error {
		before = collectPages(t, tx)
		for _, u := range before {
			if u.Kind == PageLeaf && bucketIs(u, "a") && leaf.ID == 0 {
				leaf = u
			}
			if u.Kind == PageLeaf && bucketIs(u, "b") {
				other = u
			}
		}
		return nil
	})
	db.Close()
	if leaf.ID == 0 || other.ID == 0 {
		t.Fatal("no leaf of a or b")
	}
	damage(t, path, page.ID(leaf.ID), pagesPS-100) // in its keys and values: the checksum catches it

	db, err = Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *Tx) error {
		uses := collectPages(t, tx)
		if len(uses) != len(before) {
			t.Errorf("%d uses after damage, %d before", len(uses), len(before))
		}
		var got PageUse
		for _, u := range uses {
			if u.ID == leaf.ID {
				got = u
			}
			if u.ID == other.ID && (u.Kind != PageLeaf || u.Err != nil) {
				t.Errorf("leaf of b after damage elsewhere: %+v", u)
			}
		}
		var ce *rerrors.CorruptError
		if got.Kind != PageDamaged || got.Checksum != ChecksumBad || !bucketIs(got, "a") || got.Pages != leaf.Pages ||
			!errors.As(got.Err, &ce) || ce.Page != uint64(leaf.ID) {
			t.Errorf("damaged leaf reported as %+v (error %v)", got, got.Err)
		}
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		wantCheckNames(t, errs, page.ID(leaf.ID))
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	// The current map of region 0, damaged: its free pages become unknown.
	db, err = Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var slot PageUse
	_ = db.View(func(tx *Tx) error {
		for _, u := range collectPages(t, tx) {
			if u.Kind == PageRegionMap && u.Current {
				slot = u
				break
			}
		}
		return nil
	})
	db.Close()
	damage(t, path, page.ID(slot.ID), 200)
	db, err = Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *Tx) error {
		tot := map[PageKind]int{}
		for _, u := range collectPages(t, tx) {
			tot[u.Kind] += u.Pages
			if u.ID == slot.ID && (u.Checksum != ChecksumBad || !errors.Is(u.Err, rerrors.ErrCorrupt) || !u.Current) {
				t.Errorf("damaged map slot: %+v", u)
			}
			if u.Kind == PageUnknown && u.Err == nil {
				t.Errorf("unknown pages without a reason: %+v", u)
			}
		}
		if tot[PageFree] != 0 || tot[PageUnknown] == 0 {
			t.Errorf("with region 0's map damaged: %v", tot)
		}
		return nil
	})
}

// TestWalkPagesRandomDamage: random bytes overwritten anywhere in a file
// never make WalkPages panic, loop or lose a page: every page below the
// HWM is still reported exactly once.
func TestWalkPagesRandomDamage(t *testing.T) {
	src := pagesDB(t)
	img, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(13))
	path := filepath.Join(t.TempDir(), "damaged.db")
	start := time.Now()
	opened, found := 0, 0
	for round := 0; round < 60; round++ {
		b := slices.Clone(img)
		for n := 1 + rng.Intn(4); n > 0; n-- {
			p := 2 + rng.Intn(len(b)/pagesPS-2)
			off := rng.Intn(pagesPS - 8)
			if rng.Intn(3) == 0 {
				off = rng.Intn(page.HeaderSize) // the header: type, count, txid, id, overflow
			}
			for i := 0; i < 1+rng.Intn(8); i++ {
				b[p*pagesPS+off+i] = byte(rng.Intn(256))
			}
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			continue
		}
		opened++
		_ = db.View(func(tx *Tx) error {
			for _, u := range collectPages(t, tx) {
				if u.Err != nil {
					found++
					break
				}
			}
			return nil
		})
		db.Close()
	}
	// Damage to a free page goes unseen; most rounds hit live pages.
	if opened < 30 || found < opened/3 {
		t.Errorf("%d of 60 damaged files opened, %d with damage reported", opened, found)
	}
	t.Logf("%d damaged files walked in %s, %d with damage reported", opened, time.Since(start), found)
}

// TestWalkPagesWriteTx: in a write transaction that has not allocated,
// the free set is the DB's; after a change it is unknown (and said so),
// and the walk still covers every page.
func TestWalkPagesWriteTx(t *testing.T) {
	path := pagesDB(t)
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if tot := pageTotals(collectPages(t, tx)); tot[PageFree] == 0 || tot[PageUnknown] != 0 {
		t.Errorf("write transaction before any change: %v", tot)
	}
	// Changes stay in memory until Commit spills them, so the free set
	// stays the DB's; once the transaction has allocated or freed (as
	// Commit does), it is no longer the snapshot's, and the walk says so.
	if err := tx.Bucket([]byte("a")).Delete([]byte("blob")); err != nil {
		t.Fatal(err)
	}
	if tot := pageTotals(collectPages(t, tx)); tot[PageFree] == 0 || tot[PageUnknown] != 0 || tot[PageBlob] == 0 {
		t.Errorf("write transaction after a delete: %v", tot)
	}
	tx.spaceOps++
	tot := map[PageKind]int{}
	for _, u := range collectPages(t, tx) {
		tot[u.Kind] += u.Pages
		if u.Kind == PageUnknown && u.Err == nil {
			t.Errorf("unknown run without a reason: %+v", u)
		}
	}
	if tot[PageUnknown] == 0 || tot[PageFree] != 0 || tot[PageBlob] == 0 {
		t.Errorf("write transaction that allocated: %v", tot)
	}
}

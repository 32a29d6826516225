package inspect_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/inspect"
	"github.com/rivetkv/rivet/internal/page"
)

const testPageSize = 1024

// makeFile writes a rivet file with a bucket of keys, a nested bucket and
// a large value, and returns its path.
func makeFile(t testing.TB, keys int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: testPageSize})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *rivet.Tx) error {
		b, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		for i := 0; i < keys; i++ {
			if err := b.Put(fmt.Appendf(nil, "key%05d", i), fmt.Appendf(nil, "value-%d", i)); err != nil {
				return err
			}
		}
		n, err := b.CreateBucket([]byte("nested"))
		if err != nil {
			return err
		}
		if err := n.SetSequence(7); err != nil {
			return err
		}
		return n.Put([]byte("big"), bytes.Repeat([]byte("0123456789"), 2000))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func readMetas(t *testing.T, b []byte) ([2]*inspect.Meta, [2]error) {
	t.Helper()
	return inspect.ReadMetas(bytes.NewReader(b), int64(len(b)))
}

func TestReadMetas(t *testing.T) {
	path := makeFile(t, 100)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	metas, errs := readMetas(t, img)
	for slot := range metas {
		if errs[slot] != nil {
			t.Fatalf("meta %d: %v", slot, errs[slot])
		}
		m := metas[slot]
		if m.PageSize != testPageSize || m.FormatVersion != page.FormatVersion || m.Regions != 1 || m.HWM*testPageSize > uint64(len(img)) {
			t.Errorf("meta %d: %+v", slot, m)
		}
	}
	newest := 0
	if metas[1].Txid > metas[0].Txid {
		newest = 1
	}
	db, err := rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *rivet.Tx) error {
		if got := metas[newest].Txid; got != uint64(tx.ID()) {
			t.Errorf("newest meta holds transaction %d, Open read %d", got, tx.ID())
		}
		if got := metas[newest].HWM; got*testPageSize != uint64(tx.Size()) {
			t.Errorf("newest meta's high-water mark %d pages, the transaction's size %d bytes", got, tx.Size())
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	// Meta 0 damaged: its page size cannot be trusted, and meta 1 is
	// still found, at every page size tried.
	bad := append([]byte(nil), img...)
	bad[100] ^= 0xff
	metas, errs = readMetas(t, bad)
	if !errors.Is(errs[0], rerrors.ErrCorrupt) || metas[0] != nil {
		t.Errorf("damaged meta 0: %v, %+v", errs[0], metas[0])
	}
	if errs[1] != nil || metas[1].PageSize != testPageSize {
		t.Errorf("meta 1 beside a damaged meta 0: %v, %+v", errs[1], metas[1])
	}
	if _, ok := inspect.ClaimedTxid(bad); !ok {
		t.Error("a meta damaged past its magic claims no txid")
	}

	// A file too short for any meta.
	metas, errs = readMetas(t, img[:100])
	for slot := range metas {
		if metas[slot] != nil || errs[slot] == nil {
			t.Errorf("100-byte file, meta %d: %+v, %v", slot, metas[slot], errs[slot])
		}
	}
	// Not a rivet file at all.
	if _, err := inspect.DecodeMeta(0, make([]byte, testPageSize)); !errors.Is(err, rerrors.ErrInvalid) {
		t.Errorf("zero page as a meta: %v, want ErrInvalid", err)
	}
	if !inspect.HasMagic(img) || inspect.HasMagic(img[1:]) || inspect.HasMagic(img[:3]) {
		t.Error("HasMagic does not tell a rivet meta")
	}
}

// TestDecodePageAgreesWithWalk decodes every run WalkPages reports and
// checks the decoded page against what the walk says: its kind, its count,
// and for leaves the keys a cursor reads.
func TestDecodePageAgreesWithWalk(t *testing.T) {
	path := makeFile(t, 300)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seen := map[rivet.PageKind]int{}
	leafKeys := map[string]bool{}
	var bigPayload []byte
	err = db.View(func(tx *rivet.Tx) error {
		hwm := uint64(tx.Size()) / testPageSize
		return tx.WalkPages(func(u rivet.PageUse) error {
			if u.Err != nil {
				t.Errorf("page %d: %v", u.ID, u.Err)
			}
			off := uint64(u.ID) * testPageSize
			run := img[off : off+uint64(u.Pages)*testPageSize]
			p, err := inspect.DecodePage(run, uint64(u.ID), testPageSize, hwm)
			if err != nil {
				t.Fatalf("page %d: %v", u.ID, err)
			}
			seen[u.Kind]++
			if p.Err != nil && u.Kind != rivet.PageFree {
				t.Errorf("page %d (%v) does not decode: %v", u.ID, u.Kind, p.Err)
			}
			switch u.Kind {
			case rivet.PageMeta:
				if p.Meta == nil || p.Meta.Txid != u.Txid {
					t.Errorf("meta %d: %+v, walk says txid %d", u.ID, p.Meta, u.Txid)
				}
			case rivet.PageBranch, rivet.PageLeaf:
				n := p.Node
				if n == nil || n.Leaf != (u.Kind == rivet.PageLeaf) || n.Count != u.Count || len(n.Elements) != n.Count || n.Err != nil {
					t.Fatalf("node %d (%v, %d elements): %+v", u.ID, u.Kind, u.Count, n)
				}
				if p.Header.Txid != u.Txid || p.Header.ID != uint64(u.ID) || p.Header.Pages() != uint64(u.Pages) {
					t.Errorf("node %d header %+v, walk %+v", u.ID, p.Header, u)
				}
				for _, e := range n.Elements {
					switch {
					case !n.Leaf:
						if e.Child.ID < inspect.MinPages || e.Child.ID >= hwm {
							t.Errorf("branch %d child %+v outside the state", u.ID, e.Child)
						}
					case e.Flags == inspect.FlagBucket:
						if e.Bucket == nil || e.Err != nil {
							t.Errorf("bucket record %q: %+v, %v", e.Key, e.Bucket, e.Err)
						} else if string(e.Key) == "nested" && e.Bucket.Sequence != 7 {
							t.Errorf("nested bucket's sequence %d, want 7", e.Bucket.Sequence)
						}
					case e.Flags == inspect.FlagBlob:
						if e.Blob == nil || e.Blob.Length != 20000 {
							t.Errorf("blob reference %q: %+v, %v", e.Key, e.Blob, e.Err)
						}
					default:
						if len(u.Bucket) == 1 && string(u.Bucket[0]) == "users" {
							leafKeys[string(e.Key)] = true
						}
					}
				}
			case rivet.PageBlob:
				b := p.Blob
				if b == nil || b.PagesRead != b.Pages || b.Pages != uint64(u.Pages) || b.Length != uint64(u.Count) {
					t.Fatalf("blob %d: %+v (walk: %+v)", u.ID, b, u)
				}
				bigPayload = append(bigPayload, b.Payload...)
				// Given only its first page, the run is described.
				part, err := inspect.DecodePage(run[:testPageSize], uint64(u.ID), testPageSize, hwm)
				if err != nil || part.Blob == nil || part.Blob.PagesRead != 1 || part.Blob.Length != b.Length ||
					!bytes.HasPrefix(b.Payload, part.Blob.Payload) {
					t.Errorf("blob %d from its first page: %+v, %v", u.ID, part.Blob, err)
				}
			case rivet.PageRegionMap:
				if u.Current {
					m := p.RegionMap
					if m == nil {
						t.Fatalf("map %d: %v", u.ID, p.Err)
					}
					free := 0
					for _, r := range m.Free {
						free += int(r.N)
					}
					if free != u.Count || m.Region != 0 || m.Pages != inspect.RegionPages(testPageSize) {
						t.Errorf("map %d: %+v lists %d free, walk says %d", u.ID, m, free, u.Count)
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []rivet.PageKind{rivet.PageMeta, rivet.PageRegionMap, rivet.PageBranch, rivet.PageLeaf, rivet.PageBlob} {
		if seen[k] == 0 {
			t.Errorf("the file has no %v page to decode: %v", k, seen)
		}
	}
	if len(leafKeys) != 300 {
		t.Errorf("leaves of users hold %d keys, want 300", len(leafKeys))
	}
	if want := bytes.Repeat([]byte("0123456789"), 2000); !bytes.Equal(bigPayload, want) {
		t.Errorf("blob payloads join to %d bytes, not the value", len(bigPayload))
	}
}

func TestDecodePageDamage(t *testing.T) {
	if _, err := inspect.DecodePage(make([]byte, 1000), 5, 1000, 10); err == nil {
		t.Error("page size 1000 accepted")
	}
	if _, err := inspect.DecodePage(make([]byte, 512), 5, testPageSize, 10); err == nil {
		t.Error("a short buffer accepted")
	}
	p, err := inspect.DecodePage(make([]byte, testPageSize), 5, testPageSize, 10)
	if err != nil || !p.Zero || p.Err != nil {
		t.Errorf("zero page: %+v, %v", p, err)
	}
	// A leaf header over garbage: the header is reported, the contents
	// are corrupt.
	b := make([]byte, testPageSize)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	page.PutHeader(b, page.Header{Type: page.TypeLeaf, Count: 9999, ID: 5, Txid: 3})
	p, err = inspect.DecodePage(b, 5, testPageSize, 10)
	if err != nil || p.Header.Type != inspect.TypeLeaf || p.Header.Count != 9999 || !errors.Is(p.Err, rerrors.ErrCorrupt) {
		t.Errorf("leaf over garbage: %+v, %v", p, err)
	}
	if got := inspect.PageType(99).String(); got != "type(99)" {
		t.Errorf("PageType(99) = %q", got)
	}
}

// txRoot adapts a rivet transaction's root and buckets to WalkBucket.
type txRoot struct{ tx *rivet.Tx }

func (r txRoot) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return r.tx.ForEach(func(name []byte, _ *rivet.Bucket) error { return fn(name, nil, true) })
}
func (r txRoot) Bucket(name []byte) inspect.WalkBucket {
	if b := r.tx.Bucket(name); b != nil {
		return bucket{b}
	}
	return nil
}
func (r txRoot) Sequence() uint64 { return 0 }

type bucket struct{ b *rivet.Bucket }

func (b bucket) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return b.b.ForEach(func(k, v []byte) error { return fn(k, v, v == nil && b.b.Bucket(k) != nil) })
}
func (b bucket) Bucket(name []byte) inspect.WalkBucket {
	if c := b.b.Bucket(name); c != nil {
		return bucket{c}
	}
	return nil
}
func (b bucket) Sequence() uint64 { return b.b.Sequence() }

func fileDigest(t *testing.T, path string) *inspect.Digest {
	t.Helper()
	db, err := rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var d *inspect.Digest
	err = db.View(func(tx *rivet.Tx) error {
		d, err = inspect.DigestOf(txRoot{tx})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDigest(t *testing.T) {
	a, b := fileDigest(t, makeFile(t, 50)), fileDigest(t, makeFile(t, 50))
	if a.Sum() != b.Sum() || a.Keys != 51 || a.Buckets != 2 {
		t.Errorf("same contents: %s (%d keys, %d buckets), %s", a.Sum(), a.Keys, a.Buckets, b.Sum())
	}
	if c := fileDigest(t, makeFile(t, 49)); c.Sum() == a.Sum() {
		t.Error("one key fewer, same digest")
	}
	// The stream: users, its keys, nested (sequence 7) with big, the ends.
	d := inspect.NewDigest()
	var kinds []inspect.EntryKind
	path := makeFile(t, 2)
	db, err := rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *rivet.Tx) error {
		return inspect.Walk(txRoot{tx}, func(e inspect.Entry) error {
			if e.Kind == inspect.EntryBucket && string(e.Key) == "nested" && e.Seq != 7 {
				t.Errorf("nested bucket's sequence %d", e.Seq)
			}
			kinds = append(kinds, e.Kind)
			d.Add(e)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []inspect.EntryKind{inspect.EntryBucket, inspect.EntryKV, inspect.EntryKV, inspect.EntryBucket, inspect.EntryKV, inspect.EntryEnd, inspect.EntryEnd}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("stream kinds %c, want %c", kinds, want)
	}
	if d.Sum() != fileDigest(t, path).Sum() {
		t.Error("Walk and Add disagree with DigestOf")
	}
}

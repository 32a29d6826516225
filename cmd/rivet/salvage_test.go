package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
	bolt "go.etcd.io/bbolt"
)

// contents flattens a file of either format into "a/b\x00key" -> value
// and "a/b/" -> "seq=N" for buckets, through the read commands' view.
func contents(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := openView(path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	var walk func(b bucketView, prefix string) error
	walk = func(b bucketView, prefix string) error {
		return b.ForEach(func(k, v []byte, isBucket bool) error {
			if isBucket {
				child := b.Bucket(k)
				p := prefix + string(k) + "/"
				out[p] = fmt.Sprintf("seq=%d", child.Sequence())
				return walk(child, p)
			}
			out[strings.TrimSuffix(prefix, "/")+"\x00"+string(k)] = string(v)
			return nil
		})
	}
	if err := f.View(func(root bucketView) error { return walk(root, "") }); err != nil {
		t.Fatal(err)
	}
	return out
}

// lossLine matches the ranges salvage prints.
var lossLine = regexp.MustCompile(`(?m)^lost: bucket (\S+)(?: keys \[([^,]+), ([^)]+)\)| all keys| key (\S+)) \(page \d+: .*\)$`)

type printedLoss struct{ bucket, from, to, key string }

func parseLosses(t *testing.T, out string) []printedLoss {
	t.Helper()
	var ls []printedLoss
	for _, m := range lossLine.FindAllStringSubmatch(out, -1) {
		l := printedLoss{bucket: m[1], from: m[2], to: m[3], key: m[4]}
		if m[2] == "" && m[4] == "" {
			l.from, l.to = "first key", "end"
		}
		ls = append(ls, l)
	}
	if got := strings.Count(out, "\nlost: "); got != len(ls) {
		t.Fatalf("%d lost lines, %d parsed:\n%s", got, len(ls), out)
	}
	return ls
}

func (l printedLoss) covers(bucket, key string) bool {
	if l.key != "" {
		return bucket == l.bucket && key == l.key || strings.HasPrefix(bucket+"/", l.bucket+"/"+l.key+"/")
	}
	k := key
	switch {
	case bucket == l.bucket:
	case strings.HasPrefix(bucket, l.bucket+"/"):
		k = strings.SplitN(strings.TrimPrefix(bucket, l.bucket+"/"), "/", 2)[0]
	default:
		return false
	}
	return (l.from == "first key" || k >= l.from) && (l.to == "end" || k < l.to)
}

// wantRescued checks NEW against the undamaged contents: NEW passes
// Check, holds nothing that was not there, and every entry it lacks is
// covered by a printed loss. It returns how many entries are missing.
func wantRescued(t *testing.T, orig map[string]string, newPath, out string) int {
	t.Helper()
	rivetCheckFile(t, newPath)
	got := contents(t, newPath)
	for k, v := range got {
		if w, ok := orig[k]; !ok || w != v {
			t.Fatalf("NEW has %q = %.40q; the original %.40q (present %t)", k, v, w, ok)
		}
	}
	losses := parseLosses(t, out)
	missing := 0
	for k := range orig {
		if _, ok := got[k]; ok {
			continue
		}
		missing++
		bucket, key, isKey := strings.Cut(k, "\x00")
		if !isKey {
			p := strings.Split(strings.TrimSuffix(k, "/"), "/")
			bucket, key = strings.Join(p[:len(p)-1], "/"), p[len(p)-1]
		}
		covered := false
		for _, l := range losses {
			covered = covered || l.covers(bucket, key)
		}
		if !covered {
			t.Fatalf("%q is missing from NEW and no printed loss covers it:\n%s", k, out)
		}
	}
	return missing
}

// salvageRivetFixture builds a rivet file of 1 KiB pages: bucket users
// (2,000 keys: a branch root over branches over leaves) holding a nested
// bucket logs with a blob value and an inline bucket tiny, and a bucket
// other. It returns the path.
func salvageRivetFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.rivet")
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *rivet.Tx) error {
		users, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := users.Put(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "value-%d", i)); err != nil {
				return err
			}
		}
		logs, err := users.CreateBucket([]byte("logs"))
		if err != nil {
			return err
		}
		if err := logs.SetSequence(5); err != nil {
			return err
		}
		if err := logs.Put([]byte("big"), bytes.Repeat([]byte("B"), 20000)); err != nil {
			return err
		}
		if err := logs.Put([]byte("small"), []byte("s")); err != nil {
			return err
		}
		tiny, err := users.CreateBucket([]byte("tiny"))
		if err != nil {
			return err
		}
		if err := tiny.Put([]byte("t"), []byte("v")); err != nil {
			return err
		}
		other, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		return other.Put([]byte("x"), []byte("y"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// rimg is a rivet file's bytes with helpers to find pages.
type rimg struct {
	t  *testing.T
	b  []byte
	ps int
}

func (r *rimg) newestMeta() (*inspect.Meta, int) {
	m0, err0 := inspect.DecodeMeta(0, r.b[:r.ps])
	m1, err1 := inspect.DecodeMeta(1, r.b[r.ps:2*r.ps])
	if err0 != nil || err1 != nil {
		r.t.Fatalf("metas: %v, %v", err0, err1)
	}
	if m1.Txid > m0.Txid {
		return m1, 1
	}
	return m0, 0
}

func (r *rimg) node(id uint64) *inspect.Node {
	p, err := inspect.DecodePage(r.b[int(id)*r.ps:], id, r.ps, uint64(len(r.b)/r.ps))
	if err == nil && p.Err != nil {
		err = p.Err
	}
	if err == nil && (p.Node == nil || p.Node.Err != nil) {
		err = fmt.Errorf("not a whole node: %+v", p)
	}
	if err != nil {
		r.t.Fatalf("node %d: %v", id, err)
	}
	return p.Node
}

// value returns the leaf holding key in the tree rooted at root, and
// key's element there.
func (r *rimg) value(root uint64, key string) (uint64, inspect.Element) {
	id, n := root, r.node(root)
	for !n.Leaf {
		// The last separator at or below key leads to it.
		i := 0
		for j, e := range n.Elements {
			if string(e.Key) > key {
				break
			}
			i = j
		}
		id = n.Elements[i].Child.ID
		n = r.node(id)
	}
	for _, e := range n.Elements {
		if string(e.Key) == key {
			return id, e
		}
	}
	r.t.Fatalf("key %q not found", key)
	return 0, inspect.Element{}
}

func (r *rimg) bucketRoot(parent uint64, name string) uint64 {
	_, e := r.value(parent, name)
	if e.Bucket == nil {
		r.t.Fatalf("%q is not a bucket: %+v", name, e)
	}
	return e.Bucket.Root.ID
}

func (r *rimg) write(path string) {
	if err := os.WriteFile(path, r.b, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// TestSalvageRivet damages a rivet file in each of the hostile tests' ways
// — a byte flipped in a leaf, in a branch, in the newest meta, in a blob —
// and salvages it: the printed losses name the bucket and range (or key),
// NEW passes Check, and every entry outside the losses is in NEW.
func TestSalvageRivet(t *testing.T) {
	clean := salvageRivetFixture(t)
	orig := contents(t, clean)
	cleanBytes, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		damage func(r *rimg) string // returns a string the output must hold
		lost   bool                 // entries must be missing
	}{
		{"leaf", func(r *rimg) string {
			m, _ := r.newestMeta()
			leaf, _ := r.value(r.bucketRoot(m.Root.ID, "users"), "k01000")
			r.b[int(leaf)*r.ps+600] ^= 0xff
			return "lost: bucket users keys [k0" // a range inside users
		}, true},
		{"branch", func(r *rimg) string {
			m, _ := r.newestMeta()
			root := r.node(r.bucketRoot(m.Root.ID, "users"))
			victim := root.Elements[1].Child.ID
			if r.node(victim).Leaf {
				t.Fatal("users is only two levels deep")
			}
			r.b[int(victim)*r.ps+inspect.HeaderSize+2] ^= 0x01
			from := root.Elements[1].Key
			return fmt.Sprintf("lost: bucket users keys [%s, ", from)
		}, true},
		{"meta", func(r *rimg) string {
			_, slot := r.newestMeta()
			r.b[slot*r.ps+100] ^= 0xff
			return fmt.Sprintf("note: meta %d: meta checksum", slot)
		}, false},
		{"blob", func(r *rimg) string {
			m, _ := r.newestMeta()
			logs := r.bucketRoot(r.bucketRoot(m.Root.ID, "users"), "logs")
			_, e := r.value(logs, "big")
			if e.Flags != inspect.FlagBlob || e.Blob == nil {
				t.Fatalf("big is not a blob: flags %d, %v", e.Flags, e.Err)
			}
			ref := e.Blob
			r.b[int(ref.First.ID)*r.ps+inspect.BlobPayloadStart+5] ^= 0x10
			return fmt.Sprintf("lost: bucket users/logs key big (page %d: blob checksum", ref.First.ID)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bad, dst := filepath.Join(dir, "bad.rivet"), filepath.Join(dir, "new.rivet")
			r := &rimg{t: t, b: append([]byte(nil), cleanBytes...), ps: 1024}
			want := c.damage(r)
			r.write(bad)
			sum := fileDigest(t, bad)
			out, errOut, code := runBin(t, "salvage", bad, dst)
			wantCode(t, code, 1, out, errOut)
			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
			if fileDigest(t, bad) != sum {
				t.Fatal("salvage changed BAD")
			}
			missing := wantRescued(t, orig, dst, out)
			if (missing > 0) != c.lost {
				t.Fatalf("%d entries missing\n%s", missing, out)
			}
			t.Logf("%d of %d entries missing; %s", missing, len(orig), strings.TrimSpace(out))
		})
	}
}

// TestSalvageHealthyFiles: a whole file of either format salvages
// completely, exit 0, and NEW has the same contents (rivet verify).
func TestSalvageHealthyFiles(t *testing.T) {
	for _, src := range []string{salvageRivetFixture(t), migrateFixture(t)} {
		dst := filepath.Join(t.TempDir(), "new.rivet")
		out, errOut, code := runBin(t, "salvage", src, dst)
		wantCode(t, code, 0, out, errOut)
		if !strings.Contains(out, "nothing lost") || strings.Contains(out, "lost:") || strings.Contains(out, "note:") {
			t.Fatalf("output:\n%s", out)
		}
		rivetCheckFile(t, dst)
		out, errOut, code = runBin(t, "verify", src, dst)
		wantCode(t, code, 0, out, errOut)
	}
	// NEW exists: refused without --force.
	src := salvageRivetFixture(t)
	out, errOut, code := runBin(t, "salvage", src, src)
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "already exists") {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

// salvageBboltFixture is one bbolt transaction (so no stale copies of
// pages lie in free space for the page scan below to find): bucket users
// with 20,000 keys (a branch root over branches over leaves), nested
// bucket users/logs with a sequence and an inline bucket users/tiny.
func salvageBboltFixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.bbolt")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		users, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		for i := range 20000 {
			if err := users.Put(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "value-%d", i)); err != nil {
				return err
			}
		}
		logs, err := users.CreateBucket([]byte("logs"))
		if err != nil {
			return err
		}
		if err := logs.SetSequence(9); err != nil {
			return err
		}
		for i := range 300 {
			if err := logs.Put(fmt.Appendf(nil, "l%03d", i), bytes.Repeat([]byte("L"), 50)); err != nil {
				return err
			}
		}
		tiny, err := users.CreateBucket([]byte("tiny"))
		if err != nil {
			return err
		}
		if err := tiny.Put([]byte("t"), []byte("v")); err != nil {
			return err
		}
		other, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		return other.Put([]byte("x"), []byte{})
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// bbolt's branch and leaf page flags (its page header's u16 at offset 8),
// for finding pages to damage.
const (
	boltBranchFlag = 0x01
	boltLeafFlag   = 0x02
)

// boltPages finds the pages of a bbolt image whose header names their own
// id and has the given flags, and which contain needle.
func boltPages(b []byte, flags uint16, needle string) []int {
	var ids []int
	for id := 2; (id+1)*4096 <= len(b); id++ {
		p := b[id*4096 : (id+1)*4096]
		if binary.LittleEndian.Uint64(p) == uint64(id) && binary.LittleEndian.Uint16(p[8:]) == flags && bytes.Contains(p, []byte(needle)) {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestSalvageBbolt damages a bbolt file's leaf and branch pages, where
// bbolt itself would panic or misread: salvage reports the lost ranges,
// NEW passes Check and holds every other entry.
func TestSalvageBbolt(t *testing.T) {
	clean := salvageBboltFixture(t)
	orig := contents(t, clean)
	cleanBytes, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		damage func(b []byte) string
	}{
		{"leaf id", func(b []byte) string {
			leaves := boltPages(b, boltLeafFlag, "k010000")
			if len(leaves) != 1 {
				t.Fatalf("%d leaves hold k010000", len(leaves))
			}
			binary.LittleEndian.PutUint64(b[leaves[0]*4096:], 123456)
			return fmt.Sprintf("(page %d: page header names page 123456)", leaves[0])
		}},
		{"leaf garbage", func(b []byte) string {
			leaves := boltPages(b, boltLeafFlag, "k015000")
			for i := 16; i < 4096; i += 7 {
				b[leaves[0]*4096+i] = byte(i)
			}
			return "lost: bucket users keys [k01"
		}},
		{"branch", func(b []byte) string {
			// A branch holding separators in the middle of users, below
			// the root (the root holds few keys, each branch below many).
			var victim int
			for _, id := range boltPages(b, boltBranchFlag, "k0") {
				if binary.LittleEndian.Uint16(b[id*4096+10:]) > 50 && victim == 0 {
					victim = id
				}
			}
			if victim == 0 {
				t.Fatal("no mid-level branch in users")
			}
			// Element 3's key offset far outside the page.
			binary.LittleEndian.PutUint32(b[victim*4096+16+3*16:], 1<<20)
			return fmt.Sprintf("(page %d: element 3's key or value lies outside the page)", victim)
		}},
		{"logs leaf", func(b []byte) string {
			leaves := boltPages(b, boltLeafFlag, "l150")
			binary.LittleEndian.PutUint16(b[leaves[0]*4096+8:], 0x10)
			return "lost: bucket users/logs"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bad, dst := filepath.Join(dir, "bad.bbolt"), filepath.Join(dir, "new.rivet")
			b := append([]byte(nil), cleanBytes...)
			want := c.damage(b)
			if err := os.WriteFile(bad, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runBin(t, "salvage", bad, dst)
			wantCode(t, code, 1, out, errOut)
			if !strings.Contains(out, want) {
				t.Fatalf("output lacks %q:\n%s", want, out)
			}
			missing := wantRescued(t, orig, dst, out)
			if missing == 0 || missing > len(orig)/2 {
				t.Fatalf("%d of %d entries missing:\n%s", missing, len(orig), out)
			}
			t.Logf("%d of %d entries missing; %s", missing, len(orig), strings.TrimSpace(out))
		})
	}
}

// TestSalvageBboltMetas: the newest bbolt meta damaged, then both.
func TestSalvageBboltMetas(t *testing.T) {
	clean := salvageBboltFixture(t)
	orig := contents(t, clean)
	b, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.bbolt")
	// Both metas: a flipped byte in each meta's freelist field fails its
	// checksum; the roots still name whole trees.
	b[16+32] ^= 0xff
	b[4096+16+32] ^= 0xff
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBin(t, "salvage", "--format", "bbolt", bad, filepath.Join(dir, "new.rivet"))
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(out, "no meta page is valid") || !strings.Contains(out, "checksum mismatch") {
		t.Fatalf("output:\n%s", out)
	}
	if missing := wantRescued(t, orig, filepath.Join(dir, "new.rivet"), out); missing != 0 {
		t.Fatalf("%d entries missing:\n%s", missing, out)
	}
}

// smallBbolt is a bbolt image of 1 KiB pages with nested, inline and
// empty buckets, for the random-damage test and the fuzz target.
func smallBbolt(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "small.bbolt")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, PageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		for i := range 600 {
			if err := a.Put(fmt.Appendf(nil, "key%04d", i), bytes.Repeat([]byte{byte(i)}, i%40)); err != nil {
				return err
			}
		}
		nested, err := a.CreateBucket([]byte("nested"))
		if err != nil {
			return err
		}
		for i := range 100 {
			if err := nested.Put(fmt.Appendf(nil, "n%03d", i), []byte("nested value")); err != nil {
				return err
			}
		}
		inline, err := a.CreateBucket([]byte("inline"))
		if err != nil {
			return err
		}
		if err := inline.Put([]byte("i"), []byte("v")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("empty")); err != nil {
			return err
		}
		return a.Put([]byte("big"), bytes.Repeat([]byte("B"), 3000))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// salvageImage is rivet.Salvage of the file image b, written to path.
func salvageImage(t testing.TB, path string, b []byte, v rivet.SalvageVisitor) (*rivet.SalvageReport, error) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return rivet.Salvage(path, v)
}

// countVisitor counts what a salvage hands over.
type countVisitor struct{ buckets, keys, bytes int64 }

func (c *countVisitor) Bucket(path [][]byte, _ uint64) error {
	c.buckets++
	c.bytes += int64(len(path[len(path)-1]))
	return nil
}

func (c *countVisitor) Put(_ [][]byte, k, v []byte) error {
	c.keys++
	c.bytes += int64(len(k) + len(v))
	return nil
}

// TestSalvageBboltRandomDamage: random byte flips and cuts anywhere in a
// bbolt file. The tolerant reader never panics, ends quickly and hands
// over no more than the file holds; the undamaged file salvages whole.
func TestSalvageBboltRandomDamage(t *testing.T) {
	img := smallBbolt(t)
	path := filepath.Join(t.TempDir(), "damaged.bbolt")
	var whole countVisitor
	rep, err := salvageImage(t, path, img, &whole)
	if err != nil || len(rep.Lost) != 0 || len(rep.Notes) != 0 || whole.keys != 702 || whole.buckets != 4 {
		t.Fatalf("undamaged: %v, lost %v, notes %v, %d keys %d buckets", err, rep.Lost, rep.Notes, whole.keys, whole.buckets)
	}
	r := rand.New(rand.NewSource(7))
	detected := 0
	for i := range 400 {
		b := append([]byte(nil), img...)
		for range 1 + r.Intn(4) {
			b[r.Intn(len(b))] ^= byte(1 + r.Intn(255))
		}
		if r.Intn(10) == 0 {
			b = b[:r.Intn(len(b))]
		}
		var v countVisitor
		start := time.Now()
		rep, err := salvageImage(t, path, b, &v)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("damage %d: salvage took %v", i, d)
		}
		if err != nil {
			detected++
			continue
		}
		if v.bytes > int64(len(b)) || rep.Keys != v.keys || rep.Buckets != v.buckets {
			t.Fatalf("damage %d: %d bytes from a %d-byte file; report %d keys %d buckets, visitor %d, %d", i, v.bytes, len(b), rep.Keys, rep.Buckets, v.keys, v.buckets)
		}
		if len(rep.Lost)+len(rep.Notes) > 0 {
			detected++
		}
	}
	t.Logf("400 damaged files: damage reported in %d", detected)
}

// FuzzSalvageBbolt: the tolerant bbolt reader on any bytes ends without
// panicking.
func FuzzSalvageBbolt(f *testing.F) {
	img := smallBbolt(f)
	f.Add(img, uint32(0), byte(0))
	f.Add(img, uint32(5*1024+20), byte(0x80))
	f.Add(img[:6*1024], uint32(3000), byte(1))
	f.Fuzz(func(t *testing.T, b []byte, off uint32, x byte) {
		b = append([]byte(nil), b...)
		if len(b) > 0 {
			b[int(off)%len(b)] ^= x
		}
		var v countVisitor
		if _, err := salvageImage(t, filepath.Join(t.TempDir(), "fuzz.bbolt"), b, &v); err == nil && v.bytes > int64(len(b)) {
			t.Fatalf("%d bytes from a %d-byte file", v.bytes, len(b))
		}
	})
}

package rivet

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rivetkv/rivet/internal/boltfile"
	"github.com/rivetkv/rivet/internal/digest"
	"github.com/rivetkv/rivet/internal/vfs"
)

// boltTestdata lists the bbolt files bbolt v1.5 made for these tests
// (bench's TestWriteBboltTestdata writes them, with the digest and counts
// of bbolt's own view of each beside it).
func boltTestdata(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("internal", "boltfile", "testdata", "*.bbolt"))
	if err != nil || len(paths) < 6 {
		t.Fatalf("bbolt testdata: %v, %d files", err, len(paths))
	}
	return paths
}

// boltWant is what bbolt itself saw in a testdata file.
type boltWant struct {
	sum                   string
	buckets, keys, nbytes int64
}

func readBoltWant(t testing.TB, path string) boltWant {
	t.Helper()
	b, err := os.ReadFile(path + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 4 {
		t.Fatalf("%s.digest: %q", path, b)
	}
	w := boltWant{sum: f[0]}
	for i, p := range []*int64{&w.buckets, &w.keys, &w.nbytes} {
		if *p, err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// copyToTemp copies a testdata file into a fresh temp dir.
func copyToTemp(t testing.TB, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// viewDigest returns the digest of what db's newest state holds, read
// through rivet's API.
func viewDigest(t testing.TB, db *DB) *digest.Digest {
	t.Helper()
	var d *digest.Digest
	if err := db.View(func(tx *Tx) error {
		var err error
		d, err = digest.Of(apiView{tx: tx})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// apiView walks a transaction through the public API only (Tx.ForEach,
// Bucket.ForEach, Bucket.Bucket, Bucket.Sequence).
type apiView struct {
	tx *Tx
	b  *Bucket
}

func (v apiView) ForEach(fn func(k, val []byte, isBucket bool) error) error {
	if v.b == nil {
		return v.tx.ForEach(func(name []byte, _ *Bucket) error { return fn(name, nil, true) })
	}
	return v.b.ForEach(func(k, val []byte) error {
		return fn(k, val, val == nil && v.b.Bucket(k) != nil)
	})
}

func (v apiView) Bucket(name []byte) digest.Bucket {
	var c *Bucket
	if v.b == nil {
		c = v.tx.Bucket(name)
	} else {
		c = v.b.Bucket(name)
	}
	if c == nil {
		return nil
	}
	return apiView{tx: v.tx, b: c}
}

func (v apiView) Sequence() uint64 {
	if v.b == nil {
		return 0
	}
	return v.b.Sequence()
}

// TestReadOnlyBboltFiles opens every bbolt testdata file read-only and
// checks that rivet's API shows what bbolt showed (digest of buckets,
// keys, values and sequences), that the reader's check finds nothing, that
// writes are refused, and that the file is left as it was.
func TestReadOnlyBboltFiles(t *testing.T) {
	for _, src := range boltTestdata(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			want := readBoltWant(t, src)
			path := copyToTemp(t, src)
			before, _ := os.ReadFile(path)
			db, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			d := viewDigest(t, db)
			if d.Sum() != want.sum || d.Buckets != want.buckets || d.Keys != want.keys || d.Bytes != want.nbytes {
				t.Fatalf("rivet sees %d buckets, %d keys, %d bytes, %s; bbolt saw %d, %d, %d, %s",
					d.Buckets, d.Keys, d.Bytes, d.Sum(), want.buckets, want.keys, want.nbytes, want.sum)
			}
			mustCheck(t, db)
			if err := db.Update(func(*Tx) error { return nil }); !errors.Is(err, ErrDatabaseReadOnly) {
				t.Fatalf("Update: %v, want ErrDatabaseReadOnly", err)
			}
			if _, err := db.Compact(t.Context()); !errors.Is(err, ErrDatabaseReadOnly) {
				t.Fatalf("Compact: %v, want ErrDatabaseReadOnly", err)
			}
			err = db.View(func(tx *Tx) error {
				if _, err := tx.Page(2); err == nil {
					return errors.New("Tx.Page on a bbolt file did not refuse")
				}
				if err := tx.WalkPages(func(PageUse) error { return nil }); err == nil {
					return errors.New("Tx.WalkPages on a bbolt file did not refuse")
				}
				var stats BucketStats
				err := tx.ForEach(func(name []byte, b *Bucket) error {
					stats.Add(b.Stats())
					if got := b.Inspect(); got.Name != "root" {
						return fmt.Errorf("Inspect of %q names it %q", name, got.Name)
					}
					return nil
				})
				if err != nil {
					return err
				}
				if int64(stats.KeyN) < want.keys {
					return fmt.Errorf("Stats count %d keys, the walk %d", stats.KeyN, want.keys)
				}
				if b := tx.Bucket([]byte("alpha")); b != nil {
					if b.Sequence() != 42 {
						return fmt.Errorf("alpha's sequence %d, want 42", b.Sequence())
					}
					if _, err := b.NextSequence(); !errors.Is(err, ErrTxNotWritable) {
						return fmt.Errorf("NextSequence in a read transaction: %v", err)
					}
				}
				return tx.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Fatal("a read-only Open changed the bbolt file")
			}
			if _, err := Open(path, 0o600, &Options{Timeout: time.Second}); err != ErrBboltFile {
				t.Fatalf("writable Open without ConvertBbolt: %v, want ErrBboltFile", err)
			}
		})
	}
}

// TestBboltCopiesAreBboltFiles: Tx.WriteTo and Tx.CopyFile of a bbolt file
// write a bbolt file (bbolt's own WriteTo layout) that reads back the same.
func TestBboltCopiesAreBboltFiles(t *testing.T) {
	src := filepath.Join("internal", "boltfile", "testdata", "mixed-4k.bbolt")
	want := readBoltWant(t, src)
	path := copyToTemp(t, src)
	db, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := t.TempDir()
	var size int64
	err = db.View(func(tx *Tx) error {
		size = tx.Size()
		var buf bytes.Buffer
		n, err := tx.WriteTo(&buf)
		if err != nil {
			return err
		}
		if n != tx.Size() || int64(buf.Len()) != n {
			return fmt.Errorf("WriteTo wrote %d bytes (%d buffered), Size is %d", n, buf.Len(), tx.Size())
		}
		if err := os.WriteFile(filepath.Join(dir, "writeto.bbolt"), buf.Bytes(), 0o600); err != nil {
			return err
		}
		return tx.CopyFile(filepath.Join(dir, "copyfile.bbolt"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"writeto.bbolt", "copyfile.bbolt"} {
		p := filepath.Join(dir, name)
		c, err := Open(p, 0o600, &Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := viewDigest(t, c); d.Sum() != want.sum {
			t.Errorf("%s: digest %s, want %s", name, d.Sum(), want.sum)
		}
		mustCheck(t, c)
		_ = c.Close()
		b, _ := os.ReadFile(p)
		if int64(len(b)) != size {
			t.Errorf("%s: %d bytes, want %d", name, len(b), size)
		}
		if ms, err := boltfile.ReadMetas(bytes.NewReader(b), int64(len(b))); err != nil || ms.Errs[0] != nil || ms.Errs[1] != nil {
			t.Errorf("%s: metas %+v, %v; want both valid", name, ms.Errs, err)
		}
	}
}

// TestReadOnlyBboltHoldsSharedLock: a read-only Open of a bbolt file holds
// a shared lock, so a bbolt writer (which takes an exclusive one) waits,
// while other readers do not.
func TestReadOnlyBboltHoldsSharedLock(t *testing.T) {
	path := copyToTemp(t, filepath.Join("internal", "boltfile", "testdata", "inline-4k.bbolt"))
	db, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := vfs.OS().OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.TryLock(true); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("exclusive lock beside a read-only Open: %v, want ErrLocked", err)
	}
	if err := f.TryLock(false); err != nil {
		t.Fatalf("shared lock beside a read-only Open: %v", err)
	}
	_ = f.Unlock()
	if _, err := Open(path, 0o600, &Options{ConvertBbolt: true, Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("converting Open beside a read-only Open: %v, want ErrTimeout", err)
	}
}

// boltModel is a bucket's contents as boltfile's own walk reads them,
// straight from the bbolt pages: keys in order, values, nested buckets.
type boltModel struct {
	keys    []string
	values  map[string]string // nested buckets have no entry
	seq     uint64
	buckets map[string]*boltModel
}

// readBoltModel builds the model of a bbolt file with boltfile.File.Walk,
// a reading of the format apart from the translation the API uses.
func readBoltModel(t testing.TB, path string) *boltModel {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := boltfile.ReadMetas(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := boltfile.New(data, ms.Meta)
	if err != nil {
		t.Fatal(err)
	}
	root := &boltModel{values: map[string]string{}, buckets: map[string]*boltModel{}}
	stack := []*boltModel{root}
	err = f.Walk(func(e digest.Entry) error {
		top := stack[len(stack)-1]
		switch e.Kind {
		case digest.KindBucket:
			c := &boltModel{values: map[string]string{}, buckets: map[string]*boltModel{}, seq: e.Seq}
			top.keys = append(top.keys, string(e.Key))
			top.buckets[string(e.Key)] = c
			stack = append(stack, c)
		case digest.KindEnd:
			stack = stack[:len(stack)-1]
		case digest.KindKV:
			top.keys = append(top.keys, string(e.Key))
			top.values[string(e.Key)] = string(e.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sort.StringsAreSorted(root.keys) {
		t.Fatal("model keys out of order")
	}
	return root
}

// TestBboltCursorModel moves cursors at random over every bucket of every
// bbolt testdata file, read through rivet, and compares each answer with
// the model boltfile's own walk builds: First, Last, Next, Prev (bbolt's
// rule at the ends: a cursor that finds nothing stays where it was), Seek
// to present, absent and outlying keys, Get, nested buckets' nil values
// and sequences.
func TestBboltCursorModel(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	ops := 0
	for _, src := range boltTestdata(t) {
		path := copyToTemp(t, src)
		model := readBoltModel(t, path)
		db, err := Open(path, 0o600, &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		err = db.View(func(tx *Tx) error {
			var walk func(name string, m *boltModel, b *Bucket) error
			walk = func(name string, m *boltModel, b *Bucket) error {
				if b.Sequence() != m.seq {
					return fmt.Errorf("%s: sequence %d, want %d", name, b.Sequence(), m.seq)
				}
				n, err := cursorModelOps(rng, m, b, 200)
				ops += n
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				for k, c := range m.buckets {
					cb := b.Bucket([]byte(k))
					if cb == nil {
						return fmt.Errorf("%s: nested bucket %q missing", name, k)
					}
					if err := walk(name+"/"+k, c, cb); err != nil {
						return err
					}
				}
				return nil
			}
			for k, c := range model.buckets {
				b := tx.Bucket([]byte(k))
				if b == nil {
					return fmt.Errorf("bucket %q missing", k)
				}
				if err := walk(k, c, b); err != nil {
					return err
				}
			}
			return tx.Err()
		})
		_ = db.Close()
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(src), err)
		}
	}
	if ops < 10000 {
		t.Fatalf("only %d cursor operations compared", ops)
	}
	t.Logf("%d cursor operations compared with the model", ops)
}

// cursorModelOps runs n random operations on b and on the model m.
func cursorModelOps(rng interface {
	Intn(int) int
	Read([]byte) (int, error)
}, m *boltModel, b *Bucket, n int) (int, error) {
	keys := m.keys
	c := b.Cursor()
	pos := -1 // the model cursor's index; -1 before any positioning move
	check := func(op string, k, v []byte) error {
		if pos < 0 || pos >= len(keys) {
			if k != nil {
				return fmt.Errorf("%s: got %q, want nothing", op, k)
			}
			return nil
		}
		wk := keys[pos]
		if string(k) != wk {
			return fmt.Errorf("%s: got key %q, want %q", op, k, wk)
		}
		wv, plain := m.values[wk]
		if !plain && v != nil || plain && string(v) != wv || plain && v == nil {
			return fmt.Errorf("%s at %q: value of %d bytes (nil %t), want %d (bucket %t)", op, k, len(v), v == nil, len(wv), !plain)
		}
		return nil
	}
	randomKey := func() []byte {
		switch r := rng.Intn(4); {
		case r < 2 && len(keys) > 0:
			return []byte(keys[rng.Intn(len(keys))])
		case r == 2 && len(keys) > 0:
			// Just after a present key: absent, between two.
			return append([]byte(keys[rng.Intn(len(keys))]), 0)
		default:
			k := make([]byte, rng.Intn(9))
			_, _ = rng.Read(k)
			return k
		}
	}
	for i := 0; i < n; i++ {
		var err error
		switch op := rng.Intn(7); op {
		case 0:
			k, v := c.First()
			pos = 0
			if len(keys) == 0 {
				pos = -1
			}
			err = check("First", k, v)
		case 1:
			k, v := c.Last()
			pos = len(keys) - 1
			err = check("Last", k, v)
		case 2, 3:
			k, v := c.Next()
			if pos >= 0 && pos+1 < len(keys) {
				pos++
				err = check("Next", k, v)
			} else if k != nil {
				err = fmt.Errorf("Next at the end returned %q", k)
			}
		case 4:
			k, v := c.Prev()
			if pos > 0 && pos <= len(keys) {
				pos--
				err = check("Prev", k, v)
			} else if k != nil {
				err = fmt.Errorf("Prev at the start returned %q", k)
			}
		case 5:
			seek := randomKey()
			k, v := c.Seek(seek)
			pos = sort.SearchStrings(keys, string(seek))
			err = check(fmt.Sprintf("Seek(%q)", seek), k, v)
			if pos == len(keys) && len(keys) == 0 {
				pos = -1
			}
		case 6:
			k := randomKey()
			got := b.Get(k)
			wv, plain := m.values[string(k)]
			if plain && (got == nil || string(got) != wv) || !plain && got != nil {
				err = fmt.Errorf("Get(%q) = %d bytes (nil %t), want %d (present %t)", k, len(got), got == nil, len(wv), plain)
			}
		}
		if err != nil {
			return i, err
		}
	}
	return n, nil
}

// TestConvertBboltFiles converts every bbolt testdata file at Open
// (Options.ConvertBbolt): the result is a rivet file holding what bbolt
// saw, that passes Check and takes writes; the bbolt file is kept, byte for
// byte, as PATH.bbolt; no temporary file is left; a second Open opens the
// rivet file without converting anything.
func TestConvertBboltFiles(t *testing.T) {
	for _, src := range boltTestdata(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			want := readBoltWant(t, src)
			path := copyToTemp(t, src)
			orig, _ := os.ReadFile(path)
			var log logRecorder
			db, err := Open(path, 0o600, &Options{ConvertBbolt: true, Logger: &log})
			if err != nil {
				t.Fatal(err)
			}
			if d := viewDigest(t, db); d.Sum() != want.sum {
				t.Fatalf("converted file: %d buckets, %d keys, %s; bbolt saw %d, %d, %s", d.Buckets, d.Keys, d.Sum(), want.buckets, want.keys, want.sum)
			}
			mustCheck(t, db)
			if err := db.Update(func(tx *Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("after conversion"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k"), []byte("v"))
			}); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path + BboltBackupSuffix); err != nil || !bytes.Equal(b, orig) {
				t.Fatalf("backup: %v, equal to the bbolt file %t", err, bytes.Equal(b, orig))
			}
			if _, err := os.Stat(path + convertingSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary file left: %v", err)
			}
			if !log.has("converted from bbolt") {
				t.Errorf("no conversion logged: %q", log.lines())
			}
			db, err = Open(path, 0o600, &Options{ConvertBbolt: true})
			if err != nil {
				t.Fatal(err)
			}
			mustCheck(t, db)
			if err := db.View(func(tx *Tx) error {
				if tx.Bucket([]byte("after conversion")) == nil {
					return errors.New("the write after the conversion is gone")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
		})
	}
}

// logRecorder is a Logger that keeps what it is told.
type logRecorder struct {
	mu  sync.Mutex
	buf []string
}

func (l *logRecorder) add(s string) {
	l.mu.Lock()
	l.buf = append(l.buf, s)
	l.mu.Unlock()
}

func (l *logRecorder) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.buf...)
}

func (l *logRecorder) has(s string) bool {
	for _, line := range l.lines() {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func (l *logRecorder) Debug(v ...any)                   { l.add(fmt.Sprint(v...)) }
func (l *logRecorder) Debugf(format string, v ...any)   { l.add(fmt.Sprintf(format, v...)) }
func (l *logRecorder) Error(v ...any)                   { l.add(fmt.Sprint(v...)) }
func (l *logRecorder) Errorf(format string, v ...any)   { l.add(fmt.Sprintf(format, v...)) }
func (l *logRecorder) Info(v ...any)                    { l.add(fmt.Sprint(v...)) }
func (l *logRecorder) Infof(format string, v ...any)    { l.add(fmt.Sprintf(format, v...)) }
func (l *logRecorder) Warning(v ...any)                 { l.add(fmt.Sprint(v...)) }
func (l *logRecorder) Warningf(format string, v ...any) { l.add(fmt.Sprintf(format, v...)) }
func (l *logRecorder) Fatal(v ...any)                   { l.add(fmt.Sprint(v...)) }
func (l *logRecorder) Fatalf(format string, v ...any)   { l.add(fmt.Sprintf(format, v...)) }
func (l *logRecorder) Panic(v ...any)                   { l.add(fmt.Sprint(v...)) }
func (l *logRecorder) Panicf(format string, v ...any)   { l.add(fmt.Sprintf(format, v...)) }

// TestBboltConcurrentReaders reads one bbolt file from several goroutines
// at once, each in its own transactions, through a cache small enough that
// every goroutine's reads evict the others' nodes, and compares every
// answer with the model (run with -race: the shared cache is the point).
func TestBboltConcurrentReaders(t *testing.T) {
	defer func(n int) { bboltCacheBytes = n }(bboltCacheBytes)
	bboltCacheBytes = 64 << 10
	src := filepath.Join("internal", "boltfile", "testdata", "mixed-1k.bbolt")
	path := copyToTemp(t, src)
	model := readBoltModel(t, path)
	db, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seed := testSeed(t)
	const readers = 6
	errs := make(chan error, readers)
	for g := 0; g < readers; g++ {
		go func(g int) {
			rng := rand.New(rand.NewSource(seed + int64(g)))
			for round := 0; round < 20; round++ {
				err := db.View(func(tx *Tx) error {
					for name, m := range model.buckets {
						b := tx.Bucket([]byte(name))
						if b == nil {
							return fmt.Errorf("bucket %q missing", name)
						}
						if _, err := cursorModelOps(rng, m, b, 100); err != nil {
							return fmt.Errorf("%s: %w", name, err)
						}
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < readers; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestBboltFileElsewhere: Salvage reads a whole bbolt file whole; a
// CloneFile of one is a bbolt file holding what it held; Open of a bbolt
// file reads a few hundred bytes, not the file.
func TestBboltFileElsewhere(t *testing.T) {
	src := filepath.Join("internal", "boltfile", "testdata", "freed-4k.bbolt")
	want := readBoltWant(t, src)
	path := copyToTemp(t, src)
	if rep, err := Salvage(path, &dumpVisitor{out: map[string]string{}}); err != nil || len(rep.Lost)+len(rep.Notes) != 0 || rep.Buckets != want.buckets || rep.Keys != want.keys {
		t.Fatalf("Salvage of a bbolt file: %+v, %v; want %d buckets, %d keys", rep, err, want.buckets, want.keys)
	}
	clone := path + ".clone"
	if _, err := CloneFile(path, clone, nil); err != nil {
		t.Fatal(err)
	}
	db, err := Open(clone, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if db.bolt == nil || viewDigest(t, db).Sum() != want.sum {
		t.Fatalf("the clone: a bbolt file %t, digest %s, want %s", db.bolt != nil, viewDigest(t, db).Sum(), want.sum)
	}
	_ = db.Close()

	cfs, _ := memBoltFS(t, src, "/d/f.db")
	counts := vfs.NewCounting(cfs)
	db, err = openFS(counts, "/d/f.db", 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	size, _ := readFS(cfs, "/d/f.db")
	c := counts.Snapshot()
	if c.ReadBytes > 4096 {
		t.Fatalf("Open of a %d-byte bbolt file read %d bytes in %d calls", len(size), c.ReadBytes, c.ReadCalls)
	}
	t.Logf("Open of a %d-byte bbolt file read %d bytes in %d calls", len(size), c.ReadBytes, c.ReadCalls)
}

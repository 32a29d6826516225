package bench

import (
	"encoding/binary"
	"flag"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
	bolt "go.etcd.io/bbolt"
)

// boltScaleBytes sizes TestBboltReadScale's bbolt file (0: skip it).
var boltScaleBytes = flag.Int64("rivet.bbolt-scale", 0, "size in bytes of the bbolt file TestBboltReadScale builds and reads (e.g. 1073741824); 0 skips it")

// TestBboltReadScale measures rivet reading a bbolt file it has not
// converted against bbolt reading the same file, side by side in one
// process, in interleaved rounds: Open, random Gets, a full cursor scan,
// the structural check, memory, and the conversion at Open against bbolt's
// own offline Compact of the same file. It prints each figure and the
// ratio rivet ÷ bbolt.
//
//	go test -run TestBboltReadScale -rivet.bbolt-scale=1073741824 -v -timeout 1h
func TestBboltReadScale(t *testing.T) {
	if *boltScaleBytes <= 0 {
		t.Skip("run with -rivet.bbolt-scale=BYTES")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "scale.bbolt")
	keys := buildScaleFile(t, path, *boltScaleBytes)
	fi, _ := os.Stat(path)
	t.Logf("bbolt file: %d MiB, %d keys", fi.Size()>>20, len(keys))

	rng := rand.New(rand.NewSource(7))
	gets := make([][]byte, 200_000)
	for i := range gets {
		gets[i] = keys[rng.Intn(len(keys))]
	}
	type engine struct {
		name  string
		open  func() (io.Closer, error)
		get   func(db io.Closer, keys [][]byte) (int, error)
		scan  func(db io.Closer) (int, error)
		check func(db io.Closer) (int, error)
	}
	engines := []engine{
		{
			name: "rivet",
			open: func() (io.Closer, error) { return rivet.Open(path, 0o600, &rivet.Options{ReadOnly: true}) },
			get: func(c io.Closer, keys [][]byte) (int, error) {
				found := 0
				err := c.(*rivet.DB).View(func(tx *rivet.Tx) error {
					b := tx.Bucket(scaleBucket)
					for _, k := range keys {
						if b.Get(k) != nil {
							found++
						}
					}
					return nil
				})
				return found, err
			},
			scan: func(c io.Closer) (int, error) {
				n := 0
				err := c.(*rivet.DB).View(func(tx *rivet.Tx) error {
					cur := tx.Bucket(scaleBucket).Cursor()
					for k, v := cur.First(); k != nil; k, v = cur.Next() {
						n += len(k) + len(v)
					}
					return nil
				})
				return n, err
			},
			check: func(c io.Closer) (int, error) {
				n := 0
				err := c.(*rivet.DB).View(func(tx *rivet.Tx) error {
					for range tx.Check() {
						n++
					}
					return nil
				})
				return n, err
			},
		},
		{
			name: "bbolt",
			open: func() (io.Closer, error) { return bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true}) },
			get: func(c io.Closer, keys [][]byte) (int, error) {
				found := 0
				err := c.(*bolt.DB).View(func(tx *bolt.Tx) error {
					b := tx.Bucket(scaleBucket)
					for _, k := range keys {
						if b.Get(k) != nil {
							found++
						}
					}
					return nil
				})
				return found, err
			},
			scan: func(c io.Closer) (int, error) {
				n := 0
				err := c.(*bolt.DB).View(func(tx *bolt.Tx) error {
					cur := tx.Bucket(scaleBucket).Cursor()
					for k, v := cur.First(); k != nil; k, v = cur.Next() {
						n += len(k) + len(v)
					}
					return nil
				})
				return n, err
			},
			check: func(c io.Closer) (int, error) {
				n := 0
				err := c.(*bolt.DB).View(func(tx *bolt.Tx) error {
					for range tx.Check() {
						n++
					}
					return nil
				})
				return n, err
			},
		},
	}
	const rounds = 3
	// times[figure][engine] holds one duration per round.
	figures := []string{"open+close", "random Get", "full scan", "check"}
	times := map[string][][]time.Duration{}
	for _, f := range figures {
		times[f] = make([][]time.Duration, len(engines))
	}
	scanAlloc := make([]uint64, len(engines))
	heapAfter := make([]uint64, len(engines))
	liveAfter := make([]uint64, len(engines))
	for r := 0; r < rounds; r++ {
		for i, e := range engines {
			const opens = 20
			start := time.Now()
			for j := 0; j < opens; j++ {
				db, err := e.open()
				if err != nil {
					t.Fatal(err)
				}
				_ = db.Close()
			}
			times["open+close"][i] = append(times["open+close"][i], time.Since(start)/opens)

			db, err := e.open()
			if err != nil {
				t.Fatal(err)
			}
			start = time.Now()
			found, err := e.get(db, gets)
			if err != nil || found != len(gets) {
				t.Fatalf("%s: %d of %d keys found, %v", e.name, found, len(gets), err)
			}
			times["random Get"][i] = append(times["random Get"][i], time.Since(start)/time.Duration(len(gets)))

			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			start = time.Now()
			n, err := e.scan(db)
			if err != nil || n == 0 {
				t.Fatalf("%s: scan %d bytes, %v", e.name, n, err)
			}
			times["full scan"][i] = append(times["full scan"][i], time.Since(start))
			runtime.ReadMemStats(&m1)
			scanAlloc[i] = m1.TotalAlloc - m0.TotalAlloc
			runtime.GC()
			runtime.ReadMemStats(&m1)
			heapAfter[i], liveAfter[i] = m1.HeapInuse, m1.HeapAlloc

			start = time.Now()
			problems, err := e.check(db)
			if err != nil || problems != 0 {
				t.Fatalf("%s: check: %d problems, %v", e.name, problems, err)
			}
			times["check"][i] = append(times["check"][i], time.Since(start))
			_ = db.Close()
		}
	}
	for _, f := range figures {
		med := make([]time.Duration, len(engines))
		for i := range engines {
			med[i] = median(times[f][i])
		}
		t.Logf("%-11s rivet %12v  bbolt %12v  rivet/bbolt %.2f  (medians of %d rounds)", f, med[0], med[1], float64(med[0])/float64(med[1]), rounds)
	}
	t.Logf("full scan allocated: rivet %d MiB, bbolt %d MiB; after it and a GC, live heap: rivet %d MiB, bbolt %d MiB; heap spans in use: rivet %d MiB, bbolt %d MiB (the test's key list is about 38 MiB per GiB of file)",
		scanAlloc[0]>>20, scanAlloc[1]>>20, liveAfter[0]>>20, liveAfter[1]>>20, heapAfter[0]>>20, heapAfter[1]>>20)

	// Conversion at Open against bbolt's own offline Compact of the file.
	conv := filepath.Join(dir, "convert.db")
	copyFile(t, path, conv)
	start := time.Now()
	db, err := rivet.Open(conv, 0o600, &rivet.Options{ConvertBbolt: true})
	if err != nil {
		t.Fatal(err)
	}
	convTime := time.Since(start)
	_ = db.Close()
	cfi, _ := os.Stat(conv)
	_ = os.Remove(conv + rivet.BboltBackupSuffix)
	_ = os.Remove(conv)
	src, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	dstPath := filepath.Join(dir, "compact.bbolt")
	dst, err := bolt.Open(dstPath, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := bolt.Compact(dst, src, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := dst.Sync(); err != nil {
		t.Fatal(err)
	}
	compactTime := time.Since(start)
	_ = dst.Close()
	_ = src.Close()
	dfi, _ := os.Stat(dstPath)
	t.Logf("convert at Open (copy, verify, check, backup link, rename): %v, %d MiB rivet file; bbolt's Compact into a new bbolt file: %v, %d MiB; ratio %.2f",
		convTime.Round(time.Millisecond), cfi.Size()>>20, compactTime.Round(time.Millisecond), dfi.Size()>>20, float64(convTime)/float64(compactTime))
}

var scaleBucket = []byte("scale")

// buildScaleFile writes a bbolt file of about size bytes: one bucket of
// 16-byte keys in random order (as most real files are built) and values
// of 100 to 400 bytes. It returns the keys.
func buildScaleFile(t *testing.T, path string, size int64) [][]byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: false})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewSource(1))
	var keys [][]byte
	val := make([]byte, 400)
	rng.Read(val)
	for {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= size {
			break
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(scaleBucket)
			if err != nil {
				return err
			}
			for i := 0; i < 50_000; i++ {
				k := make([]byte, 16)
				binary.BigEndian.PutUint64(k, rng.Uint64())
				binary.BigEndian.PutUint64(k[8:], uint64(len(keys)))
				if err := b.Put(k, val[:100+rng.Intn(300)]); err != nil {
					return err
				}
				keys = append(keys, k)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	return keys
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"testing"
)

// memBucket is a bucket in memory: plain values and nested buckets.
type memBucket struct {
	seq     uint64
	values  map[string]string
	buckets map[string]*memBucket
}

func (b *memBucket) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	var keys []string
	for k := range b.values {
		keys = append(keys, k)
	}
	for k := range b.buckets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if c, ok := b.buckets[k]; ok && c != nil {
			if err := fn([]byte(k), nil, true); err != nil {
				return err
			}
			continue
		}
		if _, ok := b.buckets[k]; ok {
			// A bucket entry that cannot be opened.
			if err := fn([]byte(k), nil, true); err != nil {
				return err
			}
			continue
		}
		if err := fn([]byte(k), []byte(b.values[k]), false); err != nil {
			return err
		}
	}
	return nil
}

func (b *memBucket) Bucket(name []byte) Bucket {
	if c := b.buckets[string(name)]; c != nil {
		return c
	}
	return nil
}

func (b *memBucket) Sequence() uint64 { return b.seq }

func sample() *memBucket {
	return &memBucket{buckets: map[string]*memBucket{
		"b": {seq: 7, values: map[string]string{"k2": "", "k1": "v1"}, buckets: map[string]*memBucket{
			"n": {values: map[string]string{"x": "y"}},
		}},
		"a": {},
	}}
}

// TestDigestEncoding rebuilds the documented encoding by hand and checks
// the walk's order and the digest against it.
func TestDigestEncoding(t *testing.T) {
	var got []string
	d := New()
	err := Walk(sample(), func(e Entry) error {
		got = append(got, string(e.Kind)+string(e.Key))
		d.Add(e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Ba", "E", "Bb", "Kk1", "Kk2", "Bn", "Kx", "E", "E"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stream %v, want %v", got, want)
	}
	var buf bytes.Buffer
	bucket := func(name string, seq uint64) {
		buf.WriteByte('B')
		buf.WriteByte(byte(len(name)))
		buf.WriteString(name)
		buf.Write([]byte{0, 0, 0, 0, 0, 0, 0, byte(seq)})
	}
	kv := func(k, v string) {
		buf.WriteByte('K')
		buf.WriteByte(byte(len(k)))
		buf.WriteString(k)
		buf.WriteByte(byte(len(v)))
		buf.WriteString(v)
	}
	bucket("a", 0)
	buf.WriteByte('E')
	bucket("b", 7)
	kv("k1", "v1")
	kv("k2", "")
	bucket("n", 0)
	kv("x", "y")
	buf.WriteByte('E')
	buf.WriteByte('E')
	sum := sha256.Sum256(buf.Bytes())
	if d.Sum() != hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s, want %x", d.Sum(), sum)
	}
	if d.Buckets != 3 || d.Keys != 3 || d.Bytes != int64(len("abnk1v1k2xy")) {
		t.Fatalf("counts %d buckets, %d keys, %d bytes", d.Buckets, d.Keys, d.Bytes)
	}
	o, err := Of(sample())
	if err != nil || o.Sum() != d.Sum() {
		t.Fatalf("Of = %s, %v; want %s", o.Sum(), err, d.Sum())
	}
}

// TestDigestDiffers: a changed value, key, sequence or bucket placement
// changes the digest.
func TestDigestDiffers(t *testing.T) {
	base, _ := Of(sample())
	changes := map[string]func(*memBucket){
		"value":    func(r *memBucket) { r.buckets["b"].values["k1"] = "v2" },
		"key":      func(r *memBucket) { r.buckets["b"].values["k3"] = "" },
		"sequence": func(r *memBucket) { r.buckets["b"].seq = 8 },
		"moved key": func(r *memBucket) {
			delete(r.buckets["b"].buckets["n"].values, "x")
			r.buckets["b"].values["x"] = "y"
		},
		"empty bucket": func(r *memBucket) { r.buckets["c"] = &memBucket{} },
	}
	for name, change := range changes {
		r := sample()
		change(r)
		d, err := Of(r)
		if err != nil {
			t.Fatal(err)
		}
		if d.Sum() == base.Sum() {
			t.Errorf("%s: digest unchanged", name)
		}
	}
}

func TestWalkErrors(t *testing.T) {
	r := sample()
	r.values = map[string]string{"top": "v"}
	if _, err := Of(r); !errors.Is(err, ErrKeyOutsideBucket) {
		t.Fatalf("a top-level key: %v", err)
	}
	// A cycle: a bucket that contains itself.
	c := &memBucket{buckets: map[string]*memBucket{}}
	c.buckets["self"] = c
	var we *WalkError
	if _, err := Of(&memBucket{buckets: map[string]*memBucket{"c": c}}); !errors.As(err, &we) || len(we.Path) != MaxNesting {
		t.Fatalf("a cycle: %v, want a WalkError at depth %d", err, MaxNesting)
	}
	// A bucket entry that does not open.
	r = sample()
	r.buckets["b"].buckets["gone"] = nil
	if _, err := Of(r); !errors.As(err, &we) || string(we.Key) != "gone" {
		t.Fatalf("an unopenable bucket: %v", err)
	}
}

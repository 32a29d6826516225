package inspect_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet/inspect"
)

// TestDetect: a rivet file's metas, bbolt files' metas in either byte
// order, and bytes of neither.
func TestDetect(t *testing.T) {
	img, err := os.ReadFile(makeFile(t, 50))
	if err != nil {
		t.Fatal(err)
	}
	if f := inspect.Detect(img); f != inspect.FormatRivet {
		t.Fatalf("rivet meta 0: %v", f)
	}
	if f := inspect.Detect(img[testPageSize:]); f != inspect.FormatRivet {
		t.Fatalf("rivet meta 1: %v", f)
	}
	bolts, err := filepath.Glob(filepath.Join("..", "internal", "boltfile", "testdata", "*.bbolt"))
	if err != nil || len(bolts) < 5 {
		t.Fatalf("bbolt fixtures: %v, %d", err, len(bolts))
	}
	for _, path := range bolts {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ps := int(binary.LittleEndian.Uint32(b[24:]))
		for _, meta := range [][]byte{b, b[ps:]} {
			if f := inspect.Detect(meta[:inspect.DetectSize]); f != inspect.FormatBbolt || !inspect.IsBbolt(meta) {
				t.Fatalf("%s: %v", path, f)
			}
			// As a big-endian machine writes the flags and magic.
			be := bytes.Clone(meta[:inspect.DetectSize])
			binary.BigEndian.PutUint16(be[8:], binary.LittleEndian.Uint16(be[8:]))
			binary.BigEndian.PutUint32(be[16:], binary.LittleEndian.Uint32(be[16:]))
			if !inspect.IsBbolt(be) {
				t.Fatalf("%s big-endian: not bbolt", path)
			}
			// Magic in one order, flags in the other: neither.
			binary.LittleEndian.PutUint32(be[16:], binary.BigEndian.Uint32(be[16:]))
			if inspect.IsBbolt(be) {
				t.Fatalf("%s: mixed byte orders taken for bbolt", path)
			}
			if inspect.IsBbolt(meta[:inspect.DetectSize-1]) {
				t.Fatalf("%s: %d bytes taken for bbolt", path, inspect.DetectSize-1)
			}
		}
		// A bbolt data page is not a meta.
		if inspect.Detect(b[2*ps:]) != inspect.FormatUnknown {
			t.Fatalf("%s page 2 detected", path)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, 64), []byte("RIV")} {
		if f := inspect.Detect(b); f != inspect.FormatUnknown || f.String() != "unknown" {
			t.Fatalf("%q: %v", b, f)
		}
	}
	if inspect.FormatRivet.String() != "rivet" || inspect.FormatBbolt.String() != "bbolt" {
		t.Fatal("format names")
	}
}

// FuzzDetect: Detect never panics; a format it names is one IsBbolt
// agrees with, and only the first DetectSize bytes count.
func FuzzDetect(f *testing.F) {
	f.Add([]byte("RIVT"))
	f.Add(append(make([]byte, 8), 4, 0, 0, 0, 0, 0, 0, 0, 0xED, 0xDA, 0x0C, 0xED))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := inspect.Detect(b)
		if inspect.IsBbolt(b) != (got == inspect.FormatBbolt) {
			t.Fatalf("IsBbolt disagrees with Detect (%v)", got)
		}
		if len(b) > inspect.DetectSize && inspect.Detect(b[:inspect.DetectSize]) != got {
			t.Fatal("bytes past DetectSize changed the verdict")
		}
	})
}

// Telling a rivet file from a bbolt one by its first bytes.
func ExampleDetect() {
	// The first bytes of a bbolt file written on a little-endian machine:
	// page 0's header (id 0, flags 0x04: meta) and the meta's magic.
	head := []byte{
		0, 0, 0, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0,
		0xED, 0xDA, 0x0C, 0xED,
	}
	fmt.Println(inspect.Detect(head))
	fmt.Println(inspect.Detect([]byte("RIVT")))
	fmt.Println(inspect.Detect([]byte("SQLite format 3\x00")))
	// Output:
	// bbolt
	// rivet
	// unknown
}

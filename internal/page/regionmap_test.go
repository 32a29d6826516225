package page

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// sampleFree returns a bitmap for region r with a few free pages, keeping
// the reserved bits (map slots, metas) clear.
func sampleFree(pageSize int, r uint64) []uint64 {
	free := make([]uint64, RegionMapWords(pageSize))
	free[0] = 0xF0F0_0000_0000_00F0 &^ regionReservedMask(pageSize, r)
	free[1] = 1
	free[len(free)-1] = 1 << 63 // the region's last page
	return free
}

func TestRegionMapRoundTrip(t *testing.T) {
	for _, ps := range []int{MinPageSize, DefaultPageSize, MaxPageSize} {
		for _, r := range []uint64{0, 1, 7} {
			for s := 0; s < 2; s++ {
				slot := MapSlot(ps, r, s)
				free := sampleFree(ps, r)
				buf := make([]byte, ps)
				EncodeRegionMap(buf, ps, slot, 42, free)

				h, err := ReadHeader(slot, buf)
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				for _, w := range free {
					want += bits.OnesCount64(w)
				}
				if h.Type != TypeRegionMap || h.ID != slot || h.Txid != 42 || int(h.Count) != want || h.Flags != 0 || h.Overflow != 0 {
					t.Fatalf("ps %d slot %d: header %+v, want count %d", ps, slot, h, want)
				}
				if h.Checksum != ChecksumSkipping(buf, offChecksum) {
					t.Fatalf("ps %d slot %d: stored checksum does not match", ps, slot)
				}
				txid, got, err := DecodeRegionMap(buf, ps, slot)
				if err != nil {
					t.Fatalf("ps %d slot %d: %v", ps, slot, err)
				}
				if txid != 42 || len(got) != len(free) {
					t.Fatalf("ps %d slot %d: txid %d, %d words", ps, slot, txid, len(got))
				}
				for i := range free {
					if got[i] != free[i] {
						t.Fatalf("ps %d slot %d: word %d = %#x, want %#x", ps, slot, i, got[i], free[i])
					}
				}
			}
		}
	}
}

// TestRegionMapBitOrder pins the byte layout: bit i of the bitmap is byte
// HeaderSize+i/8, bit i%8, LSB first.
func TestRegionMapBitOrder(t *testing.T) {
	ps := MinPageSize
	free := make([]uint64, RegionMapWords(ps))
	for _, i := range []uint64{4, 9, 63, 64, 100, RegionPages(ps) - 1} {
		free[i/64] |= 1 << (i % 64)
	}
	buf := make([]byte, ps)
	EncodeRegionMap(buf, ps, 2, 1, free)
	for i := uint64(0); i < RegionPages(ps); i++ {
		byteSet := buf[HeaderSize+i/8]&(1<<(i%8)) != 0
		wordSet := free[i/64]&(1<<(i%64)) != 0
		if byteSet != wordSet {
			t.Fatalf("bit %d: byte says %v, word says %v", i, byteSet, wordSet)
		}
	}
	if buf[HeaderSize] != 1<<4 || buf[HeaderSize+1] != 1<<1 {
		t.Fatalf("first bitmap bytes %#x %#x, want 0x10 0x02", buf[HeaderSize], buf[HeaderSize+1])
	}
}

func TestRegionMapWordsCoverRegion(t *testing.T) {
	for ps := MinPageSize; ps <= MaxPageSize; ps *= 2 {
		if uint64(RegionMapWords(ps))*64 != RegionPages(ps) {
			t.Fatalf("page size %d: %d words for %d pages", ps, RegionMapWords(ps), RegionPages(ps))
		}
	}
}

func TestDecodeRegionMapRejects(t *testing.T) {
	const ps = MinPageSize
	slot := MapSlot(ps, 1, 1)
	valid := make([]byte, ps)
	EncodeRegionMap(valid, ps, slot, 9, sampleFree(ps, 1))

	// reseal recomputes the checksum so that the check under test, not the
	// checksum, is what rejects the page.
	reseal := func(b []byte) {
		binary.LittleEndian.PutUint32(b[offChecksum:], ChecksumSkipping(b, offChecksum))
	}
	cases := []struct {
		name   string
		mutate func(b []byte) []byte
		slot   ID
	}{
		{"bad checksum", func(b []byte) []byte { b[HeaderSize+5] ^= 0x40; return b }, slot},
		{"checksum field flipped", func(b []byte) []byte { b[offChecksum] ^= 1; return b }, slot},
		{"wrong pgid", func(b []byte) []byte { return b }, MapSlot(ps, 1, 0)},
		{"pgid of another region", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[offPgid:], MapSlot(ps, 2, 1))
			reseal(b)
			return b
		}, slot},
		{"wrong type", func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[offType:], uint16(TypeLeaf))
			reseal(b)
			return b
		}, slot},
		{"flags set", func(b []byte) []byte { b[offFlags] = 1; reseal(b); return b }, slot},
		{"overflow set", func(b []byte) []byte { b[offOverflow] = 1; reseal(b); return b }, slot},
		{"count too high", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[offCount:], binary.LittleEndian.Uint32(b[offCount:])+1)
			reseal(b)
			return b
		}, slot},
		{"slot A bit set", func(b []byte) []byte {
			b[HeaderSize] |= 1 // page r·R+0 is slot A of region 1
			binary.LittleEndian.PutUint32(b[offCount:], binary.LittleEndian.Uint32(b[offCount:])+1)
			reseal(b)
			return b
		}, slot},
		{"slot B bit set", func(b []byte) []byte {
			b[HeaderSize] |= 2
			binary.LittleEndian.PutUint32(b[offCount:], binary.LittleEndian.Uint32(b[offCount:])+1)
			reseal(b)
			return b
		}, slot},
		{"short", func(b []byte) []byte { return b[:ps-1] }, slot},
		{"long", func(b []byte) []byte { return append(b, 0) }, slot},
		{"empty", func(b []byte) []byte { return nil }, slot},
		{"all zero", func(b []byte) []byte { return make([]byte, ps) }, slot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mutate(bytes.Clone(valid))
			_, free, err := DecodeRegionMap(b, ps, tc.slot)
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			var ce *rerrors.CorruptError
			if !errors.As(err, &ce) || ce.Page != tc.slot {
				t.Fatalf("err = %#v, want a CorruptError naming page %d", err, tc.slot)
			}
			if free != nil {
				t.Fatal("rejected page returned a bitmap")
			}
		})
	}
}

// TestDecodeRegionMapMetaBits checks that in region 0 the metas' bits (pages
// 0 and 1) must be clear too, not only the map slots'.
func TestDecodeRegionMapMetaBits(t *testing.T) {
	const ps = MinPageSize
	for _, bit := range []uint{0, 1, 2, 3} {
		b := make([]byte, ps)
		EncodeRegionMap(b, ps, 2, 1, make([]uint64, RegionMapWords(ps)))
		b[HeaderSize] |= 1 << bit
		binary.LittleEndian.PutUint32(b[offCount:], 1)
		binary.LittleEndian.PutUint32(b[offChecksum:], ChecksumSkipping(b, offChecksum))
		if _, _, err := DecodeRegionMap(b, ps, 2); !errors.Is(err, rerrors.ErrCorrupt) {
			t.Fatalf("page %d marked free in region 0: err = %v, want ErrCorrupt", bit, err)
		}
	}
	// Page 4 is region 0's first data page and may be free.
	free := make([]uint64, RegionMapWords(ps))
	free[0] = 1 << 4
	b := make([]byte, ps)
	EncodeRegionMap(b, ps, 3, 1, free)
	if _, _, err := DecodeRegionMap(b, ps, 3); err != nil {
		t.Fatalf("page 4 free: %v", err)
	}
}

func TestDecodeRegionMapCallerErrors(t *testing.T) {
	const ps = MinPageSize
	b := make([]byte, ps)
	EncodeRegionMap(b, ps, 2, 1, make([]uint64, RegionMapWords(ps)))
	if _, _, err := DecodeRegionMap(b, 1000, 2); err == nil {
		t.Fatal("invalid page size accepted")
	}
	for _, id := range []ID{0, 1, 4, RegionPages(ps) + 2, RegionPages(ps) - 1} {
		if _, _, err := DecodeRegionMap(b, ps, id); err == nil {
			t.Fatalf("page %d accepted as a map slot", id)
		}
	}
}

func TestEncodeRegionMapPanicsOnMisuse(t *testing.T) {
	const ps = MinPageSize
	ok := func() []uint64 { return make([]uint64, RegionMapWords(ps)) }
	cases := map[string]func(){
		"short buffer":  func() { EncodeRegionMap(make([]byte, ps-1), ps, 2, 1, ok()) },
		"word count":    func() { EncodeRegionMap(make([]byte, ps), ps, 2, 1, ok()[1:]) },
		"not a slot":    func() { EncodeRegionMap(make([]byte, ps), ps, 5, 1, ok()) },
		"meta bit set":  func() { f := ok(); f[0] = 1; EncodeRegionMap(make([]byte, ps), ps, 2, 1, f) },
		"bad page size": func() { EncodeRegionMap(make([]byte, 1000), 1000, 2, 1, ok()) },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			fn()
		})
	}
}

// FuzzDecodeRegionMap feeds arbitrary bytes to DecodeRegionMap. It must never
// panic, and any page it accepts must re-encode to the identical bytes (the
// format has no free-form fields). When reseal is set the fuzzer's bytes get a
// correct checksum first, so mutations reach the checks behind the checksum.
func FuzzDecodeRegionMap(f *testing.F) {
	const ps = MinPageSize
	for _, r := range []uint64{0, 1} {
		buf := make([]byte, ps)
		EncodeRegionMap(buf, ps, MapSlot(ps, r, 0), 3, sampleFree(ps, r))
		f.Add(buf, uint8(r*2), false)
		f.Add(buf, uint8(r*2), true)
		empty := make([]byte, ps)
		EncodeRegionMap(empty, ps, MapSlot(ps, r, 1), 1, make([]uint64, RegionMapWords(ps)))
		f.Add(empty, uint8(r*2+1), false)
	}
	f.Add([]byte{4, 0, 0, 0}, uint8(0), true)
	f.Add(make([]byte, ps), uint8(1), true)

	f.Fuzz(func(t *testing.T, data []byte, which uint8, reseal bool) {
		// which picks one of four slots: A or B of region 0 or region 1.
		r, s := uint64(which>>1&1), int(which&1)
		slot := MapSlot(ps, r, s)
		if reseal && len(data) >= HeaderSize {
			data = bytes.Clone(data)
			binary.LittleEndian.PutUint32(data[offChecksum:], ChecksumSkipping(data, offChecksum))
		}
		txid, free, err := DecodeRegionMap(data, ps, slot)
		if err != nil {
			if !errors.Is(err, rerrors.ErrCorrupt) {
				t.Fatalf("bad bytes gave a non-corruption error: %v", err)
			}
			return
		}
		again := make([]byte, ps)
		EncodeRegionMap(again, ps, slot, txid, free)
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted page does not round-trip")
		}
	})
}

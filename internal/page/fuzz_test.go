package page

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"reflect"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// Fuzz targets for every decoder in this package. The rule they enforce
// (docs/design.md §6, invariant 7): nothing read from disk panics, indexes
// out of range or allocates without bound; every rejection is a
// *errors.CorruptError naming the page (or, for metas, ErrInvalid /
// ErrVersionMismatch); everything accepted is internally consistent.

// fuzzPageSize maps a fuzzer byte to a supported page size.
func fuzzPageSize(b uint8) int { return MinPageSize << (b % 7) }

// maxRealHWM is the largest high-water mark a valid meta can carry for a page
// size (region count <= MaxRegions). Callers of the node and blob decoders
// only ever pass a validated HWM, so the fuzz targets stay below it.
func maxRealHWM(ps int) uint64 { return MaxRegions(ps) * RegionPages(ps) }

// wantCorrupt fails unless err is a *CorruptError naming page id.
func wantCorrupt(t *testing.T, what string, err error, id ID) {
	t.Helper()
	var ce *rerrors.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, rerrors.ErrCorrupt) {
		t.Fatalf("%s: error %v (%T) is not a *CorruptError", what, err, err)
	}
	if ce.Page != id {
		t.Fatalf("%s: CorruptError names page %d, want %d: %v", what, ce.Page, id, err)
	}
}

// sampleLeaf encodes a one-page leaf at id holding a plain value, a bucket
// record and a blob reference.
func sampleLeaf(ps int, id ID, txid uint64) []byte {
	buf := make([]byte, ps)
	EncodeLeaf(buf, ps, id, txid, []LeafElem{
		{Key: []byte("alpha"), Value: []byte("one")},
		{Flags: FlagBucket, Key: []byte("bucket"), Value: BucketRecord{Root: Ref{ID: 9, Txid: txid, Checksum: 0xdeadbeef}, Sequence: 7}.Encode()},
		{Flags: FlagBlob, Key: []byte("big"), Value: BlobRef{Length: 5000, First: ExtentRef{Ref: Ref{ID: 12, Txid: txid, Checksum: 1}, Pages: 2}}.Encode()},
		{Key: []byte("empty")},
	})
	return buf
}

// sampleBranch encodes a branch run of pages pages at id.
func sampleBranch(ps int, id ID, txid uint64, pages int) []byte {
	buf := make([]byte, ps*pages)
	EncodeBranch(buf, ps, id, txid, []BranchElem{
		{Key: []byte("a"), Child: Ref{ID: 5, Txid: txid, Checksum: 11}},
		{Key: []byte("m"), Child: Ref{ID: 6, Txid: txid - 1, Checksum: 12}},
		{Key: []byte("zz"), Child: Ref{ID: 7, Txid: 1, Checksum: 13}},
	})
	return buf
}

// readAllElems reads every element of an accepted node and checks what the
// accessors return against the node's bytes.
func readAllElems(t *testing.T, n Node, id ID) {
	t.Helper()
	run := n.Bytes()
	es := LeafElemSize
	if !n.IsLeaf() {
		es = BranchElemSize
	}
	if n.Count() <= 0 || HeaderSize+n.Count()*es > len(run) {
		t.Fatalf("accepted node with %d elements of %d bytes in a %d-byte run", n.Count(), es, len(run))
	}
	for i := 0; i < n.Count(); i++ {
		if !n.IsLeaf() {
			k, err := n.BranchKey(i)
			if err != nil {
				wantCorrupt(t, "BranchKey", err, id)
				continue
			}
			if len(k) > len(run)-HeaderSize || cap(k) != len(k) {
				t.Fatalf("branch key %d: %d bytes (cap %d) from a %d-byte run", i, len(k), cap(k), len(run))
			}
			_ = n.BranchChild(i)
			continue
		}
		flags, k, v, err := n.LeafElem(i)
		k2, err2 := n.LeafKey(i)
		if err2 == nil && err == nil && !bytes.Equal(k, k2) {
			t.Fatalf("leaf %d: LeafElem key %q, LeafKey %q", i, k, k2)
		}
		if err2 != nil {
			wantCorrupt(t, "LeafKey", err2, id)
		}
		if err != nil {
			wantCorrupt(t, "LeafElem", err, id)
			continue
		}
		if flags > FlagBlob {
			t.Fatalf("leaf %d: accepted unknown flags %d", i, flags)
		}
		if len(k)+len(v) > len(run)-HeaderSize || cap(k) != len(k) {
			t.Fatalf("leaf %d: key %d + value %d bytes (key cap %d) from a %d-byte run", i, len(k), len(v), cap(k), len(run))
		}
		switch flags {
		case FlagBucket:
			if rec, err := DecodeBucketRecord(id, v); err != nil {
				wantCorrupt(t, "DecodeBucketRecord", err, id)
			} else if !bytes.Equal(rec.Encode(), v) {
				t.Fatalf("bucket record %x re-encodes as %x", v, rec.Encode())
			}
		case FlagBlob:
			if ref, err := DecodeBlobRef(id, v); err != nil {
				wantCorrupt(t, "DecodeBlobRef", err, id)
			} else if !bytes.Equal(ref.Encode(), v) {
				t.Fatalf("blob reference %x re-encodes as %x", v, ref.Encode())
			}
		}
	}
}

// FuzzReadNode feeds arbitrary bytes to both node constructors, then reads
// every element of whatever they accept.
func FuzzReadNode(f *testing.F) {
	for _, ps := range []int{1024, 4096} {
		f.Add(sampleLeaf(ps, 4, 9), uint8(bits.TrailingZeros(uint(ps/MinPageSize))), uint8(0), uint64(9), uint64(100))
		f.Add(sampleBranch(ps, 5, 9, 1), uint8(bits.TrailingZeros(uint(ps/MinPageSize))), uint8(1), uint64(9), uint64(100))
		f.Add(sampleBranch(ps, 6, 9, 3), uint8(bits.TrailingZeros(uint(ps/MinPageSize))), uint8(2), uint64(0), uint64(9))
	}
	f.Add(make([]byte, 64), uint8(0), uint8(0), uint64(0), uint64(8))
	f.Fuzz(func(t *testing.T, run []byte, psSel, idSel uint8, wantTxid, hwm uint64) {
		ps := fuzzPageSize(psSel)
		hwm %= maxRealHWM(ps) + 1
		id := minHWM + ID(idSel%4)

		// A run held alone in a buffer, as recovery and Check read it.
		if n, err := NodeFromBuffer(run, ps, id, wantTxid, hwm); err != nil {
			wantCorrupt(t, "NodeFromBuffer", err, id)
		} else {
			if id+n.Header().Pages() > hwm || uint64(len(n.Bytes())) != n.Header().Pages()*uint64(ps) {
				t.Fatalf("NodeFromBuffer accepted a %d-page run at %d (hwm %d) as %d bytes", n.Header().Pages(), id, hwm, len(n.Bytes()))
			}
			if wantTxid != 0 && n.Header().Txid != wantTxid {
				t.Fatalf("NodeFromBuffer accepted txid %d, want %d", n.Header().Txid, wantTxid)
			}
			readAllElems(t, n, id)
		}

		// The same bytes at page id of a memory map. Bound the synthetic
		// file: a huge page size times a few pages is still small.
		if len(run) > 4*MaxPageSize {
			run = run[:4*MaxPageSize]
		}
		data := make([]byte, int(id)*ps+len(run))
		copy(data[int(id)*ps:], run)
		if n, err := ReadNode(data, ps, id, wantTxid, hwm); err != nil {
			wantCorrupt(t, "ReadNode", err, id)
		} else {
			if id+n.Header().Pages() > hwm {
				t.Fatalf("ReadNode accepted a %d-page run at %d past hwm %d", n.Header().Pages(), id, hwm)
			}
			if &n.Bytes()[0] != &data[int(id)*ps] {
				t.Fatalf("ReadNode's run does not start at page %d", id)
			}
			readAllElems(t, n, id)
		}

		// An arbitrary page id over the raw bytes: mostly out of range.
		fid := wantTxid % (hwm + 1)
		if n, err := ReadNode(run, ps, fid, 0, hwm); err != nil {
			wantCorrupt(t, "ReadNode(raw)", err, fid)
		} else {
			readAllElems(t, n, fid)
		}
	})
}

// metaLen returns the number of checksummed bytes of an encoded meta.
func metaLen(m *Meta) int {
	return metaFixedSize + 2*BitmapLen(m.RegionCount()) + DeltaRunSize*len(m.Delta)
}

// sampleDeltaMeta is sampleMeta with a two-run delta in region 0.
func sampleDeltaMeta(ps int, hwm uint64) []byte {
	buf := sampleMeta(ps, hwm)
	m, err := DecodeMeta(0, buf)
	if err != nil {
		panic(err)
	}
	m.Delta = []DeltaRun{{ID: minHWM, N: 1, Free: true}, {ID: minHWM + 2, N: 3}}
	EncodeMeta(buf, m)
	return buf
}

func sampleMeta(ps int, hwm uint64) []byte {
	m := &Meta{PageSize: ps, Txid: 42, Steady: 41, HWM: hwm, Root: Ref{ID: minHWM, Txid: 40, Checksum: 0x1234}, RegionPages: RegionPages(ps), FreePages: 3, FirstFreeRegion: 0}
	bl := BitmapLen(m.RegionCount())
	m.Selector = make([]byte, bl)
	m.Changed = make([]byte, bl)
	m.Selector[0] = 0x5
	m.Changed[bl-1] = 1 << ((m.RegionCount() - 1) % 8)
	buf := make([]byte, ps)
	EncodeMeta(buf, m)
	return buf
}

// fixMetaChecksum recomputes the meta checksum of buf over the region the
// bytes claim, so the fuzzer can reach the checks behind the checksum.
func fixMetaChecksum(buf []byte) {
	if len(buf) < metaFixedSize {
		return
	}
	count := uint64(binary.LittleEndian.Uint32(buf[metaOffRegionCount:]))
	deltas := uint64(binary.LittleEndian.Uint32(buf[metaOffDeltaCount:]))
	end := uint64(metaFixedSize) + 2*uint64(BitmapLen(count)) + deltas*DeltaRunSize
	if end > uint64(len(buf)) {
		return
	}
	binary.LittleEndian.PutUint32(buf[metaOffChecksum:], ChecksumSkipping(buf[:end], metaOffChecksum))
}

// FuzzDecodeMeta checks that DecodeMeta never panics, rejects with the
// documented error classes, and that every meta it accepts is exactly what
// EncodeMeta writes for it (nothing free-form is accepted unchecked).
func FuzzDecodeMeta(f *testing.F) {
	f.Add(sampleMeta(1024, 5), uint8(0), false)
	f.Add(sampleMeta(4096, 100000), uint8(1), false)
	f.Add(sampleMeta(1024, RegionPages(1024)*20+3), uint8(0), true)
	f.Add(sampleMeta(65536, 4), uint8(1), true)
	f.Add([]byte("not a meta page at all"), uint8(0), false)
	f.Add(sampleDeltaMeta(1024, 5000), uint8(1), false)
	f.Add(sampleDeltaMeta(4096, 100000), uint8(0), true)
	f.Fuzz(func(t *testing.T, buf []byte, idSel uint8, fix bool) {
		id := ID(idSel % 2)
		if fix {
			buf = bytes.Clone(buf)
			fixMetaChecksum(buf)
		}
		m, err := DecodeMeta(id, buf)
		if err != nil {
			if !errors.Is(err, rerrors.ErrInvalid) && !errors.Is(err, rerrors.ErrVersionMismatch) {
				wantCorrupt(t, "DecodeMeta", err, id)
			}
			return
		}
		if v := binary.LittleEndian.Uint32(buf[metaOffVersion:]); m.Version != v {
			t.Fatalf("decoded version %d, the page says %d", m.Version, v)
		}
		// Documented validity: region count agrees with the HWM (without
		// overflow), fits the page, root inside [minHWM, HWM).
		// Regression (meta-hwm-overflow): an HWM within a region of 2^64
		// made RegionCount's rounding overflow to a small count.
		if m.HWM > maxRealHWM(m.PageSize) {
			t.Fatalf("accepted HWM %d past the largest file", m.HWM)
		}
		count := m.RegionCount()
		if hi, lo := bits.Mul64(count, m.RegionPages); hi != 0 || lo < m.HWM || count > MaxRegions(m.PageSize) || m.HWM > maxRealHWM(m.PageSize) {
			t.Fatalf("accepted HWM %d with region count %d (max %d regions of %d pages)", m.HWM, count, MaxRegions(m.PageSize), m.RegionPages)
		}
		if m.HWM < minHWM || (m.Root.ID != 0 && (m.Root.ID < minHWM || m.Root.ID >= m.HWM)) || m.Steady > m.Txid {
			t.Fatalf("accepted inconsistent meta %+v", m)
		}
		// Regression (meta-unchecked-fields): a meta whose flags or
		// reserved bytes are not zero used to be accepted.
		if binary.LittleEndian.Uint32(buf[metaOffFlags:]) != 0 || !IsZeroPage(buf[metaReservedOff:metaFixedSize]) {
			t.Fatalf("accepted a meta with non-zero flags or reserved bytes")
		}
		ml := metaLen(m)
		if ml > m.PageSize || len(m.Selector) != BitmapLen(count) || len(m.Changed) != BitmapLen(count) {
			t.Fatalf("accepted meta with %d-byte bitmaps, metaLen %d, page %d", len(m.Selector), ml, m.PageSize)
		}
		if err := CheckDelta(m.Delta, m.PageSize, m.HWM, m.Changed); err != nil || len(m.Delta) > MaxDeltaRuns(m.PageSize, count) {
			t.Fatalf("accepted a bad delta (%d runs): %v", len(m.Delta), err)
		}
		enc := make([]byte, m.PageSize)
		EncodeMeta(enc, m)
		if binary.LittleEndian.Uint32(buf[metaOffVersion:]) < FormatVersion {
			// An older format's meta is read as this format's and
			// written as such.
			buf = bytes.Clone(buf)
			binary.LittleEndian.PutUint32(buf[metaOffVersion:], FormatVersion)
			fixMetaChecksum(buf)
		}
		if !bytes.Equal(enc[:ml], buf[:ml]) {
			for i := 0; i < ml; i++ {
				if enc[i] != buf[i] {
					t.Fatalf("accepted meta does not re-encode identically: first difference at byte %d (read %#x, encoded %#x)", i, buf[i], enc[i])
				}
			}
		}
		m2, err := DecodeMeta(id, enc)
		if err != nil {
			t.Fatalf("re-encoded meta rejected: %v", err)
		}
		if m2.Version != FormatVersion {
			t.Fatalf("re-encoded meta decodes as version %d, want %d", m2.Version, FormatVersion)
		}
		m2.Version = m.Version
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("meta round trip: %+v != %+v", m, m2)
		}
	})
}

func sampleExtent(ps int, id ID, txid uint64, pages int, next ExtentRef, payload []byte) []byte {
	buf := make([]byte, ps*pages)
	EncodeBlobExtent(buf, ps, id, txid, next, payload)
	return buf
}

// FuzzBlobExtent feeds arbitrary runs and references to ReadBlobExtent, both
// as a lone buffer (base == id) and inside a synthetic file (base 0).
func FuzzBlobExtent(f *testing.F) {
	f.Add(sampleExtent(1024, 4, 7, 1, ExtentRef{}, []byte("hello")), uint8(0), uint8(0), uint64(7), uint32(1), uint64(10))
	f.Add(sampleExtent(1024, 5, 7, 2, ExtentRef{Ref: Ref{ID: 9, Txid: 6, Checksum: 3}, Pages: 1}, bytes.Repeat([]byte("x"), 1500)), uint8(0), uint8(1), uint64(7), uint32(2), uint64(10))
	f.Add(sampleExtent(4096, 6, 3, 1, ExtentRef{}, bytes.Repeat([]byte("y"), 4096-BlobPayloadStart)), uint8(2), uint8(2), uint64(0), uint32(1), uint64(7))
	f.Fuzz(func(t *testing.T, run []byte, psSel, idSel uint8, txid uint64, pages uint32, hwm uint64) {
		ps := fuzzPageSize(psSel)
		hwm %= maxRealHWM(ps) + 1
		id := minHWM + ID(idSel%4)
		ref := ExtentRef{Ref: Ref{ID: id, Txid: txid}, Pages: pages}
		check := func(what string, ext BlobExtent, err error) {
			t.Helper()
			if err != nil {
				wantCorrupt(t, what, err, id)
				return
			}
			h, herr := ReadHeader(id, ext.Run)
			if herr != nil || h.Type != TypeBlob || h.ID != id || (txid != 0 && h.Txid != txid) {
				t.Fatalf("%s: accepted header %+v (err %v)", what, h, herr)
			}
			if uint64(len(ext.Run)) != uint64(pages)*uint64(ps) || pages == 0 || id+uint64(pages) > hwm {
				t.Fatalf("%s: accepted a %d-byte run for %d pages at %d (hwm %d)", what, len(ext.Run), pages, id, hwm)
			}
			if uint64(len(ext.Payload)) != uint64(h.Count) || uint64(len(ext.Payload)) > BlobCapacity(uint64(pages), ps) {
				t.Fatalf("%s: payload of %d bytes, header count %d, capacity %d", what, len(ext.Payload), h.Count, BlobCapacity(uint64(pages), ps))
			}
			if ext.Next.ID != 0 && (ext.Next.Pages == 0 || ext.Next.Txid > h.Txid) {
				t.Fatalf("%s: accepted successor %+v from txn %d", what, ext.Next, h.Txid)
			}
		}
		ext, err := ReadBlobExtent(run, id, ps, ref, hwm)
		check("ReadBlobExtent(buffer)", ext, err)

		if len(run) > 4*MaxPageSize {
			run = run[:4*MaxPageSize]
		}
		data := make([]byte, int(id)*ps+len(run))
		copy(data[int(id)*ps:], run)
		ext, err = ReadBlobExtent(data, 0, ps, ref, hwm)
		check("ReadBlobExtent(file)", ext, err)

		// A base past the id must be refused, not wrap around.
		if _, err := ReadBlobExtent(run, id+1, ps, ref, math.MaxUint64); err == nil {
			t.Fatalf("ReadBlobExtent accepted an extent below its buffer's base")
		}
	})
}

// FuzzRecords checks the two 32-byte leaf value records: rejected with a
// CorruptError, or accepted and re-encoded to the same bytes.
func FuzzRecords(f *testing.F) {
	f.Add(BucketRecord{Root: Ref{ID: 9, Txid: 3, Checksum: 77}, Sequence: 5}.Encode(), uint64(4))
	f.Add(BucketRecord{}.Encode(), uint64(5))
	f.Add(BlobRef{Length: 1 << 20, First: ExtentRef{Ref: Ref{ID: 100, Txid: 8, Checksum: 99}, Pages: 257}}.Encode(), uint64(6))
	f.Add([]byte("short"), uint64(7))
	inline := EncodeInlineRecord(2, func(i int) (uint32, []byte, []byte) {
		return 0, []byte{'a' + byte(i)}, []byte("value")
	})
	f.Add(BucketRecord{Sequence: 9, Inline: inline}.Encode(), uint64(8))
	f.Fuzz(func(t *testing.T, v []byte, id uint64) {
		if rec, err := DecodeBucketRecord(id, v); err != nil {
			wantCorrupt(t, "DecodeBucketRecord", err, id)
		} else if !bytes.Equal(rec.Encode(), v) {
			t.Fatalf("bucket record %x re-encodes as %x", v, rec.Encode())
		} else if rec.Inline != nil {
			// Accepted inline content: every element reads, and every
			// search ends, without a panic.
			n, err := InlineLeaf(id, v)
			if err != nil {
				t.Fatalf("DecodeBucketRecord accepted an inline leaf InlineLeaf refuses: %v", err)
			}
			for i := 0; i < n.Count(); i++ {
				flags, k, _, err := n.LeafElem(i)
				if err != nil || flags != 0 {
					t.Fatalf("accepted inline element %d: flags %d, %v", i, flags, err)
				}
				_, _, _ = n.LeafSearch(k)
			}
		}
		if ref, err := DecodeBlobRef(id, v); err != nil {
			wantCorrupt(t, "DecodeBlobRef", err, id)
		} else {
			if ref.First.ID == 0 || ref.First.Pages == 0 {
				t.Fatalf("accepted blob reference to page %d with %d pages", ref.First.ID, ref.First.Pages)
			}
			if !bytes.Equal(ref.Encode(), v) {
				t.Fatalf("blob reference %x re-encodes as %x", v, ref.Encode())
			}
		}
	})
}

// forgeMeta encodes a valid meta for page size ps, then lets edit change
// the bytes and recomputes the checksum, as a hostile file would.
func forgeMeta(ps int, edit func(buf []byte)) []byte {
	buf := sampleMeta(ps, 100)
	edit(buf)
	fixMetaChecksum(buf)
	return buf
}

// The design fixes the meta's flags and reserved bytes at zero; a meta that
// sets them was written by something else (or a newer rivet) and must not be
// taken as a valid version-1 meta.
func TestDecodeMetaRejectsNonzeroFlags(t *testing.T) {
	// A format-3 meta has no journal salt: the bytes were reserved.
	buf := forgeMeta(1024, func(b []byte) {
		binary.LittleEndian.PutUint32(b[metaOffVersion:], 3)
		b[metaOffJournalSalt] = 1
	})
	if _, err := DecodeMeta(0, buf); err == nil {
		t.Errorf("format-3 meta with a journal salt accepted")
	} else {
		wantCorrupt(t, "DecodeMeta", err, 0)
	}
	// Format 4 carries it.
	buf = forgeMeta(1024, func(b []byte) { b[metaOffJournalSalt] = 1 })
	if m, err := DecodeMeta(0, buf); err != nil || m.JournalSalt != 1 {
		t.Errorf("format-4 meta with journal salt 1: %v, %+v", err, m)
	}
	for _, off := range []int{metaOffFlags, metaReservedOff, metaFixedSize - 1} {
		buf := forgeMeta(1024, func(b []byte) { b[off] = 1 })
		if _, err := DecodeMeta(0, buf); err == nil {
			t.Errorf("meta with byte %d set accepted", off)
		} else {
			wantCorrupt(t, "DecodeMeta", err, 0)
		}
	}
}

// A high-water mark near 2^64 overflows RegionCount's rounding-up to 0
// regions, which then "agrees" with a region count field of 0.
func TestDecodeMetaRejectsOverflowingHWM(t *testing.T) {
	for _, hwm := range []uint64{math.MaxUint64, math.MaxUint64 - RegionPages(1024) + 2} {
		buf := forgeMeta(1024, func(b []byte) {
			binary.LittleEndian.PutUint64(b[metaOffHWM:], hwm)
			binary.LittleEndian.PutUint32(b[metaOffRegionCount:], 0)
		})
		m, err := DecodeMeta(0, buf)
		if err == nil {
			t.Fatalf("DecodeMeta accepted HWM %d with %d regions", m.HWM, m.RegionCount())
		}
		wantCorrupt(t, "DecodeMeta", err, 0)
	}
}

// metaReservedOff is where the meta's reserved, always-zero bytes start
// (docs/design.md §2.2: 32 bytes at offset 96; the 8 at 88 are the
// journal salt since format 4).
const metaReservedOff = 96

func TestMetaDeltaRoundTrip(t *testing.T) {
	buf := sampleDeltaMeta(4096, 100000)
	m, err := DecodeMeta(1, buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []DeltaRun{{ID: minHWM, N: 1, Free: true}, {ID: minHWM + 2, N: 3}}
	if !reflect.DeepEqual(m.Delta, want) {
		t.Fatalf("delta %+v, want %+v", m.Delta, want)
	}
	if got := binary.LittleEndian.Uint32(buf[metaOffVersion:]); got != FormatVersion {
		t.Fatalf("encoded version %d", got)
	}
}

// A format-1 meta (no delta; its delta count field was reserved) still
// opens.
func TestDecodeMetaReadsFormat1(t *testing.T) {
	buf := forgeMeta(1024, func(b []byte) { binary.LittleEndian.PutUint32(b[metaOffVersion:], 1) })
	m, err := DecodeMeta(0, buf)
	if err != nil {
		t.Fatalf("format-1 meta rejected: %v", err)
	}
	if len(m.Delta) != 0 {
		t.Fatalf("format-1 meta has a delta: %+v", m.Delta)
	}
	buf = forgeMeta(1024, func(b []byte) { binary.LittleEndian.PutUint32(b[metaOffVersion:], FormatVersion+1) })
	if _, err := DecodeMeta(0, buf); !errors.Is(err, rerrors.ErrVersionMismatch) {
		t.Fatalf("newer format: %v, want ErrVersionMismatch", err)
	}
}

// Every structural rule of the delta is enforced, with a CorruptError.
func TestDecodeMetaRejectsBadDelta(t *testing.T) {
	const ps = 1024
	rp := RegionPages(ps)
	hwm := rp + 500 // two regions; region 1 is the changed one in sampleMeta
	for name, delta := range map[string][]DeltaRun{
		"empty run":            {{ID: 10, N: 0}},
		"past the HWM":         {{ID: hwm - 2, N: 3}},
		"overlap":              {{ID: 10, N: 5}, {ID: 12, N: 1}},
		"out of order":         {{ID: 20, N: 1}, {ID: 10, N: 1}},
		"covers a meta":        {{ID: 1, N: 2}},
		"covers a map slot":    {{ID: 3, N: 2}},
		"crosses a region":     {{ID: rp - 2, N: 4}},
		"in a changed region":  {{ID: rp + 10, N: 1}},
		"covers region 1 slot": {{ID: rp, N: 1}},
	} {
		buf := sampleMeta(ps, hwm)
		m, err := DecodeMeta(0, buf)
		if err != nil {
			t.Fatal(err)
		}
		m.Delta = delta
		EncodeMeta(buf, m)
		if _, err := DecodeMeta(0, buf); err == nil {
			t.Errorf("%s: accepted delta %+v", name, delta)
		} else {
			wantCorrupt(t, "DecodeMeta "+name, err, 0)
		}
	}
	// A count larger than the page has room for.
	buf := forgeMeta(ps, func(b []byte) { binary.LittleEndian.PutUint32(b[metaOffDeltaCount:], 1000) })
	if _, err := DecodeMeta(0, buf); err == nil {
		t.Error("accepted a delta count past the page")
	} else {
		wantCorrupt(t, "DecodeMeta count", err, 0)
	}
}

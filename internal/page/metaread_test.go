package page

import (
	"bytes"
	"errors"
	"io"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// countingReader counts the ReadAt calls and bytes a reader of metas makes.
type countingReader struct {
	r     io.ReaderAt
	calls int
	bytes int64
}

func (c *countingReader) ReadAt(b []byte, off int64) (int, error) {
	c.calls++
	n, err := c.r.ReadAt(b, off)
	c.bytes += int64(n)
	return n, err
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) ReadAt([]byte, int64) (int, error) { return 0, f.err }

// metaFile returns a file image of pages pages of ps bytes whose metas are
// meta0 and meta1 (nil: zeros).
func metaFile(ps, pages int, meta0, meta1 []byte) []byte {
	img := make([]byte, ps*pages)
	copy(img, meta0)
	copy(img[ps:], meta1)
	return img
}

// sampleMetaTxid is sampleMeta with txid (and steady txid-1).
func sampleMetaTxid(ps int, txid uint64) []byte {
	buf := sampleMeta(ps, 100)
	m, err := DecodeMeta(0, buf)
	if err != nil {
		panic(err)
	}
	m.Txid, m.Steady = txid, txid-1
	EncodeMeta(buf, m)
	return buf
}

func TestReadMetas(t *testing.T) {
	const ps = 4096
	good0, good1 := sampleMetaTxid(ps, 42), sampleMetaTxid(ps, 43)
	notRivet := bytes.Repeat([]byte{0xab}, ps)
	isAB := func(head []byte) bool { return head[0] == 0xab }

	t.Run("both", func(t *testing.T) {
		img := metaFile(ps, 8, good0, good1)
		cr := &countingReader{r: bytes.NewReader(img)}
		metas, errs := ReadMetas(cr, int64(len(img)), nil)
		if errs[0] != nil || errs[1] != nil || metas[0].Txid != 42 || metas[1].Txid != 43 {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
		// The header, then meta 0's page, then meta 1's: nothing else.
		if cr.calls != 3 || cr.bytes != MinPageSize+2*ps {
			t.Fatalf("%d reads of %d bytes, want 3 of %d", cr.calls, cr.bytes, MinPageSize+2*ps)
		}
	})
	t.Run("meta 0 damaged", func(t *testing.T) {
		// Meta 0 still names the page size: meta 1 is read at it only.
		bad := bytes.Clone(good0)
		bad[100] ^= 1
		img := metaFile(ps, 8, bad, good1)
		metas, errs := ReadMetas(bytes.NewReader(img), int64(len(img)), nil)
		if metas[0] != nil || !errors.Is(errs[0], rerrors.ErrCorrupt) || metas[1] == nil || metas[1].Txid != 43 {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
	})
	t.Run("meta 0 not rivet's", func(t *testing.T) {
		// Meta 1 is looked for at every page size; 1, 2 KiB hold none.
		img := metaFile(ps, 8, notRivet, good1)
		cr := &countingReader{r: bytes.NewReader(img)}
		metas, errs := ReadMetas(cr, int64(len(img)), nil)
		if metas[0] != nil || !errors.Is(errs[0], rerrors.ErrInvalid) || errs[1] != nil || metas[1].Txid != 43 {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
		if cr.calls != 4 {
			t.Fatalf("%d reads, want the header and meta 1 at 1, 2 and 4 KiB", cr.calls)
		}
	})
	t.Run("foreign", func(t *testing.T) {
		img := metaFile(ps, 8, notRivet, good1)
		cr := &countingReader{r: bytes.NewReader(img)}
		metas, errs := ReadMetas(cr, int64(len(img)), isAB)
		if metas[0] != nil || metas[1] != nil || !errors.Is(errs[0], rerrors.ErrInvalid) || errs[1] != rerrors.ErrInvalid {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
		if cr.calls != 1 {
			t.Fatalf("%d reads of a foreign file, want only its header", cr.calls)
		}
	})
	t.Run("meta 1 of another page size", func(t *testing.T) {
		other := sampleMetaTxid(ps/2, 43)
		img := metaFile(ps, 8, good0, other)
		metas, errs := ReadMetas(bytes.NewReader(img), int64(len(img)), nil)
		if metas[0] == nil || metas[1] != nil {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
		// Read at 4 KiB, the page holds a meta naming 2 KiB pages whose
		// checksum covers only its first bytes: it decodes, and disagrees.
		wantCorruptPage(t, errs[1], 1)
	})
	t.Run("no meta anywhere", func(t *testing.T) {
		img := make([]byte, 8*ps)
		metas, errs := ReadMetas(bytes.NewReader(img), int64(len(img)), nil)
		if metas[0] != nil || metas[1] != nil || !errors.Is(errs[0], rerrors.ErrInvalid) || errs[1] != rerrors.ErrInvalid {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
	})
	t.Run("short file", func(t *testing.T) {
		img := good0[:MinPageSize/2]
		_, errs := ReadMetas(bytes.NewReader(img), int64(len(img)), nil)
		wantCorruptPage(t, errs[0], 0)
		wantCorruptPage(t, errs[1], 0)
		// Meta 0's header is whole, its page is not.
		img = good0[:ps/2]
		metas, errs := ReadMetas(bytes.NewReader(img), int64(len(img)), nil)
		if metas[0] != nil || metas[1] != nil || errs[1] != rerrors.ErrInvalid {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
		wantCorruptPage(t, errs[0], 0)
		// Meta 1 cut: the size says it is there, the file ends early.
		img = metaFile(ps, 2, good0, good1)[:ps+ps/2]
		metas, errs = ReadMetas(bytes.NewReader(img), 2*ps, nil)
		if metas[0] == nil || metas[1] != nil {
			t.Fatalf("metas %+v, errs %v", metas, errs)
		}
		wantCorruptPage(t, errs[1], 1)
	})
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		_, errs := ReadMetas(failingReader{boom}, 8*ps, nil)
		if errs[0] != boom || errs[1] != boom {
			t.Fatalf("errs %v, want the reader's", errs)
		}
	})
}

// wantCorruptPage fails unless err is a *CorruptError naming page id.
func wantCorruptPage(t *testing.T, err error, id ID) {
	t.Helper()
	wantCorrupt(t, "ReadMetas", err, id)
}

func TestProbeAndLooseMeta(t *testing.T) {
	const ps = 2048
	good0, good1 := sampleMetaTxid(ps, 42), sampleMetaTxid(ps, 43)
	img := metaFile(ps, 2, good0, good1)
	for slot := range 2 {
		got, ok := ProbeMeta(img, slot)
		if !ok || got != ps {
			t.Fatalf("slot %d: ProbeMeta = %d, %v; want %d", slot, got, ok, ps)
		}
	}
	// Meta 0 gone: meta 1 is still found, at the size it names.
	clear(img[:ps])
	if _, ok := ProbeMeta(img, 0); ok {
		t.Fatal("ProbeMeta found a meta 0 in zeros")
	}
	if got, ok := ProbeMeta(img, 1); !ok || got != ps {
		t.Fatalf("ProbeMeta(slot 1) = %d, %v without meta 0; want %d", got, ok, ps)
	}
	// A head too short for meta 1's page.
	if _, ok := ProbeMeta(img[:ps+ps/2], 1); ok {
		t.Fatal("ProbeMeta found a meta 1 that the head does not hold whole")
	}

	// A meta whose checksum fails still yields its txid and root.
	bad := bytes.Clone(good1)
	bad[metaOffChecksum] ^= 0xff
	if _, err := DecodeMeta(1, bad); err == nil {
		t.Fatal("a meta with a broken checksum decoded")
	}
	want, _ := DecodeMeta(1, good1)
	m := LooseMeta(bad, ps, 10*ps)
	if m == nil || m.Txid != want.Txid || m.Root != want.Root || m.PageSize != ps || m.HWM != 10 {
		t.Fatalf("LooseMeta = %+v, want txid %d root %+v HWM 10", m, want.Txid, want.Root)
	}
	if LooseMeta(make([]byte, ps), ps, 10*ps) != nil {
		t.Fatal("LooseMeta of zeros names a root")
	}
	if LooseMeta(bad[:64], ps, 10*ps) != nil || LooseMeta(bad, 3000, 10*ps) != nil {
		t.Fatal("LooseMeta read a page too short, or an unsupported page size")
	}
}

// FuzzReadMetas feeds arbitrary files to ReadMetas: it never panics, sets
// exactly one of meta and error per slot, rejects with the documented error
// classes, and every meta it returns is what DecodeMeta makes of the bytes
// at its slot.
func FuzzReadMetas(f *testing.F) {
	f.Add(metaFile(1024, 4, sampleMetaTxid(1024, 7), sampleMetaTxid(1024, 8)), false, uint16(0))
	f.Add(metaFile(4096, 2, bytes.Repeat([]byte{1}, 64), sampleMetaTxid(4096, 8)), true, uint16(0))
	f.Add(metaFile(2048, 2, sampleMetaTxid(2048, 7), sampleMetaTxid(1024, 8)), false, uint16(100))
	f.Add([]byte("short"), false, uint16(0))
	f.Fuzz(func(t *testing.T, img []byte, foreign bool, cut uint16) {
		// The size may claim more than the file holds (a file that shrank).
		size := int64(len(img)) + int64(cut)
		var pred func([]byte) bool
		asked := false
		if foreign {
			pred = func(head []byte) bool {
				asked = true
				if len(head) != MinPageSize {
					t.Fatalf("foreign asked about %d bytes, want %d", len(head), MinPageSize)
				}
				return head[0]&1 == 1
			}
		}
		cr := &countingReader{r: bytes.NewReader(img)}
		metas, errs := ReadMetas(cr, size, pred)
		for slot := range 2 {
			if (metas[slot] == nil) == (errs[slot] == nil) {
				t.Fatalf("slot %d: meta %v and error %v", slot, metas[slot], errs[slot])
			}
			if err := errs[slot]; err != nil {
				id := ID(slot)
				if slot == 1 && err == errs[0] {
					// The file's first bytes could not be read: one
					// error for both.
					id = 0
				}
				if !errors.Is(err, rerrors.ErrInvalid) && !errors.Is(err, rerrors.ErrVersionMismatch) {
					wantCorrupt(t, "ReadMetas", err, id)
				}
				continue
			}
			m := metas[slot]
			off := slot * m.PageSize
			if off+m.PageSize > len(img) {
				t.Fatalf("slot %d: a meta of %d-byte pages from a %d-byte file", slot, m.PageSize, len(img))
			}
			again, err := DecodeMeta(ID(slot), img[off:off+m.PageSize])
			if err != nil || again.Txid != m.Txid || again.PageSize != m.PageSize {
				t.Fatalf("slot %d: returned %+v, the bytes decode to %+v (%v)", slot, m, again, err)
			}
		}
		if metas[0] != nil && metas[1] != nil && metas[0].PageSize != metas[1].PageSize {
			t.Fatalf("metas of page sizes %d and %d", metas[0].PageSize, metas[1].PageSize)
		}
		if asked && metas[0] != nil {
			t.Fatal("foreign was asked about a file whose meta 0 decoded")
		}
		// The header, meta 0's page and meta 1 at each page size.
		if cr.calls > 2+7 {
			t.Fatalf("%d reads", cr.calls)
		}
	})
}

// FuzzProbeMeta feeds arbitrary file heads to ProbeMeta and LooseMeta: they
// never panic, and what they return lies inside the head and agrees with
// the bytes there.
func FuzzProbeMeta(f *testing.F) {
	f.Add(metaFile(1024, 2, sampleMetaTxid(1024, 7), sampleMetaTxid(1024, 8)), uint8(1), int64(1<<20))
	f.Add(metaFile(2048, 2, nil, sampleMetaTxid(2048, 8)), uint8(1), int64(4096))
	f.Add(metaFile(1024, 2, sampleMetaTxid(1024, 7), nil), uint8(0), int64(-1))
	f.Add([]byte("RIVT"), uint8(0), int64(0))
	f.Fuzz(func(t *testing.T, head []byte, slotSel uint8, fileSize int64) {
		slot := int(slotSel % 2)
		ps, ok := ProbeMeta(head, slot)
		if !ok {
			if ps != 0 {
				t.Fatalf("ProbeMeta returned page size %d with ok false", ps)
			}
			return
		}
		if !ValidPageSize(ps) || (slot+1)*ps > len(head) {
			t.Fatalf("slot %d: page size %d in a %d-byte head", slot, ps, len(head))
		}
		buf := head[slot*ps : (slot+1)*ps]
		if _, ok := ClaimedTxid(buf); !ok {
			t.Fatalf("slot %d: page size %d, but no magic there", slot, ps)
		}
		m := LooseMeta(buf, ps, fileSize)
		if m == nil {
			return
		}
		if m.Root.IsZero() || m.PageSize != ps || fileSize < 0 || m.HWM != uint64(fileSize)/uint64(ps) {
			t.Fatalf("LooseMeta = %+v for page size %d, file size %d", m, ps, fileSize)
		}
		if txid, _ := ClaimedTxid(buf); txid != m.Txid {
			t.Fatalf("LooseMeta txid %d, the page claims %d", m.Txid, txid)
		}
		if strict, err := DecodeMeta(ID(slot), buf); err == nil && (strict.Txid != m.Txid || strict.Root != m.Root) {
			t.Fatalf("LooseMeta %+v disagrees with DecodeMeta %+v", m, strict)
		}
	})
}

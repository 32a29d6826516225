package page

import (
	"encoding/binary"
	"errors"
	"io"

	rerrors "github.com/rivetkv/rivet/errors"
)

// Reading a file's two meta pages. ReadMetas is the strict reader Open and
// the live copy use: a meta counts only if DecodeMeta accepts it.
// ProbeMeta and LooseMeta are the lenient ones salvage and the inspection
// tools use on files whose metas may both be damaged.

// ReadMetas reads and decodes the two meta pages of the file r, which is
// size bytes long. Meta 0's header names the page size: its first
// MinPageSize bytes are read, then the rest of its page, and meta 1 is
// read at that size. When meta 0 names no supported page size, meta 1 is
// looked for at every supported page size, smallest first, and the first
// that decodes to a meta of that size is taken.
//
// foreign, if not nil, is asked about meta 0's first MinPageSize bytes
// when they hold no rivet meta: if it says they are another format's meta
// page (a bbolt file), meta 1 is not looked for and errs[1] is
// errors.ErrInvalid. It spares such files the reads at every page size.
//
// For each slot, exactly one of metas[i] and errs[i] is set. errs[i] is
// what DecodeMeta returned (errors.ErrInvalid for a page that is not a
// rivet meta, errors.ErrVersionMismatch for a newer format, a
// *errors.CorruptError for a damaged one), an error of r, or a
// *errors.CorruptError when the file ends inside the page. When meta 0
// names no page size, errs[1] is errors.ErrInvalid unless some page size
// had a meta 1 to decode.
//
// Every read is a ReadAt of at most one page: a caller counting the bytes
// Open reads wraps r.
func ReadMetas(r io.ReaderAt, size int64, foreign func(head []byte) bool) (metas [2]*Meta, errs [2]error) {
	head := make([]byte, MinPageSize)
	if err := readMetaAt(r, head, 0, 0); err != nil {
		errs[0], errs[1] = err, err
		return
	}
	var sizes []int
	if ps, ok := MetaPageSize(head); ok {
		buf := make([]byte, ps)
		if err := readMetaAt(r, buf, 0, 0); err != nil {
			errs[0] = err
		} else {
			metas[0], errs[0] = DecodeMeta(0, buf)
		}
		sizes = []int{ps}
	} else {
		if _, errs[0] = DecodeMeta(0, head); errs[0] == nil {
			errs[0] = Corruptf(0, "meta page names no supported page size")
		}
		if foreign != nil && foreign(head) {
			errs[1] = rerrors.ErrInvalid
			return
		}
		for ps := MinPageSize; ps <= MaxPageSize; ps *= 2 {
			sizes = append(sizes, ps)
		}
	}
	errs[1] = rerrors.ErrInvalid
	for _, ps := range sizes {
		if int64(2*ps) > size {
			break
		}
		buf := make([]byte, ps)
		if err := readMetaAt(r, buf, int64(ps), 1); err != nil {
			errs[1] = err
			continue
		}
		m, err := DecodeMeta(1, buf)
		if err == nil && m.PageSize == ps {
			metas[1], errs[1] = m, nil
			break
		}
		if len(sizes) == 1 {
			// The page size is known: this is meta 1's verdict.
			if err == nil {
				err = Corruptf(1, "meta page size %d disagrees with meta 0's %d", m.PageSize, ps)
			}
			errs[1] = err
		}
	}
	return
}

// readMetaAt fills b from offset off of r, where meta page id starts: a
// file that ends inside the page is corrupt.
func readMetaAt(r io.ReaderAt, b []byte, off int64, id ID) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) && errors.Is(err, io.EOF) {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return Corruptf(id, "file ends inside meta page %d", id)
	}
	return err
}

// ProbeMeta returns the page size of meta page slot (0 or 1) in head, the
// first bytes of a file, without validating either meta: for slot 0 the
// page size its header names; for slot 1 the same, if a page carrying
// rivet's magic starts there, or else the first page size at which a page
// with rivet's magic naming that same page size starts. ok is false when
// no such page lies wholly inside head. It is for readers of damaged files
// (salvage, inspection), which decode what it finds with DecodeMeta and,
// when that fails, LooseMeta.
func ProbeMeta(head []byte, slot int) (pageSize int, ok bool) {
	le := binary.LittleEndian
	hasMagic := func(off int) bool {
		return off+metaOffPageSize+4 <= len(head) && HasMagic(head[off:])
	}
	if hasMagic(0) {
		ps := int(le.Uint32(head[metaOffPageSize:]))
		if ValidPageSize(ps) && (slot+1)*ps <= len(head) && (slot == 0 || hasMagic(ps)) {
			return ps, true
		}
	}
	if slot == 0 {
		return 0, false
	}
	for ps := MinPageSize; ps <= MaxPageSize; ps *= 2 {
		if 2*ps <= len(head) && hasMagic(ps) && int(le.Uint32(head[ps+metaOffPageSize:])) == ps {
			return ps, true
		}
	}
	return 0, false
}

// LooseMeta reads from buf, a meta page of pageSize bytes that may have
// failed DecodeMeta, only the fields a salvage can check against the pages
// they name: the txid and the root reference. Nothing else is trusted, not
// even the magic or the checksum; the HWM is taken to be the file's end
// (fileSize bytes). It returns nil when the root is empty, which names no
// page to check, or when buf or pageSize cannot hold a meta.
//
// Invariant: a LooseMeta is never opened as a state. A caller takes one
// only after the root page it names validates (type, own id, txid and
// checksum), and reads the tree below it with every check of a normal read.
func LooseMeta(buf []byte, pageSize int, fileSize int64) *Meta {
	if !ValidPageSize(pageSize) || len(buf) < metaFixedSize || fileSize < 0 {
		return nil
	}
	le := binary.LittleEndian
	m := &Meta{
		PageSize: pageSize,
		Txid:     le.Uint64(buf[metaOffTxid:]),
		HWM:      uint64(fileSize) / uint64(pageSize),
		Root: Ref{
			ID:       le.Uint64(buf[metaOffRoot:]),
			Txid:     le.Uint64(buf[metaOffRootTxid:]),
			Checksum: le.Uint32(buf[metaOffRootSum:]),
		},
	}
	if m.Root.IsZero() {
		return nil
	}
	return m
}

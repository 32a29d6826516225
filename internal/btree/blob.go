package btree

import (
	"math"

	"github.com/rivetkv/rivet/internal/page"
)

// MaxValueSize is the largest value a tree stores (bbolt's limit).
const MaxValueSize = math.MaxInt32 - 1

// Value resolves a raw leaf value: blob references are read (zero-copy for a
// one-extent blob, copied for a chain), other values are returned as is.
func (t *Tree) Value(raw []byte, flags uint32) ([]byte, error) {
	if flags&flagPendingBlob != 0 || flags&page.FlagBlob == 0 {
		return raw, nil
	}
	ref, err := page.DecodeBlobRef(0, raw)
	if err != nil {
		t.env.fail(err)
		return nil, err
	}
	return t.readBlob(ref)
}

// IsBlob reports whether flags mark a value stored outside its leaf.
func IsBlob(flags uint32) bool { return flags&(page.FlagBlob|flagPendingBlob) != 0 }

// PublicFlags strips in-memory-only flags.
func PublicFlags(flags uint32) uint32 { return flags &^ flagPendingBlob }

func (t *Tree) readBlob(ref page.BlobRef) ([]byte, error) {
	e := t.env
	if ref.Length > MaxValueSize || ref.Length > e.HWM*uint64(e.PageSize) {
		err := page.Corruptf(ref.First.ID, "blob length %d is impossible", ref.Length)
		e.fail(err)
		return nil, err
	}
	ext, err := e.readExtent(ref.First)
	if err != nil {
		e.fail(err)
		return nil, err
	}
	if ext.Next.ID == 0 {
		if uint64(len(ext.Payload)) != ref.Length {
			err := page.Corruptf(ref.First.ID, "blob holds %d bytes, reference says %d", len(ext.Payload), ref.Length)
			e.fail(err)
			return nil, err
		}
		return ext.Payload, nil
	}
	// Invariant: every extent adds at least one byte and the total may not
	// pass ref.Length, so this loop ends even on a file with a cycle.
	out := make([]byte, 0, ref.Length)
	for extents := uint64(1); ; extents++ {
		if extents > e.HWM {
			err := page.Corruptf(ref.First.ID, "blob chain longer than the file (cycle?)")
			e.fail(err)
			return nil, err
		}
		if len(ext.Payload) == 0 || uint64(len(out)+len(ext.Payload)) > ref.Length {
			err := page.Corruptf(ext.Next.ID, "blob chain does not add up to %d bytes", ref.Length)
			e.fail(err)
			return nil, err
		}
		out = append(out, ext.Payload...)
		if ext.Next.ID == 0 {
			break
		}
		if ext, err = e.readExtent(ext.Next); err != nil {
			e.fail(err)
			return nil, err
		}
	}
	if uint64(len(out)) != ref.Length {
		err := page.Corruptf(ref.First.ID, "blob chain holds %d bytes, reference says %d", len(out), ref.Length)
		e.fail(err)
		return nil, err
	}
	return out, nil
}

// extents lists the runs of a committed blob, validating the chain.
func (t *Tree) extents(ref page.BlobRef, fn func(page.ExtentRef, page.BlobExtent) error) error {
	e := t.env
	if ref.Length > MaxValueSize || ref.Length > e.HWM*uint64(e.PageSize) {
		err := page.Corruptf(ref.First.ID, "blob length %d is impossible", ref.Length)
		e.fail(err)
		return err
	}
	cur := ref.First
	var total uint64
	for extents := uint64(0); cur.ID != 0; extents++ {
		if extents >= e.HWM {
			err := page.Corruptf(ref.First.ID, "blob chain longer than the file (cycle?)")
			e.fail(err)
			return err
		}
		ext, err := e.readExtent(cur)
		if err != nil {
			e.fail(err)
			return err
		}
		total += uint64(len(ext.Payload))
		if len(ext.Payload) == 0 || total > ref.Length {
			err := page.Corruptf(cur.ID, "blob chain does not add up to %d bytes", ref.Length)
			e.fail(err)
			return err
		}
		if err := fn(cur, ext); err != nil {
			return err
		}
		cur = ext.Next
	}
	if total != ref.Length {
		err := page.Corruptf(ref.First.ID, "blob chain holds %d bytes, reference says %d", total, ref.Length)
		e.fail(err)
		return err
	}
	return nil
}

// freeBlob frees every extent of the committed blob whose reference is raw.
func (t *Tree) freeBlob(raw []byte) error {
	ref, err := page.DecodeBlobRef(0, raw)
	if err != nil {
		t.env.fail(err)
		return err
	}
	return t.extents(ref, func(x page.ExtentRef, _ page.BlobExtent) error {
		return t.env.Alloc.Free(x.ID, uint64(x.Pages), x.Txid)
	})
}

// writeBlobs turns the leaf's pending large values into blob chains.
func (t *Tree) writeBlobs(n *node) error {
	for i := range n.inodes {
		in := &n.inodes[i]
		if in.flags&flagPendingBlob == 0 {
			continue
		}
		ref, err := t.writeBlob(in.value)
		if err != nil {
			return err
		}
		in.value = ref.Encode()
		in.flags = page.FlagBlob
	}
	return nil
}

func (t *Tree) writeBlob(v []byte) (page.BlobRef, error) {
	ps := t.env.PageSize
	extent := uint64(maxExtentPages)
	if m := t.env.MaxExtentPages; m > 0 {
		extent = min(extent, m)
	}
	capacity := int(page.BlobCapacity(extent, ps))
	// Chunk boundaries, written last first so each extent's checksum covers
	// its successor's reference.
	var bounds []int
	for off := 0; off < len(v); off += capacity {
		bounds = append(bounds, off)
	}
	var next page.ExtentRef
	for i := len(bounds) - 1; i >= 0; i-- {
		end := len(v)
		if i+1 < len(bounds) {
			end = bounds[i+1]
		}
		payload := v[bounds[i]:end]
		pages := page.RunPages(page.BlobPayloadStart+len(payload), ps)
		id, err := t.env.Alloc.Allocate(pages)
		if err != nil {
			return page.BlobRef{}, err
		}
		buf := t.env.Spares.Get(pages, ps)
		if buf == nil {
			buf = make([]byte, pages*uint64(ps))
		}
		page.EncodeBlobExtent(buf, ps, id, t.env.Txid, next, payload)
		t.env.Runs = append(t.env.Runs, page.Run{ID: id, Data: buf})
		if err := t.env.writeEarly(len(buf)); err != nil {
			return page.BlobRef{}, err
		}
		t.env.Stats.PageCount += int64(pages)
		t.env.Stats.PageAlloc += int64(len(buf))
		next = page.ExtentRef{Ref: page.Ref{ID: id, Txid: t.env.Txid, Checksum: page.Checksum(buf)}, Pages: uint32(pages)}
	}
	return page.BlobRef{Length: uint64(len(v)), First: next}, nil
}

// FreeAll frees every run of the committed tree rooted at root, including
// blobs and the trees of nested buckets. Used when a bucket is deleted that
// the transaction did not open (so nothing in it changed).
func FreeAll(env *Env, root page.Ref) error {
	t := Open(env, root)
	return t.freeAll(root, 0, 0, true)
}

// FreeOwn frees the runs of the committed tree rooted at root that the tree
// itself owns, its nodes and blobs, and not the trees of the nested buckets
// its leaves record. Used when a bucket is deleted that the transaction
// opened: its nested buckets are freed as they are now, not as committed.
func FreeOwn(env *Env, root page.Ref) error {
	t := Open(env, root)
	return t.freeAll(root, 0, 0, false)
}

// freeAll frees the run ref and what it reaches; nested buckets' trees too
// if nested.
func (t *Tree) freeAll(ref page.Ref, depth, nest int, nested bool) error {
	if ref.IsZero() {
		return nil
	}
	if depth >= MaxDepth || nest > MaxNesting {
		err := page.Corruptf(ref.ID, "tree deeper than %d levels or buckets nested deeper than %d (cycle?)", MaxDepth, MaxNesting)
		t.env.fail(err)
		return err
	}
	p, err := t.env.readNode(ref)
	if err != nil {
		t.env.fail(err)
		return err
	}
	for i := 0; i < p.Count(); i++ {
		if !p.IsLeaf() {
			if err := t.freeAll(p.BranchChild(i), depth+1, nest, nested); err != nil {
				return err
			}
			continue
		}
		flags, _, v, err := p.LeafElem(i)
		if err != nil {
			t.env.fail(err)
			return err
		}
		switch flags {
		case page.FlagBlob:
			if err := t.freeBlob(v); err != nil {
				return err
			}
		case page.FlagBucket:
			if !nested {
				continue
			}
			rec, err := page.DecodeBucketRecord(ref.ID, v)
			if err != nil {
				t.env.fail(err)
				return err
			}
			if err := t.freeAll(rec.Root, 0, nest+1, true); err != nil {
				return err
			}
		}
	}
	return t.env.Alloc.Free(ref.ID, p.Header().Pages(), ref.Txid)
}

package boltfile

import (
	"github.com/rivetkv/rivet/internal/digest"
	"github.com/rivetkv/rivet/internal/page"
)

// Walk calls fn for every entry of the file's canonical stream (package
// digest): buckets and keys in the order the pages hold them, depth first,
// straight from bbolt's pages — a second reading of the format, apart from
// Source's translation, so that a conversion is verified against the file
// by a path that did not make the copy. Keys and values alias the file's
// bytes. It enters each page at most once (a page reached twice is
// corruption), so it ends on any file in time bounded by its pages.
func (f *File) Walk(fn func(digest.Entry) error) error {
	w := &walker{f: f, seen: make([]uint64, (f.meta.HWM+63)/64), fn: fn}
	return w.tree(f.meta.Root, 0, 0)
}

type walker struct {
	f    *File
	seen []uint64
	fn   func(digest.Entry) error
}

// tree walks the subtree at page id of a bucket nested nest deep (0: the
// root bucket, whose entries must all be buckets).
func (w *walker) tree(id uint64, depth, nest int) error {
	if depth >= MaxDepth {
		return page.Corruptf(id, "bbolt tree deeper than %d levels (a cycle?)", MaxDepth)
	}
	p, err := w.f.Node(id)
	if err != nil {
		return err
	}
	for q := id; q < id+p.pages; q++ {
		if w.seen[q/64]&(1<<(q%64)) != 0 {
			return page.Corruptf(q, "bbolt page reachable twice (a shared subtree or a cycle)")
		}
		w.seen[q/64] |= 1 << (q % 64)
	}
	for i := 0; i < p.Count(); i++ {
		if !p.IsLeaf() {
			_, child, err := p.BranchElem(i)
			if err != nil {
				return err
			}
			if err := w.tree(child, depth+1, nest); err != nil {
				return err
			}
			continue
		}
		bucket, k, v, err := p.LeafElem(i)
		if err != nil {
			return err
		}
		if err := w.element(id, bucket, k, v, nest); err != nil {
			return err
		}
	}
	return nil
}

// element emits leaf element k of page id: a key, or a bucket with its
// contents.
func (w *walker) element(id uint64, bucket bool, k, v []byte, nest int) error {
	if !bucket {
		if nest == 0 {
			return &digest.WalkError{Key: k, Err: digest.ErrKeyOutsideBucket}
		}
		return w.fn(digest.Entry{Kind: digest.KindKV, Key: k, Value: v})
	}
	if nest >= digest.MaxNesting {
		return page.Corruptf(id, "bbolt buckets nested deeper than %d (a cycle?)", digest.MaxNesting)
	}
	b, err := w.f.DecodeBucket(id, v)
	if err != nil {
		return err
	}
	if err := w.fn(digest.Entry{Kind: digest.KindBucket, Key: k, Seq: b.Sequence}); err != nil {
		return err
	}
	if b.Root != 0 {
		if err := w.tree(b.Root, 0, nest+1); err != nil {
			return err
		}
	} else {
		in := b.Inline
		for i := 0; i < in.Count(); i++ {
			_, ik, iv, _ := in.LeafElem(i) // DecodeBucket validated every element, all plain
			if err := w.fn(digest.Entry{Kind: digest.KindKV, Key: ik, Value: iv}); err != nil {
				return err
			}
		}
	}
	return w.fn(digest.Entry{Kind: digest.KindEnd})
}

package rivet

import (
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
)

// Stats returns the resources the bucket and its nested buckets use, as of
// the last commit (changes of a write transaction count once committed).
func (b *Bucket) Stats() BucketStats {
	var s BucketStats
	if b.ended() {
		return s
	}
	// seen makes the walk visit each run once: on a corrupt file whose
	// branches point to one subtree many times (a DAG, no cycle) it would
	// otherwise take exponentially many steps.
	seen := map[page.ID]struct{}{}
	b.statsOf(page.BucketRecord{Root: b.tree.Root(), Inline: b.tree.Inline()}, &s, 0, seen)
	return s
}

// statsOf computes into s (fresh) the stats of the bucket rec describes and
// of everything nested in it. As in bbolt, Depth is the bucket's own tree
// depth plus the largest Depth among its nested buckets, and an empty or
// inline bucket is counted as inline with one level.
func (b *Bucket) statsOf(rec page.BucketRecord, s *BucketStats, depth int, seen map[page.ID]struct{}) {
	s.BucketN++
	switch {
	case rec.Inline != nil:
		s.InlineBucketN++
		s.InlineBucketInuse += len(rec.Inline) - bucketHeaderShare
		if n, err := page.InlineLeaf(rec.Root.ID, rec.Inline); err == nil {
			s.KeyN += n.Count()
		}
		s.Depth = max(s.Depth, 1)
	case rec.Root.IsZero():
		// An empty bucket has no page; bbolt keeps it as an empty inline
		// bucket, and its users' tests count it so.
		s.InlineBucketN++
		s.InlineBucketInuse += page.RecordSize - bucketHeaderShare
		s.Depth = max(s.Depth, 1)
	default:
		childDepth := 0
		b.nodeStats(rec.Root, s, 1, depth, seen, &childDepth)
		s.Depth += childDepth
	}
}

// bucketHeaderShare is the part of a rivet bucket record that stands for
// bbolt's 16-byte bucket header, which bbolt leaves out of
// InlineBucketInuse (the rest of the 32-byte record stands for bbolt's
// 16-byte page header, which it counts). With it InlineBucketInuse reads
// as bbolt's would for the same bucket.
const bucketHeaderShare = 16

// nodeStats adds the run ref and its subtree to s; childDepth receives the
// largest Depth of a nested bucket met.
func (b *Bucket) nodeStats(ref page.Ref, s *BucketStats, level, depth int, seen map[page.ID]struct{}, childDepth *int) {
	env := b.tx.env
	if env.Err != nil {
		return
	}
	if level+depth > btree.MaxDepth*2 {
		env.Err = firstErr(env.Err, page.Corruptf(ref.ID, "tree deeper than %d levels (cycle?)", btree.MaxDepth))
		return
	}
	if _, dup := seen[ref.ID]; dup {
		env.Err = firstErr(env.Err, page.Corruptf(ref.ID, "page reachable twice"))
		return
	}
	seen[ref.ID] = struct{}{}
	n, err := env.ReadNode(ref)
	if err != nil {
		env.Err = firstErr(env.Err, err)
		return
	}
	if s.Depth < level {
		s.Depth = level
	}
	h := n.Header()
	alloc := int(h.Pages()) * env.PageSize
	if !n.IsLeaf() {
		s.BranchPageN++
		s.BranchOverflowN += int(h.Overflow)
		s.BranchAlloc += alloc
		used := page.HeaderSize + n.Count()*page.BranchElemSize
		for i := 0; i < n.Count(); i++ {
			k, err := n.BranchKey(i)
			if err != nil {
				env.Err = firstErr(env.Err, err)
				return
			}
			used += len(k)
		}
		s.BranchInuse += used
		for i := 0; i < n.Count(); i++ {
			b.nodeStats(n.BranchChild(i), s, level+1, depth, seen, childDepth)
		}
		return
	}
	s.LeafPageN++
	s.LeafOverflowN += int(h.Overflow)
	s.LeafAlloc += alloc
	used := page.HeaderSize + n.Count()*page.LeafElemSize
	for i := 0; i < n.Count(); i++ {
		flags, k, v, err := n.LeafElem(i)
		if err != nil {
			env.Err = firstErr(env.Err, err)
			return
		}
		used += len(k) + len(v)
		s.KeyN++
		switch flags {
		case page.FlagBucket:
			rec, err := page.DecodeBucketRecord(ref.ID, v)
			if err != nil {
				env.Err = firstErr(env.Err, err)
				return
			}
			var sub BucketStats
			b.statsOf(rec, &sub, depth+level, seen)
			*childDepth = max(*childDepth, sub.Depth)
			sub.Depth = 0
			s.Add(sub)
		case page.FlagBlob:
			ref, err := page.DecodeBlobRef(ref.ID, v)
			if err != nil {
				env.Err = firstErr(env.Err, err)
				return
			}
			// Blob pages count as leaf overflow, as bbolt counts the
			// overflow pages of a large value's leaf.
			s.LeafOverflowN += int((ref.Length + page.BlobPayloadStart + uint64(env.PageSize) - 1) / uint64(env.PageSize))
		}
	}
	s.LeafInuse += used
}

// BucketStructure describes a bucket and its nested buckets (Inspect).
type BucketStructure struct {
	Name     string            `json:"name"`
	KeyN     int               `json:"keyN"`
	Children []BucketStructure `json:"buckets,omitempty"`
}

// Inspect returns the structure of the bucket: its nested buckets and the
// number of plain keys in each. As in bbolt, the bucket Inspect is called
// on is named "root" and its nested buckets by their keys. An ended
// transaction's bucket yields an empty "root".
func (b *Bucket) Inspect() BucketStructure {
	return b.inspect("root")
}

func (b *Bucket) inspect(name string) BucketStructure {
	bs := BucketStructure{Name: name}
	if b.ended() {
		return bs
	}
	c := b.tree.Cursor()
	for k, _, flags, ok := c.First(); ok; k, _, flags, ok = c.Next() {
		if flags == page.FlagBucket {
			if child := b.Bucket(k); child != nil {
				bs.Children = append(bs.Children, child.inspect(string(k)))
			}
			continue
		}
		bs.KeyN++
	}
	return bs
}

// Inspect returns the structure of the whole database (empty once the
// transaction has ended).
func (tx *Tx) Inspect() BucketStructure {
	if tx.ended() {
		return BucketStructure{Name: "root"}
	}
	return tx.root.Inspect()
}

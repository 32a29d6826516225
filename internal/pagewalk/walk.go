package pagewalk

import (
	"encoding/binary"
	"errors"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/btree"
	"github.com/rivetkv/rivet/internal/page"
)

// Per-page state bits of a Walk.
const (
	kindMask  = 0x0f // Branch, Leaf, Blob or Damaged; 0: not reached
	runStart  = 0x10 // the first page of a run
	sumShift  = 5    // Checksum in bits 5-6
	maxErrors = 1 << 20
)

// owner is an entry of a Walk's owner table.
type owner struct {
	bucket [][]byte
	key    []byte // blobs: the key
}

// Walk is the state of one walk over a snapshot. Its steps run in order:
// New, Trees, ReadFreeSet, Emit.
//
// Invariant: every per-page slice has one entry per page in [0, pages),
// where pages = min(HWM, the pages data holds): allocation is bounded by
// the file's size even when a damaged meta claims a larger HWM.
type Walk struct {
	ps    int
	meta  *page.Meta
	data  []byte
	hwm   uint64 // the meta's HWM
	pages uint64 // pages present in data, at most hwm
	rp    uint64 // pages per region

	state  []uint8
	owner  []uint32 // index into owners, for pages of reached runs
	depth  []uint8
	owners []owner
	byPath map[string]uint32
	// lastPath and lastOwner cache the bucket of the previous run.
	lastPath  [][]byte
	lastOwner uint32

	// Readahead, if set, is asked for the children of each branch the walk
	// of the trees enters (btree.Walker.Readahead).
	Readahead btree.Readahead

	errs    map[page.ID]error // the first problem the walk found per page
	walkErr bool              // the walk found a problem
	other   error             // a problem naming no page

	free      []uint64         // bit p: page p free (only where known)
	regionErr map[uint64]error // regions whose free set is unknown, and why
	freeErr   error            // set: the whole free set is unknown, and why
	countErr  error            // the maps do not add up to the meta's free count
}

// New starts a walk over the snapshot meta describes, whose file is
// mapped at data (pages of pageSize bytes; data may hold fewer pages than
// the meta's HWM).
func New(data []byte, pageSize int, meta *page.Meta) *Walk {
	hwm := meta.HWM
	pages := min(hwm, uint64(len(data))/uint64(pageSize))
	return &Walk{
		ps: pageSize, meta: meta, data: data, hwm: hwm, pages: pages,
		rp:     page.RegionPages(pageSize),
		state:  make([]uint8, pages),
		owner:  make([]uint32, pages),
		depth:  make([]uint8, pages),
		owners: []owner{{}}, // 0: no owner
		byPath: map[string]uint32{},
		errs:   map[page.ID]error{},
	}
}

// fetch returns the bytes of pages [id, id+n), if the file holds them.
func (w *Walk) fetch(id page.ID, n uint64) ([]byte, error) {
	if n == 0 || id >= w.pages || n > w.pages-id {
		return nil, page.Corruptf(id, "run of %d pages beyond the file", n)
	}
	return w.data[id*uint64(w.ps) : (id+n)*uint64(w.ps)], nil
}

// fixed reports whether page p is a meta or a map slot.
func (w *Walk) fixed(p page.ID) bool {
	r := p / w.rp
	return p < 2 || p < page.RegionFirstData(w.ps, r)
}

// Trees validates the trees as Check does (the btree Walker), then finds
// the owner of every run it accepted and of every run it rejected below an
// accepted parent (Walker.Owners).
func (w *Walk) Trees() {
	report := func(err error) bool {
		w.walkErr = true
		var ce *rerrors.CorruptError
		if errors.As(err, &ce) {
			if _, ok := w.errs[ce.Page]; !ok && len(w.errs) < maxErrors {
				w.errs[ce.Page] = err
			}
		} else if w.other == nil {
			w.other = err
		}
		return true
	}
	walker := btree.Walker{
		Fetch:           w.fetch,
		PageSize:        w.ps,
		HWM:             w.hwm,
		All:             true,
		VerifyChecksums: true,
		Report:          report,
		Readahead:       w.Readahead,
		Visit: func(id page.ID, n uint64, t page.Type) error {
			end := min(id+n, w.pages)
			for p := id; p < end; p++ {
				if w.state[p] != 0 {
					// Check's words, so both report the same problem.
					return page.Corruptf(p, "page reachable twice (%v run at %d)", t, id)
				}
			}
			kind := Leaf
			switch t {
			case page.TypeBranch:
				kind = Branch
			case page.TypeBlob:
				kind = Blob
			}
			for p := id; p < end; p++ {
				w.state[p] = uint8(kind) | uint8(ChecksumOK)<<sumShift
			}
			if id < end {
				w.state[id] |= runStart
			}
			return nil
		},
	}
	_ = walker.Walk(w.meta.Root)

	accepted := func(id page.ID) bool {
		if id >= w.pages || w.state[id]&runStart == 0 {
			return false
		}
		k := Kind(w.state[id] & kindMask)
		return k == Branch || k == Leaf || k == Blob
	}
	// The second walk never reads past the file: its HWM is the pages the
	// file holds, so a reference beyond them is reported, with Pages 0,
	// for its parent to carry.
	owners := btree.Walker{Fetch: w.fetch, PageSize: w.ps, HWM: w.pages}
	owners.Owners(w.meta.Root, accepted, w.owned)
}

// owned records what Walker.Owners reports about one run.
func (w *Walk) owned(r btree.RunOwner) {
	if r.Pages == 0 {
		// A reference outside the file: the walk's error names the
		// missing page; it belongs to the parent that holds the reference.
		if err, ok := w.errs[r.ID]; ok {
			if _, has := w.errs[r.Parent]; !has {
				w.errs[r.Parent] = err
			}
			if r.ID < 2 || r.ID >= w.pages {
				delete(w.errs, r.ID)
			}
		}
		return
	}
	o := w.ownerOf(r.Bucket, r.Key, r.Type == page.TypeBlob || r.Key != nil)
	depth := uint8(min(r.Depth, 255))
	if r.Accepted {
		end := min(r.ID+r.Pages, w.pages)
		for p := r.ID; p < end; p++ {
			w.owner[p], w.depth[p] = o, depth
		}
		return
	}
	if w.state[r.ID] != 0 {
		// The reference points into a run reached another way: the walk
		// reported it against the run it lands in.
		return
	}
	sum := ChecksumBad
	if r.Summed && r.ChecksumOK {
		sum = ChecksumOK
	}
	end := min(r.ID+r.Pages, w.pages)
	for p := r.ID; p < end; p++ {
		if w.state[p] != 0 || (p > r.ID && w.fixed(p)) {
			break
		}
		w.state[p] = uint8(Damaged) | uint8(sum)<<sumShift
		w.owner[p], w.depth[p] = o, depth
	}
	w.state[r.ID] |= runStart
	if _, ok := w.errs[r.ID]; !ok {
		// The walk stopped at the parent; the run is named by its own
		// page, with the parent's problem as the reason.
		if perr, ok := w.errs[r.Parent]; ok {
			w.errs[r.ID] = page.Corruptf(r.ID, "not validated: its parent page %d failed a check (%v)", r.Parent, perr)
		} else {
			w.errs[r.ID] = page.Corruptf(r.ID, "not validated (parent page %d)", r.Parent)
		}
	}
}

// ownerOf returns the owner table index of bucket (and, for a blob, key),
// adding it if needed. The table holds one entry per bucket with a page
// and one per blob: never more entries than runs.
func (w *Walk) ownerOf(bucket [][]byte, key []byte, blob bool) uint32 {
	o, ok := w.lastOwner, w.lastOwner != 0 && sameSlice(bucket, w.lastPath)
	if !ok {
		o = w.internBucket(bucket)
		w.lastPath, w.lastOwner = bucket, o
	}
	if !blob || len(w.owners) >= 1<<32-1 {
		return o
	}
	w.owners = append(w.owners, owner{bucket: w.owners[o].bucket, key: append([]byte{}, key...)})
	return uint32(len(w.owners) - 1)
}

// sameSlice reports whether a and b are the same slice (Walker.Owners
// passes one path slice for all the runs of a bucket's tree).
func sameSlice(a, b [][]byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// internBucket returns the owner table index of bucket, adding a copy of
// the path if it is new.
func (w *Walk) internBucket(bucket [][]byte) uint32 {
	var id []byte
	for _, name := range bucket {
		id = binary.AppendUvarint(id, uint64(len(name)))
		id = append(id, name...)
	}
	o, ok := w.byPath[string(id)]
	if !ok {
		if len(w.owners) >= 1<<32-1 {
			return 0
		}
		path := make([][]byte, len(bucket))
		for i, name := range bucket {
			path[i] = append([]byte{}, name...)
		}
		o = uint32(len(w.owners))
		w.owners = append(w.owners, owner{bucket: path})
		w.byPath[string(id)] = o
	}
	return o
}

package vfs

import (
	"math/rand/v2"
	"slices"
)

// CrashFS is an in-memory FS that simulates losing power.
//
// It behaves like a MemFS (which it embeds) and in addition keeps, for every
// file, its durable image (the contents as of its last successful
// Sync(SyncData)) and the writes and truncates issued since, in order. Crash
// builds the FS a machine would find after a power failure at this moment:
// the durable image plus some of the unsynced operations, in any order, some
// of them torn at sector boundaries. The model is docs/design.md §8:
//
//   - a Sync(SyncData) that returned makes every earlier write and truncate of
//     that file durable;
//   - writes not followed by a flush may be lost, reordered, or torn at any
//     sector boundary, a torn sector holding old or new bytes, never a mix;
//   - Sync(SyncBarrier) orders: no write issued after a barrier survives
//     unless every write issued before it survived, intact. It does not make
//     anything durable (that is macOS's F_BARRIERFSYNC; see
//     CrashOptions.BarrierDurable for platforms where it is a full flush).
//
// Directory operations — creating a file, Remove, Rename, Link — are
// journaled too, until SyncDir makes them durable: a crash keeps the durable
// directory plus a prefix of the operations issued since, in order, and
// loses the rest. A file whose creation is lost is gone with its bytes; a
// lost rename leaves the old name; a rename that survives is whole (the
// new name names the renamed file). That is what Linux's journaling file
// systems give (docs/design.md §11.3): ext4 and XFS commit metadata
// operations to their journal in order, each rename atomically, and only
// a flush of the directory (or of the journal) promises that a given one
// survives. A file's bytes and its name are independent: an fsync of the
// file does not make its name durable, nor SyncDir its bytes.
//
// The live FS keeps working after Crash, so one run can be crashed at many
// points. Crash states are built from a snapshot and share nothing with it.
type CrashFS struct {
	*MemFS
}

// NewCrashable returns an empty crash-simulating FS.
func NewCrashable() *CrashFS {
	fs := NewMem()
	fs.journal = true
	return &CrashFS{MemFS: fs}
}

// CrashOptions selects what survives a simulated crash.
type CrashOptions struct {
	// KeepProbability is the chance that each unsynced write or truncate
	// reaches the disk. 0 keeps none of them, 1 all of them.
	KeepProbability float64
	// TearProbability is the chance that a write that reaches the disk is
	// torn: each of its sectors independently gets the new bytes or keeps
	// the old ones.
	TearProbability float64
	// SectorSize is the tearing granularity in bytes; 0 means 512. Sectors
	// are aligned to the start of the file.
	SectorSize int
	// BarrierDurable treats Sync(SyncBarrier) as a full flush, as it is on
	// Linux and Windows.
	BarrierDurable bool
}

// DefaultCrashOptions keeps about half of the unsynced operations and tears a
// quarter of the writes it keeps.
var DefaultCrashOptions = CrashOptions{KeepProbability: 0.5, TearProbability: 0.25}

// Crash returns a new CrashFS holding what each file could contain after a
// power failure now: its durable image, then, for the writes since its last
// flush, a random subset (each kept with opts.KeepProbability) applied in a
// random order, each possibly torn per sector (opts.TearProbability). With
// barriers, a random number of whole barrier-separated groups survive intact
// first and the random choice applies to the group after them.
//
// The result has no open files and no locks. The same rng state and the
// same history give the same result. A nil rng is a fixed seed.
func (c *CrashFS) Crash(rng *rand.Rand, opts CrashOptions) *CrashFS {
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	if opts.SectorSize <= 0 {
		opts.SectorSize = 512
	}
	c.mu.Lock()
	keep := 0
	if len(c.dirOps) > 0 {
		// Drawn only when there is a choice, so that seeds of crashes
		// without pending directory operations replay as before.
		keep = rng.IntN(len(c.dirOps) + 1)
	}
	c.mu.Unlock()
	return c.rebuild(keep, func(n *memNode) []byte { return n.crashImage(rng, opts) })
}

// CrashKeepNone returns a new CrashFS in which every file holds only its
// durable image and the directory only its durable names: every unsynced
// write, truncate and directory operation was lost.
func (c *CrashFS) CrashKeepNone() *CrashFS {
	return c.rebuild(0, func(n *memNode) []byte { return slices.Clone(n.durable) })
}

// CrashKeepAll returns a new CrashFS in which every file holds its current
// contents under its current names: every unsynced write, truncate and
// directory operation reached the disk intact.
func (c *CrashFS) CrashKeepAll() *CrashFS {
	return c.rebuild(-1, func(n *memNode) []byte { return slices.Clone(n.buf) })
}

// CrashDirOps returns how many directory operations are not yet durable:
// a crash keeps a prefix of them (0 to this many), CrashKeeping says which.
func (c *CrashFS) CrashDirOps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dirOps)
}

// CrashKeeping returns a new CrashFS in which the first keepDirOps pending
// directory operations survived (see CrashDirOps) and every file holds its
// durable image with each unsynced write and truncate applied per opts and
// rng, as in Crash. Tests enumerate keepDirOps to cover every directory
// state a crash may leave.
func (c *CrashFS) CrashKeeping(keepDirOps int, rng *rand.Rand, opts CrashOptions) *CrashFS {
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	if opts.SectorSize <= 0 {
		opts.SectorSize = 512
	}
	return c.rebuild(keepDirOps, func(n *memNode) []byte { return n.crashImage(rng, opts) })
}

// rebuild makes a fresh CrashFS whose directory is the durable one with the
// first keep pending directory operations applied (all of them if keep is
// negative or too large), and whose files hold image(node), durably. A file
// with several names (Link) stays one file.
func (c *CrashFS) rebuild(keep int, image func(n *memNode) []byte) *CrashFS {
	c.mu.Lock()
	names := make(map[string]*memNode, len(c.durableNames))
	for name, n := range c.durableNames {
		names[name] = n
	}
	if keep < 0 || keep > len(c.dirOps) {
		keep = len(c.dirOps)
	}
	for _, op := range c.dirOps[:keep] {
		op.apply(names)
	}
	c.mu.Unlock()
	// Files are visited in name order so that a seeded rng gives the same
	// crash every time.
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	slices.Sort(sorted)
	out := NewCrashable()
	made := make(map[*memNode]*memNode)
	for _, name := range sorted {
		n := names[name]
		m, ok := made[n]
		if !ok {
			n.mu.RLock()
			img := image(n)
			n.mu.RUnlock()
			m = &memNode{journal: true, buf: img, durable: slices.Clone(img)}
			made[n] = m
		}
		out.files[name] = m
		out.durableNames[name] = m
	}
	return out
}

// crashImage computes one possible post-crash image. Callers hold n.mu.
func (n *memNode) crashImage(rng *rand.Rand, opts CrashOptions) []byte {
	img := slices.Clone(n.durable)
	ops := n.pending

	// Operations before a barrier that is known to have completed reach the
	// disk whole and in order; only the operations after it are at risk.
	if opts.BarrierDurable {
		last := -1
		for i, op := range ops {
			if op.kind == opBarrier {
				last = i
			}
		}
		for _, op := range ops[:last+1] {
			img = op.apply(img)
		}
		ops = ops[last+1:]
	} else {
		var groups [][]crashOp
		start := 0
		for i, op := range ops {
			if op.kind == opBarrier {
				groups = append(groups, ops[start:i])
				start = i + 1
			}
		}
		groups = append(groups, ops[start:])
		cut := rng.IntN(len(groups))
		for _, g := range groups[:cut] {
			for _, op := range g {
				img = op.apply(img)
			}
		}
		ops = groups[cut]
	}

	var kept []crashOp
	for _, op := range ops {
		if rng.Float64() < opts.KeepProbability {
			kept = append(kept, op)
		}
	}
	rng.Shuffle(len(kept), func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })
	for _, op := range kept {
		if op.kind == opWrite && rng.Float64() < opts.TearProbability {
			img = tornWrite(img, op.off, op.data, opts.SectorSize, rng)
			continue
		}
		img = op.apply(img)
	}
	return img
}

type opKind uint8

const (
	opWrite opKind = iota + 1
	opTruncate
	opBarrier
)

// crashOp is one journaled operation: a write of data at off, a truncate to
// off, or a barrier.
type crashOp struct {
	kind opKind
	off  int64
	data []byte
}

// apply performs op on an image (a byte slice whose length is the file size
// and whose tail past the length is zero).
func (op crashOp) apply(img []byte) []byte {
	switch op.kind {
	case opWrite:
		if end := int(op.off) + len(op.data); end > len(img) {
			img = resizeBytes(img, end)
		}
		copy(img[op.off:], op.data)
	case opTruncate:
		img = resizeBytes(img, int(op.off))
	}
	return img
}

// tornWrite applies a write sector by sector, each sector independently
// getting the new bytes or keeping the old ones. A write that extends the
// file still extends it: the size is metadata, and a sector past the old end
// that keeps its old bytes reads as zeros.
func tornWrite(img []byte, off int64, data []byte, sector int, rng *rand.Rand) []byte {
	end := int(off) + len(data)
	if end > len(img) {
		img = resizeBytes(img, end)
	}
	for pos := int(off); pos < end; {
		// next is the end of pos's sector, computed so that a huge sector
		// size cannot overflow.
		next := end
		if start := pos - pos%sector; sector < end-start {
			next = start + sector
		}
		if rng.IntN(2) == 0 {
			copy(img[pos:next], data[pos-int(off):next-int(off)])
		}
		pos = next
	}
	return img
}

package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// MemFS is an in-memory FS of named files, for tests. It is safe for
// concurrent use.
//
// A file's contents live in one []byte. Map returns a slice of that byte
// slice's backing array, so a mapping sees later writes without copying,
// like a shared memory map of a real file.
//
// Invariant (mappings): a file's backing array is replaced only when Map asks
// for more capacity than it has, or when a WriteAt or Truncate extends the
// file past its capacity. Map raises the capacity to at least the mapped
// length, so as long as no write or truncate extends the file past the
// longest mapping taken, every mapping sees every later write below its
// length. After a replacement, earlier mappings keep pointing at the old
// array: they still show the bytes written before it, but not later writes.
// That is acceptable for rivet, which through an older mapping only reads
// pages nobody rewrites (copy-on-write), and which maps again as soon as the
// file grows past its current mapping.
//
// Invariant (zero tail): the bytes of a backing array between the file size
// and the array's capacity are zero, so growing a file, by Truncate or by a
// write past the end, exposes zeros, and the reserved part of a mapping reads
// as zeros rather than faulting.
//
// Map allocates the whole mapped length up front, in Go memory. Keep mapping
// lengths in tests small (the pager's Options.InitialMmapSize); a 1 GiB
// reserve costs a 1 GiB allocation here. Files and mappings are limited to
// 4 GiB; beyond that, calls fail with syscall.EFBIG.
//
// Locks behave like flock: they belong to the open file (two OpenFile calls
// of the same name conflict), an exclusive lock conflicts with every other
// holder, a shared one with an exclusive holder, and Close drops the lock.
type MemFS struct {
	mu    sync.Mutex
	files map[string]*memNode
	// journal makes every node keep a durable image and the operations since
	// the last Sync, and the FS keep its durable names and the directory
	// operations since they were synced; it is set for the MemFS inside a
	// CrashFS.
	journal bool
	// durableNames is the directory as a crash would find it if every
	// operation in dirOps were lost. Guarded by mu; journal only.
	durableNames map[string]*memNode
	// dirOps lists the creations, removals, renames and links not yet made
	// durable by SyncDir, in issue order. Invariant: applying dirOps to
	// durableNames yields files. Guarded by mu; journal only.
	dirOps []dirOp
	// free is what FreeSpace reports; negative: unknown (the default).
	free int64
}

// NewMem returns an empty in-memory FS.
func NewMem() *MemFS {
	return &MemFS{files: make(map[string]*memNode), durableNames: make(map[string]*memNode), free: -1}
}

// dirOpKind is the kind of a journaled directory operation.
type dirOpKind uint8

const (
	dirCreate dirOpKind = iota + 1
	dirRemove
	dirRename
	dirLink
)

// dirOp is one directory operation: create name (as node), remove name,
// rename name to target, or link target to name's file.
type dirOp struct {
	kind   dirOpKind
	name   string
	target string
	node   *memNode
}

// apply performs op on a directory (name -> file).
func (op dirOp) apply(names map[string]*memNode) {
	switch op.kind {
	case dirCreate:
		names[op.name] = op.node
	case dirRemove:
		delete(names, op.name)
	case dirRename:
		if n, ok := names[op.name]; ok {
			delete(names, op.name)
			names[op.target] = n
		}
	case dirLink:
		if n, ok := names[op.name]; ok {
			names[op.target] = n
		}
	}
}

// inDir reports whether op changes a name in dir.
func (op dirOp) inDir(dir string) bool {
	if filepath.Dir(op.name) == dir {
		return true
	}
	return op.target != "" && filepath.Dir(op.target) == dir
}

// logDirOp journals op. Callers hold fs.mu.
func (fs *MemFS) logDirOp(op dirOp) {
	if fs.journal {
		fs.dirOps = append(fs.dirOps, op)
	}
}

// OpenFile opens the named file. It honours os.O_CREATE, os.O_EXCL,
// os.O_TRUNC and the access mode (os.O_RDONLY, os.O_WRONLY, os.O_RDWR);
// perm is ignored. Errors are *os.PathError wrapping os.ErrNotExist,
// os.ErrExist or os.ErrPermission, like the os package's.
func (fs *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	n, ok := fs.files[name]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		fs.mu.Unlock()
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		fs.mu.Unlock()
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case !ok:
		n = &memNode{journal: fs.journal}
		fs.files[name] = n
		fs.logDirOp(dirOp{kind: dirCreate, name: name, node: n})
	}
	fs.mu.Unlock()

	f := &memFile{node: n, name: name, flag: flag}
	if flag&os.O_TRUNC != 0 {
		if !f.writable() {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrPermission}
		}
		if err := n.truncate(0); err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	return f, nil
}

// Remove deletes the named file. Files already open keep their contents, as
// on Unix.
func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, ok := fs.files[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(fs.files, name)
	fs.logDirOp(dirOp{kind: dirRemove, name: name})
	return nil
}

// Rename renames oldname to newname, replacing newname atomically. Errors
// are *os.LinkError wrapping os.ErrNotExist, like the os package's.
func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, ok := fs.files[oldname]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	if oldname == newname {
		return nil
	}
	delete(fs.files, oldname)
	fs.files[newname] = n
	fs.logDirOp(dirOp{kind: dirRename, name: oldname, target: newname})
	return nil
}

// Link gives oldname's file the second name newname. Errors are
// *os.LinkError wrapping os.ErrNotExist or os.ErrExist.
func (fs *MemFS) Link(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, ok := fs.files[oldname]
	if !ok {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	if _, exists := fs.files[newname]; exists {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: os.ErrExist}
	}
	fs.files[newname] = n
	fs.logDirOp(dirOp{kind: dirLink, name: oldname, target: newname})
	return nil
}

// SyncDir makes durable every directory operation issued so far up to the
// last one on a name in dir (the ones before it too: a journaling file
// system commits its metadata in order, docs/design.md §11.3).
func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir = filepath.Clean(dir)
	last := -1
	for i, op := range fs.dirOps {
		if op.inDir(dir) {
			last = i
		}
	}
	for _, op := range fs.dirOps[:last+1] {
		op.apply(fs.durableNames)
	}
	fs.dirOps = append(fs.dirOps[:0], fs.dirOps[last+1:]...)
	return nil
}

// SameFile reports whether name names the file f (a MemFS file, under any
// wrappers) is open on.
func (fs *MemFS) SameFile(f File, name string) (bool, error) {
	m, ok := unwrap(f).(*memFile)
	if !ok {
		return false, fmt.Errorf("vfs: SameFile of a %T, not a MemFS file", f)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.files[name] == m.node, nil
}

// FreeSpace returns what SetFreeSpace set; by default the space is
// unknown (errors.ErrUnsupported).
func (fs *MemFS) FreeSpace(string) (int64, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.free < 0 {
		return 0, errors.ErrUnsupported
	}
	return fs.free, nil
}

// SetFreeSpace sets what FreeSpace reports (negative: unknown). It limits
// nothing: writes still succeed.
func (fs *MemFS) SetFreeSpace(n int64) {
	fs.mu.Lock()
	fs.free = n
	fs.mu.Unlock()
}

// node returns the named file's node, or nil.
func (fs *MemFS) node(name string) *memNode {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.files[name]
}

// memNode is a file's contents, shared by every open of its name (an inode).
type memNode struct {
	mu sync.RWMutex
	// buf holds the contents: len(buf) is the file size.
	// Invariant: buf[len(buf):cap(buf)] is all zero.
	buf []byte

	// journal is fixed at creation; durable and pending are used only when it
	// is set and are guarded by mu.
	journal bool
	// durable is the contents as of the last successful Sync.
	durable []byte
	// pending lists the writes, truncates and barriers since the last Sync,
	// in issue order. Invariant: applying pending to durable yields buf.
	pending []crashOp

	lockMu sync.Mutex
	// Invariant: exclusive != nil implies len(shared) == 0.
	exclusive *memFile
	shared    map[*memFile]struct{}
}

// memMaxSize bounds in-memory file sizes and mapping lengths. Go does not
// report an allocation that is too large as an error (it panics, or aborts the
// process when the OS refuses the memory), so the limit is checked first.
const memMaxSize = min(1<<32, maxInt)

// errTooLarge reports a size beyond memMaxSize.
var errTooLarge = syscall.EFBIG

// resize sets the size, keeping the zero-tail invariant. Callers hold mu.
func (n *memNode) resize(size int64) error {
	if size > memMaxSize {
		return errTooLarge
	}
	n.buf = resizeBytes(n.buf, int(size))
	return nil
}

// resizeBytes returns b with length size. It keeps the zero-tail invariant
// (bytes between len and cap are zero): a shrink clears the bytes it cuts
// off, and a grow past the capacity copies into a new, zeroed array.
func resizeBytes(b []byte, size int) []byte {
	switch {
	case size <= len(b):
		clear(b[size:])
		return b[:size]
	case size <= cap(b):
		return b[:size]
	}
	// Doubling keeps a run of small extending writes linear overall. An
	// overflowing double comes out negative and falls back to size.
	c := 2 * cap(b)
	if c < size {
		c = size
	}
	nb := make([]byte, size, c)
	copy(nb, b)
	return nb
}

func (n *memNode) writeAt(p []byte, off int64) error {
	if off < 0 {
		return errors.New("negative offset")
	}
	end := off + int64(len(p))
	if end < off || end > memMaxSize {
		return errTooLarge
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if end > int64(len(n.buf)) {
		if err := n.resize(end); err != nil {
			return err
		}
	}
	copy(n.buf[off:], p)
	if n.journal {
		n.pending = append(n.pending, crashOp{kind: opWrite, off: off, data: append([]byte(nil), p...)})
	}
	return nil
}

func (n *memNode) truncate(size int64) error {
	if size < 0 {
		return errors.New("negative size")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.resize(size); err != nil {
		return err
	}
	if n.journal {
		n.pending = append(n.pending, crashOp{kind: opTruncate, off: size})
	}
	return nil
}

func (n *memNode) sync(kind SyncKind) {
	if !n.journal {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if kind == SyncBarrier {
		n.pending = append(n.pending, crashOp{kind: opBarrier})
		return
	}
	// Replaying the pending operations costs what they wrote, where copying
	// buf would cost the file size on every Sync.
	for _, op := range n.pending {
		n.durable = op.apply(n.durable)
	}
	n.pending = nil
}

// memFile is one open of a memNode.
type memFile struct {
	node   *memNode
	name   string
	flag   int
	closed atomic.Bool
}

func (f *memFile) writable() bool { return f.flag&(os.O_WRONLY|os.O_RDWR) != 0 }

func (f *memFile) pathErr(op string, err error) error {
	return &os.PathError{Op: op, Path: f.name, Err: err}
}

// ReadAt reads at off; a read that reaches the end returns io.EOF with the
// bytes that were there, like os.File.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, f.pathErr("read", os.ErrClosed)
	}
	if off < 0 {
		return 0, f.pathErr("read", errors.New("negative offset"))
	}
	if f.flag&os.O_WRONLY != 0 {
		return 0, f.pathErr("read", os.ErrPermission)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := f.node
	n.mu.RLock()
	defer n.mu.RUnlock()
	if off >= int64(len(n.buf)) {
		return 0, io.EOF
	}
	c := copy(p, n.buf[off:])
	if c < len(p) {
		return c, io.EOF
	}
	return c, nil
}

// WriteAt writes p at off, extending the file (with zeros before off) if
// needed. In a CrashFS the write is journaled until the next Sync.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, f.pathErr("write", os.ErrClosed)
	}
	if !f.writable() {
		return 0, f.pathErr("write", os.ErrPermission)
	}
	if f.flag&os.O_APPEND != 0 {
		// os.File refuses WriteAt on an O_APPEND file too.
		return 0, f.pathErr("write", errors.New("WriteAt on a file opened with O_APPEND"))
	}
	if err := f.node.writeAt(p, off); err != nil {
		return 0, f.pathErr("write", err)
	}
	return len(p), nil
}

// Sync makes the file's writes durable. In a plain MemFS there is nothing to
// do; in a CrashFS, SyncData makes every earlier write and truncate of the
// file (through any open) durable and SyncBarrier records an ordering point
// (see CrashFS).
func (f *memFile) Sync(kind SyncKind) error {
	if f.closed.Load() {
		return f.pathErr("sync", os.ErrClosed)
	}
	f.node.sync(kind)
	return nil
}

// Truncate sets the size; a grow exposes zeros. In a CrashFS it is
// journaled until the next Sync.
func (f *memFile) Truncate(size int64) error {
	if f.closed.Load() {
		return f.pathErr("truncate", os.ErrClosed)
	}
	if !f.writable() {
		return f.pathErr("truncate", os.ErrPermission)
	}
	if err := f.node.truncate(size); err != nil {
		return f.pathErr("truncate", err)
	}
	return nil
}

// Size returns the current size.
func (f *memFile) Size() (int64, error) {
	if f.closed.Load() {
		return 0, f.pathErr("stat", os.ErrClosed)
	}
	f.node.mu.RLock()
	defer f.node.mu.RUnlock()
	return int64(len(f.node.buf)), nil
}

// TryLock takes the per-file lock without waiting (see MemFS for the
// flock-like rules). A holder may convert its own lock.
func (f *memFile) TryLock(exclusive bool) error {
	if f.closed.Load() {
		return f.pathErr("lock", os.ErrClosed)
	}
	n := f.node
	n.lockMu.Lock()
	defer n.lockMu.Unlock()
	// A holder may convert its own lock, as with flock, so only other
	// holders count as conflicts.
	otherExclusive := n.exclusive != nil && n.exclusive != f
	otherShared := len(n.shared)
	if _, self := n.shared[f]; self {
		otherShared--
	}
	if otherExclusive || (exclusive && otherShared > 0) {
		return ErrLocked
	}
	n.dropLocked(f)
	if exclusive {
		n.exclusive = f
	} else {
		if n.shared == nil {
			n.shared = make(map[*memFile]struct{})
		}
		n.shared[f] = struct{}{}
	}
	return nil
}

// dropLocked removes f's lock, if any. Callers hold lockMu.
func (n *memNode) dropLocked(f *memFile) {
	if n.exclusive == f {
		n.exclusive = nil
	}
	delete(n.shared, f)
}

// Unlock drops the lock; without one it does nothing, like flock.
func (f *memFile) Unlock() error {
	if f.closed.Load() {
		return f.pathErr("unlock", os.ErrClosed)
	}
	f.node.lockMu.Lock()
	f.node.dropLocked(f)
	f.node.lockMu.Unlock()
	return nil
}

// Map returns a view of the first length bytes, growing the backing array's
// capacity to length first (see MemFS for what later writes show through).
func (f *memFile) Map(length int64) (Mapping, error) {
	if f.closed.Load() {
		return nil, f.pathErr("mmap", os.ErrClosed)
	}
	l, err := checkMapLength(length)
	if err != nil {
		return nil, f.pathErr("mmap", err)
	}
	if length > memMaxSize {
		return nil, f.pathErr("mmap", errTooLarge)
	}
	n := f.node
	n.mu.Lock()
	defer n.mu.Unlock()
	if l > cap(n.buf) {
		nb := make([]byte, len(n.buf), l)
		copy(nb, n.buf)
		n.buf = nb
	}
	return &memMapping{b: n.buf[:l:l]}, nil
}

// Name returns the name the file was opened with.
func (f *memFile) Name() string { return f.name }

// Close closes the file and drops its lock. Its mappings stay valid.
func (f *memFile) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return f.pathErr("close", os.ErrClosed)
	}
	f.node.lockMu.Lock()
	f.node.dropLocked(f)
	f.node.lockMu.Unlock()
	return nil
}

// memMapping is a view of a memNode's backing array.
type memMapping struct {
	b      []byte
	closed atomic.Bool
}

// Bytes returns the view, or nil once it is closed so that a use after Close
// reads nothing rather than stale bytes.
func (m *memMapping) Bytes() []byte {
	if m.closed.Load() {
		return nil
	}
	return m.b
}

// Close releases the view; closing twice is a no-op.
func (m *memMapping) Close() error {
	m.closed.Store(true)
	return nil
}

// ReadFile returns a copy of the named file's contents. It is a test
// convenience that bypasses opens, locks and counting wrappers.
func (fs *MemFS) ReadFile(name string) ([]byte, error) {
	n := fs.node(name)
	if n == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return append([]byte(nil), n.buf...), nil
}

// Names returns the names of the files in the FS, in no particular order.
func (fs *MemFS) Names() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	names := make([]string, 0, len(fs.files))
	for name := range fs.files {
		names = append(names, name)
	}
	return names
}

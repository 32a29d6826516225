package vfs

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// maxInt is the largest int on this platform, as an int64. Mapping and
// in-memory lengths are ints, so every length that comes in as an int64 is
// checked against it before conversion.
const maxInt = int64(^uint(0) >> 1)

// OS returns the FS backed by the operating system's files.
//
// Its files use the strongest flush each platform offers for Sync (see
// SyncKind), advisory whole-file locks that conflict between two opens of the
// same file even inside one process (flock on Unix, LockFileEx on Windows),
// and read-only shared memory maps.
func OS() FS { return osFS{} }

// osFS is the FS OS returns. It is an empty struct, so FS values holding it
// compare equal to OS() (callers use that to recognise the OS file system).
type osFS struct{}

// OSWithOpener returns an FS like OS whose OpenFile calls open instead of
// os.OpenFile for the file named path (bbolt's Options.OpenFile hook, which
// opens the database file; programs such as etcd's defragmentation return
// one prepared file whatever name they are asked for). Other names, the
// files rivet keeps beside the database, open with os.OpenFile. A nil open
// gives OS().
func OSWithOpener(path string, open func(name string, flag int, perm os.FileMode) (*os.File, error)) FS {
	if open == nil {
		return OS()
	}
	// A pointer, not a struct with a func field: comparing FS values (as
	// callers do against OS()) must never meet an uncomparable type.
	return &openerFS{path: path, open: open}
}

type openerFS struct {
	path string
	open func(name string, flag int, perm os.FileMode) (*os.File, error)
}

// OpenFile opens the database file with the caller's opener, others as OS.
func (o *openerFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if name != o.path {
		return OS().OpenFile(name, flag, perm)
	}
	f, err := o.open(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("opener returned no file")}
	}
	return &osFile{f: f}, nil
}

// Remove removes a file with os.Remove.
func (o *openerFS) Remove(name string) error { return os.Remove(name) }

// Rename renames with os.Rename.
func (o *openerFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Link links with os.Link.
func (o *openerFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// SyncDir flushes the directory (syncDir).
func (o *openerFS) SyncDir(dir string) error { return syncDir(dir) }

// SameFile compares f's inode with name's (sameFile).
func (o *openerFS) SameFile(f File, name string) (bool, error) { return sameFile(f, name) }

// FreeSpace asks the file system (freeSpace).
func (o *openerFS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }

// OpenFile opens a file with os.OpenFile.
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

// Remove removes a file with os.Remove.
func (osFS) Remove(name string) error { return os.Remove(name) }

// Rename renames with os.Rename.
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Link links with os.Link.
func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// SyncDir flushes the directory (syncDir).
func (osFS) SyncDir(dir string) error { return syncDir(dir) }

// SameFile compares f's inode with name's (sameFile).
func (osFS) SameFile(f File, name string) (bool, error) { return sameFile(f, name) }

// FreeSpace asks the file system (freeSpace).
func (osFS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }

// sameFile reports whether name is the inode f, an OS file (under any
// wrappers), is open on.
func sameFile(f File, name string) (bool, error) {
	o, ok := unwrap(f).(*osFile)
	if !ok {
		return false, fmt.Errorf("vfs: SameFile of a %T, not an OS file", f)
	}
	fi, err := o.f.Stat()
	if err != nil {
		return false, err
	}
	ni, err := os.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, ni), nil
}

// osFile adapts *os.File to File. The platform-specific parts (syncFile,
// lockFile, unlockFile, mapFile) live in build-tagged files.
type osFile struct {
	f *os.File
}

// ReadAt reads with pread (os.File.ReadAt).
func (o *osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

// WriteAt writes with pwrite (os.File.WriteAt).
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }

// Sync flushes with the platform primitive kind selects (syncFile).
func (o *osFile) Sync(kind SyncKind) error { return syncFile(o.f, kind) }

// StartWriteback starts writeback of [off, off+n) where the platform can
// (startWriteback); see Writebacker.
func (o *osFile) StartWriteback(off, n int64) error { return startWriteback(o.f, off, n) }

// WaitWriteback writes [off, off+n) back and waits for it where the
// platform can (vfs.WritebackWaiter).
func (o *osFile) WaitWriteback(off, n int64) error { return waitWriteback(o.f, off, n) }

// Truncate sets the file size (ftruncate).
func (o *osFile) Truncate(size int64) error { return o.f.Truncate(size) }

// TryLock takes the platform's whole-file lock without waiting (lockFile).
func (o *osFile) TryLock(exclusive bool) error { return lockFile(o.f, exclusive) }

// Unlock releases the lock TryLock took.
func (o *osFile) Unlock() error { return unlockFile(o.f) }

// Map maps the file read-only (mapFile).
func (o *osFile) Map(length int64) (Mapping, error) { return mapFile(o.f, length) }

// Name returns the name the file was opened with.
func (o *osFile) Name() string { return o.f.Name() }

// Close closes the file; its lock goes with it, its mappings stay.
func (o *osFile) Close() error { return o.f.Close() }

// Size returns the size fstat reports.
func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// control runs fn with the file's descriptor (a HANDLE on Windows).
//
// It goes through SyscallConn rather than File.Fd because Control keeps the
// descriptor from being closed and reused while fn runs, and Fd has side
// effects (it switches the file to blocking mode).
func control(f *os.File, op string, fn func(fd uintptr) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(fd) }); err != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	if ferr != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: ferr}
	}
	return nil
}

// checkMapLength validates a length passed to Map and converts it to an int.
func checkMapLength(length int64) (int, error) {
	if length < 0 {
		return 0, fmt.Errorf("vfs: negative mapping length %d", length)
	}
	if length > maxInt {
		return 0, fmt.Errorf("vfs: mapping length %d does not fit in this platform's address space", length)
	}
	return int(length), nil
}

// sysMapping is an OS memory map. unmap is the platform's release call; it
// is nil for an empty mapping, which owns no address space.
type sysMapping struct {
	b      []byte
	unmap  func([]byte) error
	closed atomic.Bool
}

// Bytes returns the mapped bytes, or nil once the mapping is closed so that a
// use after Close shows up as an empty view rather than a fault.
func (m *sysMapping) Bytes() []byte {
	if m.closed.Load() {
		return nil
	}
	return m.b
}

// WillNeed asks the system to read [off, off+n) of the view in ahead of
// use (willNeed). It is a no-op on a closed or empty mapping and for a
// range outside the view.
func (m *sysMapping) WillNeed(off, n int64) error {
	b := m.Bytes()
	if off < 0 || n <= 0 || off >= int64(len(b)) {
		return nil
	}
	end := int64(len(b))
	if n < end-off {
		end = off + n
	}
	return willNeed(b, off, end)
}

// Resident reports whether the page holding byte off of the view is in
// memory (resident); false for a byte outside the view.
func (m *sysMapping) Resident(off int64) (bool, error) {
	b := m.Bytes()
	if off < 0 || off >= int64(len(b)) {
		return false, nil
	}
	return resident(b, off)
}

// Close unmaps. Closing twice is a no-op.
func (m *sysMapping) Close() error {
	if !m.closed.CompareAndSwap(false, true) || m.unmap == nil {
		return nil
	}
	return m.unmap(m.b)
}

// errUnsupported is returned by the operations a platform does not offer.
//
//lint:ignore U1000 used by the lock and mmap fallbacks of platforms without flock or mmap.
var errUnsupported = errors.ErrUnsupported

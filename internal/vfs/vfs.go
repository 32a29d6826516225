// Package vfs is the file seam between rivet and the operating system.
//
// Everything rivet reads or writes goes through a File obtained from an FS.
// Production uses the OS implementation; tests use an in-memory file that can
// count I/O, inject errors and simulate crashes (a file that keeps written
// and durable bytes apart).
//
// Implementations: OS (the operating system's files), NewMem (in-memory
// files), NewCrashable (in-memory files that simulate power loss), and the
// wrappers NewCounting (counts I/O) and NewFaulty (injects errors), which
// compose with any FS.
//
// Invariant: rivet never relies on a write being durable until a Sync that
// was issued after it has returned nil.
package vfs

import (
	"errors"
	"os"
)

// ErrLocked is returned by File.TryLock when another holder has the lock.
var ErrLocked = errors.New("vfs: file is locked")

// SyncKind selects the flush primitive used by File.Sync.
type SyncKind int

const (
	// SyncData makes written data durable: fdatasync on Linux, F_FULLFSYNC on
	// macOS, FlushFileBuffers on Windows.
	SyncData SyncKind = iota
	// SyncBarrier orders earlier writes before later ones without forcing
	// them out of the drive cache where the platform allows it
	// (F_BARRIERFSYNC on macOS); elsewhere it is the same as SyncData.
	SyncBarrier
)

// FS opens files and changes the names in directories.
//
// Directory operations (creating a file, Remove, Rename, Link) are durable
// only once SyncDir of the directory returned: before that a crash may
// lose them (CrashFS simulates that; docs/design.md §11.3 says what Linux
// file systems guarantee).
type FS interface {
	// OpenFile opens the named file with os.OpenFile semantics.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes the named file.
	Remove(name string) error
	// Rename renames oldname to newname, replacing newname if it exists,
	// atomically (rename(2)): newname names the old file or the new one,
	// never neither.
	Rename(oldname, newname string) error
	// Link gives the file oldname the second name newname (link(2)). It
	// fails with an error matching os.ErrExist if newname exists; file
	// systems without hard links fail otherwise.
	Link(oldname, newname string) error
	// SyncDir makes the directory operations issued so far on names in
	// dir durable (fsync of the directory). Where a platform or file
	// system cannot flush a directory it does nothing and returns nil.
	SyncDir(dir string) error
	// SameFile reports whether name names the file f is open on (the
	// same inode, not merely equal bytes). A missing name is false with
	// no error.
	SameFile(f File, name string) (bool, error)
	// FreeSpace returns the bytes the file system holding dir can still
	// give this process, or an error matching errors.ErrUnsupported where
	// that is not known.
	FreeSpace(dir string) (int64, error)
}

// Unwrapper is implemented by files that wrap another File (counting,
// fault-injecting and test wrappers), so that FS.SameFile can find the file
// underneath.
type Unwrapper interface {
	Unwrap() File
}

// unwrap returns the innermost File under any Unwrapper wrappers.
func unwrap(f File) File {
	for i := 0; i < 64; i++ {
		u, ok := f.(Unwrapper)
		if !ok {
			break
		}
		f = u.Unwrap()
	}
	return f
}

// File is an open file.
//
// Implementations must be safe for concurrent ReadAt calls and for ReadAt
// concurrent with WriteAt to disjoint ranges.
type File interface {
	// ReadAt reads len(p) bytes at off. Reading past the end returns io.EOF.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off, extending the file if needed.
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes every completed WriteAt and Truncate durable, using the
	// primitive kind selects.
	Sync(kind SyncKind) error
	// Truncate sets the file size.
	Truncate(size int64) error
	// Size returns the current file size.
	Size() (int64, error)
	// TryLock takes an advisory whole-file lock, exclusive or shared, without
	// waiting. It returns ErrLocked if another holder conflicts.
	TryLock(exclusive bool) error
	// Unlock releases the lock taken by TryLock.
	Unlock() error
	// Map returns a read-only view of the first length bytes of the file.
	// length may exceed the file size: the range past the end is reserved
	// address space that later writes become visible through. Touching a
	// mapped page that lies past the end of the file faults (SIGBUS on
	// Unix), so grow the file before anything reads there.
	// A view may be shorter than length: on Windows a mapping cannot extend
	// past the end of the file, so it is cut to the file size at the time of
	// the call. Callers use len(Bytes()), not length, and map again once the
	// file has grown past it.
	// Invariant: bytes written with WriteAt at offsets below len(Bytes())
	// after Map returned are visible through the mapping.
	Map(length int64) (Mapping, error)
	// Name returns the name the file was opened with.
	Name() string
	// Close closes the file. Mappings stay valid until they are closed.
	Close() error
}

// Writebacker is implemented by files that can be asked to start sending a
// written range to storage without waiting for it (Linux:
// sync_file_range with SYNC_FILE_RANGE_WRITE). It is a hint for speed, not
// a durability primitive: only Sync makes writes durable, and a file that
// does not implement it loses nothing but the head start.
type Writebacker interface {
	// StartWriteback starts writeback of the dirty pages in [off, off+n).
	// An error means the hint failed or is not supported here; callers
	// stop giving it. It never stands for a failed write: Sync reports
	// those.
	StartWriteback(off, n int64) error
}

// WritebackWaiter is implemented by files that can write their dirty pages
// back and wait for it without a flush of the device (Linux:
// sync_file_range with WAIT_BEFORE, WRITE and WAIT_AFTER). It bounds the
// dirty data a long run of writes leaves behind, so that neither the
// writer's next flush nor the kernel's throttling of dirty pages has it
// all to do at once. It makes nothing durable.
type WritebackWaiter interface {
	// WaitWriteback writes the dirty pages of [off, off+n) back and waits
	// for them (n == 0: to the end of the file). An error means it is not
	// supported here or failed; it never stands for a lost write.
	WaitWriteback(off, n int64) error
}

// Mapping is a read-only memory view of a file.
type Mapping interface {
	// Bytes returns the mapped bytes.
	Bytes() []byte
	// Close releases the mapping. Bytes must not be used afterwards.
	Close() error
}

// Advisor is implemented by mappings that can ask the operating system to
// read a range in ahead of use (Unix: madvise MADV_WILLNEED) and tell
// whether a page is in memory (Linux: mincore). The OS mappings are made
// for random access (no read-ahead on a fault), which suits point lookups;
// a walk in key order uses WillNeed to have the pages it is about to read
// brought in together, in the background, and Resident to skip asking for
// pages that are there already (asking costs the system a look at each
// page).
//
// Both are hints: they wait for no read and change no byte of the view. An
// error means no answer (errors.ErrUnsupported: never on this platform, so
// callers stop asking); it never stands for a failed read.
type Advisor interface {
	// WillNeed asks for the bytes [off, off+n) of the view to be read
	// in. The range is clipped to the view; off need not be aligned.
	WillNeed(off, n int64) error
	// Resident reports whether the page holding byte off of the view is
	// in memory, so that reading it would not wait for the disk.
	Resident(off int64) (bool, error)
}

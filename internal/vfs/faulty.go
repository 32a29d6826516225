package vfs

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// FaultyFS wraps an FS and makes chosen operations fail, to test how rivet
// handles I/O errors (a failed write must roll its commit back and a failed
// flush latch the DB; neither may be ignored, and a flush never retried).
//
// Arm a Fault to fail the Nth matching call counted from the moment it is
// armed, once or from then on. Faults apply to every file opened through the
// FaultyFS, before or after arming, unless restricted by name. A failed
// Sync, Truncate or ReadAt does not reach the wrapped file; a failed WriteAt
// reaches it only with its ShortWrite prefix.
//
// It is safe for concurrent use. With concurrent callers, which call is the
// Nth is whatever order they reach the FaultyFS in.
type FaultyFS struct {
	fs       FS
	mu       sync.Mutex
	faults   []*armedFault
	injected atomic.Int64
}

// Op is a File operation a Fault can fail.
type Op uint8

// The operations a Fault can target.
const (
	OpRead Op = iota + 1
	OpWrite
	OpSync
	OpTruncate
	// OpRename, OpLink and OpSyncDir are the FS's directory operations;
	// a Fault's Name matches the new name (Rename, Link) or the directory
	// (SyncDir).
	OpRename
	OpLink
	OpSyncDir
)

// String returns the operation's method name.
func (op Op) String() string {
	switch op {
	case OpRead:
		return "ReadAt"
	case OpWrite:
		return "WriteAt"
	case OpSync:
		return "Sync"
	case OpTruncate:
		return "Truncate"
	case OpRename:
		return "Rename"
	case OpLink:
		return "Link"
	case OpSyncDir:
		return "SyncDir"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Fault describes an injected failure.
type Fault struct {
	// Op is the operation that fails.
	Op Op
	// Nth selects the call that fails: the Nth call of Op (on a file named
	// Name, if set) after Arm; 1 is the next call. Values below 1 mean 1.
	Nth int
	// Err is the error the failing call returns; nil means syscall.EIO.
	Err error
	// Persist makes every matching call after the Nth fail too, the way a
	// dead disk or a full file system keeps failing. Without it the fault
	// fires once and is disarmed.
	Persist bool
	// ShortWrite, for OpWrite, is how many bytes of the failing write reach
	// the file before the error, as when a disk fills up partway (clamped to
	// the write's length). The call returns that count with Err. It applies
	// to the Nth call only; later Persist failures write nothing.
	ShortWrite int
	// Name, if set, restricts the fault to the file opened with that name;
	// calls on other files neither fail nor count.
	Name string
}

type armedFault struct {
	Fault
	seen  int
	fired bool
}

// NewFaulty returns a FaultyFS over fs with no fault armed.
func NewFaulty(fs FS) *FaultyFS { return &FaultyFS{fs: fs} }

// Arm adds a fault. Several faults may be armed at once; each counts the
// calls it matches on its own, and a call fails if any of them fires.
func (f *FaultyFS) Arm(fault Fault) {
	if fault.Nth < 1 {
		fault.Nth = 1
	}
	if fault.Err == nil {
		fault.Err = syscall.EIO
	}
	f.mu.Lock()
	f.faults = append(f.faults, &armedFault{Fault: fault})
	f.mu.Unlock()
}

// Disarm removes every armed fault.
func (f *FaultyFS) Disarm() {
	f.mu.Lock()
	f.faults = nil
	f.mu.Unlock()
}

// Injected returns how many calls have failed on purpose so far.
func (f *FaultyFS) Injected() int64 { return f.injected.Load() }

// OpenFile opens a file of the wrapped FS whose calls can be failed.
func (f *FaultyFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := f.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

// Remove removes a file of the wrapped FS.
func (f *FaultyFS) Remove(name string) error { return f.fs.Remove(name) }

// Rename renames in the wrapped FS, unless an OpRename fault fires.
func (f *FaultyFS) Rename(oldname, newname string) error {
	if _, err := f.check(OpRename, newname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return f.fs.Rename(oldname, newname)
}

// Link links in the wrapped FS, unless an OpLink fault fires.
func (f *FaultyFS) Link(oldname, newname string) error {
	if _, err := f.check(OpLink, newname); err != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
	}
	return f.fs.Link(oldname, newname)
}

// SyncDir flushes a directory of the wrapped FS, unless an OpSyncDir fault
// fires.
func (f *FaultyFS) SyncDir(dir string) error {
	if _, err := f.check(OpSyncDir, dir); err != nil {
		return &os.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	return f.fs.SyncDir(dir)
}

// SameFile asks the wrapped FS.
func (f *FaultyFS) SameFile(file File, name string) (bool, error) { return f.fs.SameFile(file, name) }

// FreeSpace asks the wrapped FS.
func (f *FaultyFS) FreeSpace(dir string) (int64, error) { return f.fs.FreeSpace(dir) }

// check counts a call of op on the named file against the armed faults. It
// returns, for a write, how many bytes to let through first, and the error
// to inject (nil for none).
func (f *FaultyFS) check(op Op, name string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	short := 0
	live := f.faults[:0]
	for _, a := range f.faults {
		if a.Op != op || (a.Name != "" && a.Name != name) {
			live = append(live, a)
			continue
		}
		a.seen++
		switch {
		case a.fired: // only a Persist fault stays armed after firing
			if err == nil {
				err = a.Err
			}
		case a.seen == a.Nth:
			a.fired = true
			if err == nil {
				err, short = a.Err, a.ShortWrite
			}
		}
		if a.fired && !a.Persist {
			continue // spent: drop it
		}
		live = append(live, a)
	}
	clear(f.faults[len(live):])
	f.faults = live
	if err != nil {
		f.injected.Add(1)
	}
	return short, err
}

type faultyFile struct {
	File
	fs *FaultyFS
}

// Unwrap returns the file the faults are injected in front of.
func (f *faultyFile) Unwrap() File { return f.File }

// ReadAt fails if an OpRead fault fires, without reading.
func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if _, err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

// WriteAt fails if an OpWrite fault fires, after writing the fault's
// ShortWrite prefix.
func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	short, err := f.fs.check(OpWrite, f.Name())
	if err == nil {
		return f.File.WriteAt(p, off)
	}
	short = min(max(short, 0), len(p))
	if short == 0 {
		return 0, err
	}
	n, werr := f.File.WriteAt(p[:short], off)
	if werr != nil {
		return n, werr
	}
	return n, err
}

// Sync fails if an OpSync fault fires, without flushing anything.
func (f *faultyFile) Sync(kind SyncKind) error {
	if _, err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync(kind)
}

// Truncate fails if an OpTruncate fault fires, leaving the size alone.
func (f *faultyFile) Truncate(size int64) error {
	if _, err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

package vfs

import (
	"os"
	"sync/atomic"
)

// CountingFS wraps an FS and counts the I/O done through every file opened
// with it, so tests can assert how many reads, writes and flushes an
// operation costs.
//
// Reads through a Mapping are memory accesses, not ReadAt calls, and are not
// counted (nothing can see them). Map and mapping Close calls are counted, so
// tests can check that mappings are released, and so are read-ahead hints
// and residency questions (Advisor), so tests can check when a walk asks.
//
// The counters are atomic and safe to read while files are in use. A
// Snapshot taken during I/O is not a consistent cut across counters.
type CountingFS struct {
	fs FS
	c  counters
}

// Counts is a snapshot of a CountingFS's counters.
type Counts struct {
	ReadCalls        int64 // ReadAt calls
	ReadBytes        int64 // bytes ReadAt returned
	WriteCalls       int64 // WriteAt calls
	WriteBytes       int64 // bytes WriteAt reported written
	SyncDataCalls    int64 // Sync(SyncData) calls (and Syncs of unknown kinds)
	SyncBarrierCalls int64 // Sync(SyncBarrier) calls
	TruncateCalls    int64 // Truncate calls
	MapCalls         int64 // Map calls that returned a mapping
	UnmapCalls       int64 // Close calls on those mappings
	WillNeedCalls    int64 // WillNeed calls on those mappings
	WillNeedBytes    int64 // bytes those calls asked for
	ResidentCalls    int64 // Resident calls on those mappings
}

// SyncCalls returns the number of Sync calls of either kind.
func (c Counts) SyncCalls() int64 { return c.SyncDataCalls + c.SyncBarrierCalls }

type counters struct {
	readCalls, readBytes     atomic.Int64
	writeCalls, writeBytes   atomic.Int64
	syncData, syncBarrier    atomic.Int64
	truncates, maps, unmaps  atomic.Int64
	willNeeds, willNeedBytes atomic.Int64
	residents                atomic.Int64
}

// NewCounting returns a CountingFS over fs with every counter at zero.
func NewCounting(fs FS) *CountingFS { return &CountingFS{fs: fs} }

// OpenFile opens a file of the wrapped FS whose I/O is counted.
func (c *CountingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, c: &c.c}, nil
}

// Remove removes a file of the wrapped FS.
func (c *CountingFS) Remove(name string) error { return c.fs.Remove(name) }

// Rename renames in the wrapped FS.
func (c *CountingFS) Rename(oldname, newname string) error { return c.fs.Rename(oldname, newname) }

// Link links in the wrapped FS.
func (c *CountingFS) Link(oldname, newname string) error { return c.fs.Link(oldname, newname) }

// SyncDir flushes a directory of the wrapped FS.
func (c *CountingFS) SyncDir(dir string) error { return c.fs.SyncDir(dir) }

// SameFile asks the wrapped FS.
func (c *CountingFS) SameFile(f File, name string) (bool, error) { return c.fs.SameFile(f, name) }

// FreeSpace asks the wrapped FS.
func (c *CountingFS) FreeSpace(dir string) (int64, error) { return c.fs.FreeSpace(dir) }

// Snapshot returns the current counts.
func (c *CountingFS) Snapshot() Counts {
	return Counts{
		ReadCalls:        c.c.readCalls.Load(),
		ReadBytes:        c.c.readBytes.Load(),
		WriteCalls:       c.c.writeCalls.Load(),
		WriteBytes:       c.c.writeBytes.Load(),
		SyncDataCalls:    c.c.syncData.Load(),
		SyncBarrierCalls: c.c.syncBarrier.Load(),
		TruncateCalls:    c.c.truncates.Load(),
		MapCalls:         c.c.maps.Load(),
		UnmapCalls:       c.c.unmaps.Load(),
		WillNeedCalls:    c.c.willNeeds.Load(),
		WillNeedBytes:    c.c.willNeedBytes.Load(),
		ResidentCalls:    c.c.residents.Load(),
	}
}

// Reset sets every counter to zero.
func (c *CountingFS) Reset() {
	for _, v := range []*atomic.Int64{
		&c.c.readCalls, &c.c.readBytes, &c.c.writeCalls, &c.c.writeBytes,
		&c.c.syncData, &c.c.syncBarrier, &c.c.truncates, &c.c.maps, &c.c.unmaps,
		&c.c.willNeeds, &c.c.willNeedBytes, &c.c.residents,
	} {
		v.Store(0)
	}
}

// countingFile counts calls whether or not they fail (a failed call still
// cost a system call) and bytes as the wrapped file reports them.
type countingFile struct {
	File
	c *counters
}

// Unwrap returns the counted file.
func (f *countingFile) Unwrap() File { return f.File }

// ReadAt counts a read call and the bytes it returned.
func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.readCalls.Add(1)
	f.c.readBytes.Add(int64(n))
	return n, err
}

// WriteAt counts a write call and the bytes it wrote.
func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.c.writeCalls.Add(1)
	f.c.writeBytes.Add(int64(n))
	return n, err
}

// Sync counts a flush by kind; unknown kinds count as SyncData, which
// every implementation treats them as.
func (f *countingFile) Sync(kind SyncKind) error {
	if kind == SyncBarrier {
		f.c.syncBarrier.Add(1)
	} else {
		f.c.syncData.Add(1)
	}
	return f.File.Sync(kind)
}

// Truncate counts a truncate call.
func (f *countingFile) Truncate(size int64) error {
	f.c.truncates.Add(1)
	return f.File.Truncate(size)
}

// Map counts a mapping and wraps it to count its release.
func (f *countingFile) Map(length int64) (Mapping, error) {
	m, err := f.File.Map(length)
	if err != nil {
		return nil, err
	}
	f.c.maps.Add(1)
	return &countingMapping{Mapping: m, c: f.c}, nil
}

// countingMapping counts the first Close only, so a double Close does not
// look like two released mappings.
type countingMapping struct {
	Mapping
	c      *counters
	closed atomic.Bool
}

// Close counts the release and closes the mapping.
func (m *countingMapping) Close() error {
	if m.closed.CompareAndSwap(false, true) {
		m.c.unmaps.Add(1)
	}
	return m.Mapping.Close()
}

// WillNeed counts a read-ahead hint and passes it on to the wrapped
// mapping if it takes hints; over one that does not (in-memory files,
// whose bytes are always there) it is counted and succeeds, so tests on
// in-memory files see the hints a walk gives.
func (m *countingMapping) WillNeed(off, n int64) error {
	m.c.willNeeds.Add(1)
	m.c.willNeedBytes.Add(n)
	if a, ok := m.Mapping.(Advisor); ok {
		return a.WillNeed(off, n)
	}
	return nil
}

// Resident counts the question and passes it on to the wrapped mapping if
// it takes hints. Over one that does not it answers false, nothing in
// memory, so that tests on in-memory files see every hint a walk over a
// file not in memory would give.
func (m *countingMapping) Resident(off int64) (bool, error) {
	m.c.residents.Add(1)
	if a, ok := m.Mapping.(Advisor); ok {
		return a.Resident(off)
	}
	return false, nil
}

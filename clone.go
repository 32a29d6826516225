package rivet

import (
	"errors"
	"os"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/image"
	"github.com/rivetkv/rivet/internal/vfs"
)

// CloneOptions configures DB.Clone and CloneFile. A nil *CloneOptions is
// the zero value: clone where the file system can, copy otherwise, mode
// 0600, no progress.
type CloneOptions struct {
	// Mode is the permission of the new file; 0 means 0600.
	Mode os.FileMode
	// Copy writes an independent copy even where the file system could
	// clone: a backup that shares no block with its source, so damage to
	// one cannot reach the other.
	Copy bool
	// Progress, if set, is called while a copy is written (never for a
	// clone) with the bytes written so far and the total expected (for a
	// copy taken beside another process's writer, an estimate). An error
	// it returns stops the copy: the partial file is removed and Clone
	// returns that error.
	Progress func(written, total int64) error
}

// CloneMethod says how a clone was made.
type CloneMethod int

const (
	// CloneCopied: the state's pages were written out one by one, the
	// bytes Tx.CopyFile writes (docs/design.md §3.5).
	CloneCopied CloneMethod = iota
	// CloneReflinked: the file system's copy-on-write clone (FICLONE on
	// Linux, clonefile on macOS) made the new file share the source's
	// blocks; nothing was copied and the time taken does not depend on
	// the file's size.
	CloneReflinked
)

// String names the method: "copy" or "reflink".
func (m CloneMethod) String() string {
	if m == CloneReflinked {
		return "reflink"
	}
	return "copy"
}

// CloneResult describes a clone that DB.Clone or CloneFile made.
type CloneResult struct {
	// Method is how the new file was made.
	Method CloneMethod
	// Call names the system call that cloned ("FICLONE", "clonefile"),
	// or is empty for a copy.
	Call string
	// Fallback says why the file was copied rather than cloned (the file
	// system's refusal, or that a copy was asked for); empty for a clone.
	Fallback string
	// Txid is the transaction whose state the new file holds: opened, it
	// shows exactly what that transaction committed.
	Txid uint64
	// Size is the new file's length in bytes.
	Size int64
	// Written counts the bytes written to make it: 0 for a clone of an
	// open DB, the whole state for a copy.
	Written int64
	// Live is set by CloneFile when another process held the source open
	// for writing, so the copy was taken without its lock (docs/design.md
	// §3.5). Passes then counts the walks of the source it took.
	Live   bool
	Passes int
}

// Clone makes a consistent copy of the database at path, which must not
// exist (an error matching fs.ErrExist otherwise), and reports how.
//
// Where the file system can (btrfs, XFS with reflink, bcachefs on Linux;
// APFS on macOS) and opts.Copy is not set, the copy is a copy-on-write
// clone of the file: Clone takes the writer lock, so no commit runs, makes
// the newest committed state durable with nothing of a sync point in flight
// (one flush, unless it already is), clones the file and releases the
// lock. That takes milliseconds, not time in proportion to the data (the
// file system copies extent references: 1-6 ms for 71 and 528 MiB files
// on btrfs, docs/design.md §3.5), writes no data, and the new file shares
// its blocks with the database until either changes them. The clone is
// the database file byte for byte: same length, same free pages, both
// metas.
//
// Otherwise — another file system, another platform (Windows), a copy
// asked for — Clone writes the state a read transaction sees, as
// Tx.CopyFile does (writers are not blocked, and the copy is compact: free
// pages are zeros), to a new file, reporting progress through
// opts.Progress, and CloneResult.Fallback says why it did not clone.
//
// Either way the new file opens at exactly the state committed before
// Clone was called (later commits are not in it), passes Check, and is
// flushed, its directory entry too. Clone must not be called from inside a
// write transaction of db (it waits for the writer lock). On a closed DB
// it returns ErrDatabaseNotOpen and creates nothing.
func (db *DB) Clone(path string, opts *CloneOptions) (*CloneResult, error) {
	if opts == nil {
		opts = &CloneOptions{}
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o600
	}
	if db.isClosed() {
		return nil, ErrDatabaseNotOpen
	}
	res := &CloneResult{}
	if opts.Copy {
		res.Fallback = "a copy was asked for"
	} else {
		done, err := db.reflinkTo(path, mode, res)
		if err != nil {
			return nil, err
		}
		if done {
			return res, nil
		}
	}
	return db.copyTo(path, mode, opts.Progress, res)
}

// reflinkTo clones the database file to path when the file system can. It
// returns false, with res.Fallback saying why, when it cannot; an error
// only for a problem a copy would meet too (path exists, no permission).
func (db *DB) reflinkTo(path string, mode os.FileMode, res *CloneResult) (bool, error) {
	txid, err := db.quiesce()
	if err != nil {
		if errors.Is(err, ErrDatabaseNotOpen) {
			return false, err
		}
		// A latched DB cannot make a sync point, but its readers still
		// see a consistent state: copy that.
		res.Fallback = "the newest state could not be made durable: " + err.Error()
		return false, nil
	}
	defer db.writer.Unlock()
	call, fallback, err := image.Reflink(db.file, path, mode)
	if err != nil {
		return false, err
	}
	if fallback != "" {
		res.Fallback = fallback
		return false, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	*res = CloneResult{Method: CloneReflinked, Call: call, Txid: txid, Size: fi.Size()}
	return true, nil
}

// quiesce takes the writer lock and returns holding it, once the newest
// committed state (db.head) is durable and no sync point is in flight: the
// file then holds exactly that state and nothing writes to it until the
// lock is released — what a clone of the file needs. It returns head's
// txid. On error the writer lock is not held.
//
// It never waits for a sync point while holding the writer lock: a sync
// leader may be waiting for that lock to prepare its sync point (syncThrough
// claims leadership first), so quiesce lets go, waits for the sync point to
// end, and tries again. When none is in flight it leads one itself, under
// the writer lock, so no commit can slip in between the flush and the
// clone.
func (db *DB) quiesce() (uint64, error) {
	for {
		db.writer.Lock()
		if db.isClosed() {
			db.writer.Unlock()
			return 0, ErrDatabaseNotOpen
		}
		if db.readOnly {
			// Nothing writes a file this process opened read-only, and
			// its shared lock keeps every other writer out.
			return db.head.Txid, nil
		}
		if err := db.latchedErr(); err != nil {
			db.writer.Unlock()
			return 0, err
		}
		db.syncMu.Lock()
		busy := db.syncing
		durable := db.durable >= db.head.Txid
		if !busy && !durable {
			db.syncing = true
		}
		db.syncMu.Unlock()
		switch {
		case !busy && durable:
			return db.head.Txid, nil
		case !busy:
			job, err := db.prepareSync(vfs.SyncData, nil)
			if err == nil && job != nil {
				err = db.finishSync(job)
			}
			db.releaseSync()
			if err != nil {
				db.writer.Unlock()
				return 0, err
			}
			// No commit ran meanwhile: head is durable now.
			return db.head.Txid, nil
		}
		db.writer.Unlock()
		db.syncMu.Lock()
		for db.syncing {
			db.syncCond.Wait()
		}
		db.syncMu.Unlock()
	}
}

// copyTo writes the state a read transaction sees to a new file at path.
func (db *DB) copyTo(path string, mode os.FileMode, progress func(int64, int64) error, res *CloneResult) (*CloneResult, error) {
	tx, err := db.Begin(false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	img, err := tx.copyImage()
	if err != nil {
		return nil, err
	}
	n, err := img.WriteNewFile(vfs.OS(), path, mode, progress)
	if err != nil {
		return nil, err
	}
	res.Method, res.Call = CloneCopied, ""
	res.Txid = uint64(tx.ID())
	res.Size, res.Written = n, n
	return res, nil
}

// CloneFile makes a consistent copy of the rivet file src at dst (which
// must not exist), whether or not another process has src open and is
// committing to it, and reports how (CloneResult).
//
// When no other process holds src for writing, CloneFile opens it
// read-only — its shared lock keeps writers out until the copy is done —
// and calls DB.Clone: a copy-on-write clone where the file system can, a
// copy otherwise (opts.Copy asks for a copy). The copy holds src's newest
// committed state.
//
// When a writer holds src's lock, CloneFile cannot open it as a DB and
// never maps it (the writer may cut the file under a mapping). It reads
// the file with pread instead, without any lock (CloneResult.Live), and
// holds the newest sync point the writer had written when it finished
// (in Full mode every commit is one; in Periodic and None mode commits
// since the last sync point are not yet in any meta):
//
//   - clone: where the file system can, the live file is cloned. A clone
//     taken at an instant while another process writes is exactly what a
//     power cut at that instant would leave, which rivet opens at its
//     newest complete sync point (docs/design.md §3.2); CloneFile then
//     opens the clone once, which recovers it and writes a clean meta.
//   - copy: the state of the newest meta is copied page by page, every run
//     checked against the checksum its parent recorded. A page the writer
//     has reused since is caught that way, and the copy goes on from the
//     newer meta, re-reading only what changed (docs/design.md §3.5); it
//     gives up after a bounded number of passes. The result is the file
//     Tx.WriteTo would have written for that state.
//
// CloneFile does not run Check on the result (that reads all of it); the
// tool's backup and clone commands do. A missing src is an error matching
// fs.ErrNotExist; a file that is not a rivet file, ErrInvalid — except a
// bbolt file no process holds for writing, which is copied as a bbolt file
// (as Tx.WriteTo of a DB reading it writes it).
func CloneFile(src, dst string, opts *CloneOptions) (*CloneResult, error) {
	if opts == nil {
		opts = &CloneOptions{}
	}
	locked, err := image.HeldForWriting(src)
	if err != nil {
		return nil, err
	}
	if !locked {
		db, err := Open(src, 0, &Options{ReadOnly: true, Timeout: time.Nanosecond})
		if err == nil {
			res, err := db.Clone(dst, opts)
			if cerr := db.Close(); err == nil && cerr != nil {
				err = cerr
			}
			return res, err
		}
		if !errors.Is(err, rerrors.ErrTimeout) {
			return nil, err
		}
		// A writer opened it in between.
	}
	return cloneLive(src, dst, opts)
}

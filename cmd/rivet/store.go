package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/inspect"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The file formats the tool reads.
const (
	formatRivet = "rivet"
	formatBbolt = "bbolt"
)

// detectFormat names path's format by its meta pages: meta 0 at offset 0,
// or meta 1 at one page size in, for every page size either format allows,
// so one damaged meta page does not hide a healthy file.
func detectFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%s is a directory, not a database file", path)
	}
	head := make([]byte, inspect.DetectSize)
	detect := func(off int64) string {
		n, _ := f.ReadAt(head, off)
		switch inspect.Detect(head[:n]) {
		case inspect.FormatRivet:
			return formatRivet
		case inspect.FormatBbolt:
			return formatBbolt
		}
		return ""
	}
	if format := detect(0); format != "" {
		return format, nil
	}
	for ps := int64(512); ps <= 1<<20 && 2*ps <= fi.Size(); ps *= 2 {
		if format := detect(ps); format != "" {
			return format, nil
		}
	}
	if fi.Size() == 0 {
		return "", fmt.Errorf("%s: not a database file (it is empty)", path)
	}
	return "", fmt.Errorf("%s: not a database file of a known format (this tool reads rivet and bbolt files)", path)
}

// lockWait is how long a command waits for a file locked by another
// process before giving up (--lock-timeout).
var lockWait = 5 * time.Second

// lockProbe is how long the first, silent attempt to lock waits: long
// enough for a lock that is being released, short enough that a user does
// not stare at a silent terminal.
const lockProbe = 200 * time.Millisecond

// openLocked opens path with open (which takes the file lock within the
// timeout it is given); when the lock is held by another process, it says
// so on w, names the holder where the OS can tell, and keeps waiting up to
// lockWait. The returned error names the holder too.
func openLocked[D any](path string, w io.Writer, readOnly bool, open func(timeout time.Duration) (D, error)) (D, error) {
	db, err := open(lockProbe)
	if !errors.Is(err, rerrors.ErrTimeout) && !errors.Is(err, berrors.ErrTimeout) {
		return db, err
	}
	holder := lockHolder(path)
	how := "open it for writing"
	if !readOnly {
		how = "open it"
	}
	fmt.Fprintf(w, "rivet: waiting up to %s for %s: another process%s holds its lock (Ctrl-C to stop)\n", lockWait, path, holder)
	db, err = open(lockWait)
	if errors.Is(err, rerrors.ErrTimeout) || errors.Is(err, berrors.ErrTimeout) {
		var zero D
		return zero, fmt.Errorf("%s is locked by another process%s: cannot %s until it closes the file (waited %s)", path, holder, how, lockWait+lockProbe)
	}
	return db, err
}

// openRivetReadOnly opens a rivet file read-only for a command that only
// reads, waiting for (and reporting) a writer's lock.
func openRivetReadOnly(path string, w io.Writer) (*rivet.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return openLocked(path, w, true, func(timeout time.Duration) (*rivet.DB, error) {
		return rivet.Open(path, 0o400, &rivet.Options{ReadOnly: true, Timeout: timeout})
	})
}

// openBboltReadOnly opens a bbolt file read-only, waiting for (and
// reporting) a writer's lock. bbolt panics on some damaged files instead
// of returning an error; that panic is returned as damage.
func openBboltReadOnly(path string, w io.Writer) (db *bolt.DB, err error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return openLocked(path, w, true, func(timeout time.Duration) (db *bolt.DB, err error) {
		defer recoverDamage(path, &err)
		return bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: timeout})
	})
}

// errDamaged is what a panic inside bbolt's code becomes: bbolt asserts
// instead of returning errors on many damaged files.
var errDamaged = errors.New("damaged file")

// recoverDamage turns a panic raised while reading path (inside bbolt, on a
// damaged file) into an error wrapping errDamaged, so no command prints a
// stack trace. Use as: defer recoverDamage(path, &err).
func recoverDamage(path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: %w: bbolt gave up reading it: %v", path, errDamaged, r)
	}
}

package rivet

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/rivetkv/rivet/internal/image"
)

// liveCopyTestHook, when a test sets it, runs after every run a live copy
// reads from the source, with the pass number: a test commits from it to
// make the writer reuse pages under the copy at a moment of its choosing.
var liveCopyTestHook func(pass int)

// cloneLive copies src, which another process holds for writing, to dst
// (CloneFile; internal/image holds the copy, docs/design.md §3.5).
func cloneLive(src, dst string, opts *CloneOptions) (*CloneResult, error) {
	mode := opts.Mode
	if mode == 0 {
		mode = 0o600
	}
	// The journal first: every record in it is of a state no older than
	// the last checkpoint then, and the file copied after it holds that
	// checkpoint or a later one, so the records after the copy's state
	// follow it without a gap. recoverClone applies them.
	journaled, err := copyJournal(src, dst, mode)
	if err != nil {
		return nil, err
	}
	r, err := image.CopyLive(src, dst, &image.LiveOptions{
		Mode:      mode,
		Copy:      opts.Copy,
		Progress:  opts.Progress,
		Recover:   recoverClone,
		AfterRead: liveCopyTestHook,
	})
	if err != nil {
		return nil, err
	}
	res := &CloneResult{Method: CloneCopied, Call: r.Call, Fallback: r.Fallback, Txid: r.Txid,
		Size: r.Size, Written: r.Written, Live: true, Passes: r.Passes}
	if r.Reflinked {
		res.Method = CloneReflinked
	}
	if journaled && !r.Reflinked {
		// The copy names the source's journal: opening it applies the
		// records after its state (a reflinked clone was opened so
		// already).
		if res.Txid, err = recoverClone(dst); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// recoverClone opens a clone of a live file once for writing: recovery
// picks the newest complete sync point in it (a clone taken while the
// writer works is a crash image), and Close leaves a clean meta, so later
// opens of the clone verify nothing. A read-only open then reads the txid
// the clone holds now (the clean meta's).
func recoverClone(path string) (txid uint64, err error) {
	db, err := Open(path, 0, &Options{Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	if err := db.Close(); err != nil {
		return 0, err
	}
	if db, err = Open(path, 0, &Options{ReadOnly: true, Timeout: time.Second}); err != nil {
		return 0, err
	}
	err = db.View(func(tx *Tx) error {
		txid = uint64(tx.ID())
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return txid, err
}

// copyJournal copies the commit journal files of src, those that exist,
// beside dst. A record being written as it is read is torn in the copy,
// which ends the copy's journal there, as a crash would.
func copyJournal(src, dst string, mode os.FileMode) (copied bool, err error) {
	for i := 0; i < 2; i++ {
		err := copyPlainFile(journalPath(src, i), journalPath(dst, i), mode)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return copied, fmt.Errorf("rivet: copying the journal: %w", err)
		}
		copied = true
	}
	return copied, nil
}

// copyPlainFile copies the file from to a new file to and flushes it.
func copyPlainFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_RDWR|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

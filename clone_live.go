package rivet

import (
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

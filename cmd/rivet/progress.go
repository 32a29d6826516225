package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// bar is a progress bar on a terminal, or nothing (a nil *bar ignores
// every call), so callers need not test where they write.
type bar struct{ pb *progressbar.ProgressBar }

// progressFor returns a bar on w labelled label with total steps (-1:
// unknown, a spinner), or nil when off is set or w is not a terminal.
func progressFor(w io.Writer, off bool, label string, total int64) *bar {
	if off || !isTerminal(w) {
		return nil
	}
	return &bar{progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	)}
}

func (b *bar) add(n int64) {
	if b != nil {
		_ = b.pb.Add64(n)
	}
}

func (b *bar) finish() {
	if b != nil {
		_ = b.pb.Finish()
	}
}

// isTerminal reports whether w is a terminal. A bar redrawn with carriage
// returns is noise in a pipe, a file or a CI log.
func isTerminal(w io.Writer) bool {
	file, ok := w.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// showWalkProgress prints, on a terminal, how long a walk has been
// running once it passes a second, and erases the line when stop is called.
func showWalkProgress(w io.Writer, what string) (stop func()) {
	if !isTerminal(w) {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-done:
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				if d := time.Since(start); d >= time.Second {
					shown = true
					fmt.Fprintf(w, "\r\033[K%s: %s", what, d.Round(100*time.Millisecond))
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// byteBar is a progress bar of bytes on a terminal, made on the first
// report (the total is known only then), or nothing.
type byteBar struct {
	w     io.Writer
	off   bool
	label string
	pb    *progressbar.ProgressBar
	total int64
}

func (b *byteBar) set(done, total int64) {
	if b.off || !isTerminal(b.w) {
		return
	}
	if b.pb == nil {
		b.pb = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(b.label),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
		)
		b.total = total
	}
	if total != b.total {
		b.pb.ChangeMax64(total)
		b.total = total
	}
	_ = b.pb.Set64(done)
}

// describe changes the bar's label (for work in phases).
func (b *byteBar) describe(label string) {
	b.label = label
	if b.pb != nil {
		b.pb.Describe(label)
	}
}

func (b *byteBar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

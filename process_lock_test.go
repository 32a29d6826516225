//go:build unix

package rivet

// File locks between processes. The other process is this test binary run
// as kill_test.go's child in a hold mode.

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
)

// TestProcessLock: a file another process holds for writing makes Open wait
// for Options.Timeout and fail with exactly errors.ErrTimeout (read-only or
// not); Timeout 0 waits until the holder lets go; a read-only holder shares
// the file with read-only Opens of other processes but keeps writers out.
func TestProcessLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.db")
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustPutOne(t, db, "b", "k", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	hold := func(mode string) *killChild {
		t.Helper()
		c := startKillChild(t, killEnvMode+"="+mode, killEnvPath+"="+path)
		for ev := range c.events {
			if ev == "ready" {
				return c
			}
		}
		_ = c.wait()
		t.Fatalf("%s child did not open the file: %v\n%s", mode, c.cmd.ProcessState, c.output())
		return nil
	}
	const timeout = 300 * time.Millisecond
	timesOut := func(what string, readOnly bool) {
		t.Helper()
		start := time.Now()
		db, err := Open(path, 0o600, &Options{ReadOnly: readOnly, Timeout: timeout})
		took := time.Since(start)
		if err == nil {
			_ = db.Close()
			t.Fatalf("%s: Open succeeded", what)
		}
		if err != rerrors.ErrTimeout { // bbolt users compare with ==
			t.Fatalf("%s: Open returned %v (%T), want exactly errors.ErrTimeout", what, err, err)
		}
		if took < timeout || took > timeout+2*time.Second {
			t.Fatalf("%s: Open gave up after %v, want about %v", what, took, timeout)
		}
	}
	read := func(db *DB) {
		t.Helper()
		if err := db.View(func(tx *Tx) error {
			if v := tx.Bucket([]byte("b")).Get([]byte("k")); string(v) != "v" {
				return fmt.Errorf("b/k = %q", v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// A writer in another process.
	c := hold("hold-rw")
	timesOut("writable open while another process writes", false)
	timesOut("read-only open while another process writes", true)
	// Timeout 0 waits for as long as it takes.
	type result struct {
		db  *DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		db, err := Open(path, 0o600, &Options{})
		done <- result{db, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			_ = r.db.Close()
		}
		t.Fatalf("Open with Timeout 0 returned while another process writes: %v", r.err)
	case <-time.After(2 * timeout):
	}
	_ = c.stdin.Close() // the holder closes its DB and exits
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Open with Timeout 0 after the holder closed: %v", r.err)
		}
		read(r.db)
		if err := r.db.Close(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open with Timeout 0 still waits 10 s after the holder closed")
	}
	if err := c.wait(); err != nil {
		t.Fatalf("hold-rw child: %v\n%s", err, c.output())
	}

	// A reader in another process.
	c = hold("hold-ro")
	timesOut("writable open while another process reads", false)
	start := time.Now()
	rdb, err := Open(path, 0o600, &Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("read-only open while another process reads: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("read-only open while another process reads took %v", took)
	}
	read(rdb)
	// A second reader process while this one still reads.
	c2 := hold("hold-ro")
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	// A killed holder's lock goes with it; the other reader's stays.
	c.kill(func(string) {})
	timesOut("writable open while a second process reads", false)
	c2.kill(func(string) {})
	db, err = Open(path, 0o600, &Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("writable open after both readers died: %v", err)
	}
	read(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

package vfs

import (
	"errors"
	"io/fs"
	"testing"
)

func TestHeldForWriting(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, path func(string) string) {
		if _, err := HeldForWriting(fsys, path("missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
		}
		a := mustOpen(t, fsys, path("db"), rwCreate)
		defer a.Close()
		if held, err := HeldForWriting(fsys, path("db")); err != nil || held {
			t.Fatalf("unlocked file: held %v, err %v", held, err)
		}
		if err := a.TryLock(false); err != nil {
			t.Fatal(err)
		}
		if held, err := HeldForWriting(fsys, path("db")); err != nil || held {
			t.Fatalf("file with a shared lock: held %v, err %v", held, err)
		}
		if err := a.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := a.TryLock(true); err != nil {
			t.Fatal(err)
		}
		if held, err := HeldForWriting(fsys, path("db")); err != nil || !held {
			t.Fatalf("file with an exclusive lock: held %v, err %v", held, err)
		}
		// The probe leaves no lock behind: the holder can lock again.
		if err := a.Unlock(); err != nil {
			t.Fatal(err)
		}
		if held, err := HeldForWriting(fsys, path("db")); err != nil || held {
			t.Fatalf("after unlock: held %v, err %v", held, err)
		}
		if err := a.TryLock(true); err != nil {
			t.Fatalf("lock after probes: %v", err)
		}
	})
}

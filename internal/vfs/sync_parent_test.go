package vfs

import (
	"path/filepath"
	"testing"
)

// TestSyncParentDir: the directory flushed is the one holding the file,
// whatever the path (a wrapper records the name it is asked to flush).
func TestSyncParentDir(t *testing.T) {
	rec := &dirRecorder{FS: NewMem()}
	SyncParentDir(rec, filepath.Join("a", "b", "file.db"))
	if len(rec.dirs) != 1 || rec.dirs[0] != filepath.Join("a", "b") {
		t.Fatalf("flushed %q, want [a/b]", rec.dirs)
	}
}

type dirRecorder struct {
	FS
	dirs []string
}

func (r *dirRecorder) SyncDir(dir string) error {
	r.dirs = append(r.dirs, dir)
	return r.FS.SyncDir(dir)
}

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
)

// The backup tests' writer: commit j sets key j mod copyKeys to a value
// holding j, and "n" to j, so a copy shows by itself whether it is exactly
// the state after one commit (see copyState).
const copyKeys = 2000

func copyKey(i uint64) []byte { return fmt.Appendf(nil, "k%06d", i) }

func copyValue(j uint64) []byte {
	v := make([]byte, 200)
	binary.BigEndian.PutUint64(v, j)
	return v
}

func copyCommit(tx *rivet.Tx, j uint64) error {
	b, err := tx.CreateBucketIfNotExists([]byte("b"))
	if err != nil {
		return err
	}
	if j == 0 {
		for i := uint64(0); i < copyKeys; i++ {
			if err := b.Put(copyKey(i), copyValue(0)); err != nil {
				return err
			}
		}
	} else if err := b.Put(copyKey(j%copyKeys), copyValue(j)); err != nil {
		return err
	}
	return b.Put([]byte("n"), binary.BigEndian.AppendUint64(nil, j))
}

// copySource makes a rivet file holding commits 0..last.
func copySource(t *testing.T, dir string, last uint64) string {
	t.Helper()
	path := filepath.Join(dir, "src.db")
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for j := uint64(0); j <= last; j++ {
		if err := db.Update(func(tx *rivet.Tx) error { return copyCommit(tx, j) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyState opens the copy at path read-only, checks it in full, and
// returns the commit j whose state it holds exactly, and its txid; it fails
// the test if the copy is not the state after some commit.
func copyState(t *testing.T, path string) (j, txid uint64) {
	t.Helper()
	db, err := rivet.Open(path, 0o600, &rivet.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *rivet.Tx) error {
		for p := range tx.Check() {
			return fmt.Errorf("check: %w", p)
		}
		txid = uint64(tx.ID())
		b := tx.Bucket([]byte("b"))
		if b == nil {
			return errors.New("no bucket b")
		}
		j = binary.BigEndian.Uint64(b.Get([]byte("n")))
		for i := uint64(0); i < copyKeys; i++ {
			want := uint64(0)
			if j >= i {
				want = j - (j-i)%copyKeys // the last commit that wrote key i
			}
			if got := b.Get(copyKey(i)); !bytes.Equal(got, copyValue(want)) {
				return fmt.Errorf("key %d is not commit %d's value (the copy claims commit %d)", i, want, j)
			}
		}
		if n := b.Stats().KeyN; n != copyKeys+1 {
			return fmt.Errorf("%d keys, want %d", n, copyKeys+1)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return j, txid
}

// liveWriter holds path open for writing in this process — another
// process than the rivet binary the tests run — and commits without pause
// until stopped.
type liveWriter struct {
	db   *rivet.DB
	last atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startWriter(t *testing.T, path string) *liveWriter {
	t.Helper()
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &liveWriter{db: db, stop: make(chan struct{})}
	var first uint64
	if err := db.View(func(tx *rivet.Tx) error {
		first = binary.BigEndian.Uint64(tx.Bucket([]byte("b")).Get([]byte("n"))) + 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.last.Store(first - 1)
	w.wg.Add(1)
	stop := w.stop
	go func() {
		defer w.wg.Done()
		for j := first; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Update(func(tx *rivet.Tx) error { return copyCommit(tx, j) }); err != nil {
				t.Error(err)
				return
			}
			w.last.Store(j)
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *liveWriter) close() {
	if w.stop == nil {
		return
	}
	close(w.stop)
	w.stop = nil
	w.wg.Wait()
	_ = w.db.Close()
}

// txidPrinted returns the txid the verification line names.
func txidPrinted(t *testing.T, out string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`opens at txid (\d+) and passes check`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no verification line:\n%s", out)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// TestBackupCloneLive: rivet backup and rivet clone of a file this test
// process holds open for writing and commits to without pause: each exits
// 0, says the file was being written, and writes a copy that passes Check
// and holds exactly the state after one of the writer's commits — one made
// while the command ran — at the txid it printed.
func TestBackupCloneLive(t *testing.T) {
	dir := t.TempDir()
	src := copySource(t, dir, 0)
	w := startWriter(t, src)
	for w.last.Load() < 20 {
		time.Sleep(5 * time.Millisecond)
	}
	for _, cmd := range []string{"backup", "clone"} {
		dst := filepath.Join(dir, cmd+".db")
		before := w.last.Load()
		out, errOut, code := runBin(t, cmd, src, dst)
		after := w.last.Load()
		wantCode(t, code, 0, out, errOut)
		t.Logf("rivet %s: %s%s", cmd, out, errOut)
		if !strings.Contains(errOut, "is open for writing in another process") {
			t.Errorf("rivet %s does not say the file is being written:\n%s", cmd, errOut)
		}
		if !strings.Contains(out, "another process") || !strings.Contains(out, "was writing") {
			t.Errorf("rivet %s's result does not say it was taken beside a writer:\n%s", cmd, out)
		}
		if cmd == "backup" && !strings.HasPrefix(out, "copied ") {
			t.Errorf("rivet backup did not copy:\n%s", out)
		}
		j, txid := copyState(t, dst)
		if j < before || j > after+1 {
			t.Errorf("rivet %s's copy holds commit %d; the writer was at %d..%d while it ran", cmd, j, before, after)
		}
		if printed := txidPrinted(t, out); printed != txid {
			t.Errorf("rivet %s printed txid %d, the copy opens at %d", cmd, printed, txid)
		}
	}
	w.close()
	if w.last.Load() < 25 {
		t.Errorf("the writer committed only %d times", w.last.Load())
	}
}

// TestBackupCloneIdle: with no writer, backup copies and clone clones
// (where the file system can) or copies saying why not; both copies hold
// the newest commit, and SRC is untouched.
func TestBackupCloneIdle(t *testing.T) {
	dir := t.TempDir()
	src := copySource(t, dir, 7)
	digest := fileDigest(t, src)
	out, errOut, code := runBin(t, "backup", src, filepath.Join(dir, "b.db"))
	wantCode(t, code, 0, out, errOut)
	if !regexp.MustCompile(`^copied [0-9.]+ [KM]iB from \S+ to \S+ in \d+ ms\nverified \S+: it opens at txid \d+ and passes check`).MatchString(out) || errOut != "" {
		t.Errorf("rivet backup printed:\n%s\nstderr:\n%s", out, errOut)
	}
	out, errOut, code = runBin(t, "clone", src, filepath.Join(dir, "c.db"))
	wantCode(t, code, 0, out, errOut)
	cloned := strings.HasPrefix(out, "cloned ") && strings.Contains(out, "(copy-on-write, 0 bytes copied)")
	copied := strings.HasPrefix(out, "copied ") && strings.Contains(out, "cannot clone")
	if !cloned && !copied {
		t.Errorf("rivet clone says neither that it cloned nor why it copied:\n%s", out)
	}
	t.Logf("rivet clone on this file system: %s", out)
	for _, name := range []string{"b.db", "c.db"} {
		j, txid := copyState(t, filepath.Join(dir, name))
		if j != 7 {
			t.Errorf("%s holds commit %d, want 7", name, j)
		}
		if name == "c.db" && txidPrinted(t, out) != txid {
			t.Errorf("rivet clone printed a txid other than %d:\n%s", txid, out)
		}
	}
	if fileDigest(t, src) != digest {
		t.Errorf("SRC changed")
	}
}

// TestBackupRefusals: an existing DST is refused without --force (exit 1,
// DST untouched) and replaced with it; a missing SRC, a bbolt file and a
// file of another kind are one-line errors with exit 1; a wrong argument
// count is exit 2.
func TestBackupRefusals(t *testing.T) {
	dir := t.TempDir()
	src := copySource(t, dir, 3)
	dst := filepath.Join(dir, "exists")
	if err := os.WriteFile(dst, []byte("old backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"backup", "clone"} {
		out, errOut, code := runBin(t, cmd, src, dst)
		wantCode(t, code, 1, out, errOut)
		if errOut != fmt.Sprintf("rivet: %s already exists: pass --force to replace it\n", dst) {
			t.Errorf("rivet %s over an existing file: %q", cmd, errOut)
		}
		if b, _ := os.ReadFile(dst); string(b) != "old backup" {
			t.Fatalf("rivet %s changed the existing DST", cmd)
		}
	}
	out, errOut, code := runBin(t, "backup", "--force", src, dst)
	wantCode(t, code, 0, out, errOut)
	if j, _ := copyState(t, dst); j != 3 {
		t.Errorf("--force: DST holds commit %d", j)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, ".*partial*")); len(names) > 0 {
		t.Errorf("temporary files left: %v", names)
	}

	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, want string
	}{
		{filepath.Join(dir, "missing.db"), "no such file or directory"},
		{makeFixture(t, formatBbolt), "is a bbolt file"},
		{notDB, "not a database file"},
	} {
		for _, cmd := range []string{"backup", "clone"} {
			out, errOut, code := runBin(t, cmd, c.src, filepath.Join(dir, "out.db"))
			wantCode(t, code, 1, out, errOut)
			if strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "rivet: ") || !strings.Contains(errOut, c.want) {
				t.Errorf("rivet %s %s: want one line with %q, got %q", cmd, c.src, c.want, errOut)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused copy created DST (%v)", err)
	}
	out, errOut, code = runBin(t, "backup", src)
	wantCode(t, code, 2, out, errOut)
}

// TestCloneCommandBtrfs runs on btrfs (RIVET_BTRFS_DIR): rivet clone of
// an idle file and of one being written says it cloned with FICLONE, and
// the clone's extents are shared with SRC (filefrag), which no copy's
// are; rivet backup there copies, sharing nothing.
func TestCloneCommandBtrfs(t *testing.T) {
	base := os.Getenv("RIVET_BTRFS_DIR")
	if base == "" {
		t.Skip("RIVET_BTRFS_DIR is not set: to run this test, point it at a directory on btrfs (or XFS with reflink), " +
			"or run scripts/btrfs-clone-test.sh as root, which makes a btrfs loop mount for it")
	}
	if _, err := exec.LookPath("filefrag"); err != nil {
		t.Fatalf("filefrag (e2fsprogs) is needed to see shared extents: %v", err)
	}
	dir, err := os.MkdirTemp(base, "rivet-cli-clone-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := copySource(t, dir, 5)

	out, errOut, code := runBin(t, "clone", src, filepath.Join(dir, "idle.db"))
	wantCode(t, code, 0, out, errOut)
	if !strings.Contains(out, "with FICLONE (copy-on-write, 0 bytes copied)") {
		t.Errorf("rivet clone on btrfs:\n%s", out)
	}
	if shared, all := sharedBlocks(t, filepath.Join(dir, "idle.db")); shared != all || all == 0 {
		t.Errorf("idle clone: %d of %d blocks shared, want all", shared, all)
	}
	if j, _ := copyState(t, filepath.Join(dir, "idle.db")); j != 5 {
		t.Errorf("idle clone holds commit %d, want 5", j)
	}

	out, errOut, code = runBin(t, "backup", src, filepath.Join(dir, "backup.db"))
	wantCode(t, code, 0, out, errOut)
	if shared, all := sharedBlocks(t, filepath.Join(dir, "backup.db")); shared != 0 || all == 0 {
		t.Errorf("backup: %d of %d blocks shared, want none", shared, all)
	}

	w := startWriter(t, src)
	for w.last.Load() < 20 {
		time.Sleep(5 * time.Millisecond)
	}
	before := w.last.Load()
	out, errOut, code = runBin(t, "clone", src, filepath.Join(dir, "live.db"))
	after := w.last.Load()
	wantCode(t, code, 0, out, errOut)
	t.Logf("%s", out)
	if !strings.Contains(out, "with FICLONE (copy-on-write, 0 bytes copied) while another process") {
		t.Errorf("rivet clone of a live file on btrfs:\n%s", out)
	}
	if shared, all := sharedBlocks(t, filepath.Join(dir, "live.db")); shared < all*9/10 {
		t.Errorf("live clone: %d of %d blocks shared", shared, all)
	}
	if j, _ := copyState(t, filepath.Join(dir, "live.db")); j < before || j > after+1 {
		t.Errorf("live clone holds commit %d; the writer was at %d..%d", j, before, after)
	}
}

// sharedBlocks sums the lengths of path's extents that filefrag -v lists,
// and of those flagged "shared".
func sharedBlocks(t *testing.T, path string) (shared, all int64) {
	t.Helper()
	out, err := exec.Command("filefrag", "-v", path).CombinedOutput()
	if err != nil {
		t.Fatalf("filefrag: %v\n%s", err, out)
	}
	// "   0:        0..      73:      72960..     73033:     74:             last,shared,eof"
	re := regexp.MustCompile(`(?m)^\s*\d+:\s+\d+\.\.\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+):.*$`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		all += n
		if strings.Contains(m[0], "shared") {
			shared += n
		}
	}
	return shared, all
}

package rivet

import (
	"bytes"
	"errors"
	randv2 "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// opHookFS calls before(op) ahead of every operation that changes a file
// or a directory — WriteAt, Sync, Truncate, creating OpenFile, Remove,
// Rename, Link, SyncDir — so a test can take crash images at each.
type opHookFS struct {
	vfs.FS
	before func(op string)
}

func (h *opHookFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&os.O_CREATE != 0 {
		h.before("create " + name)
	}
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &opHookFile{File: f, before: h.before}, nil
}

func (h *opHookFS) Remove(name string) error {
	h.before("remove " + name)
	return h.FS.Remove(name)
}

func (h *opHookFS) Rename(oldname, newname string) error {
	h.before("rename " + oldname)
	return h.FS.Rename(oldname, newname)
}

func (h *opHookFS) Link(oldname, newname string) error {
	h.before("link " + newname)
	return h.FS.Link(oldname, newname)
}

func (h *opHookFS) SyncDir(dir string) error {
	h.before("syncdir")
	return h.FS.SyncDir(dir)
}

type opHookFile struct {
	vfs.File
	before func(op string)
}

func (f *opHookFile) Unwrap() vfs.File { return f.File }

func (f *opHookFile) WriteAt(p []byte, off int64) (int, error) {
	f.before("write " + f.Name())
	return f.File.WriteAt(p, off)
}

func (f *opHookFile) Sync(kind vfs.SyncKind) error {
	f.before("sync " + f.Name())
	return f.File.Sync(kind)
}

func (f *opHookFile) Truncate(size int64) error {
	f.before("truncate " + f.Name())
	return f.File.Truncate(size)
}

// memBoltFS returns a CrashFS holding the testdata bbolt file src at path,
// durably (bytes and name), and the file's bytes.
func memBoltFS(t testing.TB, src, path string) (*vfs.CrashFS, []byte) {
	t.Helper()
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewCrashable()
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(vfs.SyncData); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	return fs, orig
}

// convertOpts are the options of a converting Open on an in-memory FS.
func convertOpts() *Options {
	return &Options{ConvertBbolt: true, InitialMmapSize: memMapSize}
}

// verifyConverted checks the file at path on fs: it holds what bbolt saw
// (want) and passes Check, PATH.bbolt holds the bbolt file's bytes, and no
// temporary file is left.
func verifyConverted(t *testing.T, fs vfs.FS, path string, orig []byte, want boltWant, what string) {
	t.Helper()
	db, err := openFS(fs, path, 0o600, &Options{ReadOnly: true, InitialMmapSize: memMapSize})
	if err != nil {
		t.Fatalf("%s: reopening: %v", what, err)
	}
	if db.bolt != nil {
		t.Fatalf("%s: the path still holds the bbolt file", what)
	}
	if d := viewDigest(t, db); d.Sum() != want.sum {
		t.Fatalf("%s: digest %s, bbolt's %s", what, d.Sum(), want.sum)
	}
	checkNamed(t, what, db)
	_ = db.Close()
	if b := memFile(t, fs, path+BboltBackupSuffix); !bytes.Equal(b, orig) {
		t.Fatalf("%s: the backup (%d bytes) is not the bbolt file", what, len(b))
	}
	if _, err := fs.OpenFile(path+convertingSuffix, os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: the temporary file is left: %v", what, err)
	}
}

// memFile returns a file's bytes on fs (nil if it does not exist).
func memFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	b, err := readFS(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readFS returns a file's bytes on fs (nil, nil if it does not exist).
func readFS(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, err
	}
	return b, nil
}

// TestConvertCrash crashes a conversion at every operation that changes a
// file or a directory, keeping each possible prefix of the directory
// operations not yet flushed and none, all or a random part of the
// unflushed writes. In every image the path must hold the bbolt file,
// byte for byte, or the rivet file holding what bbolt held (never neither,
// never a partial file), with the bbolt file kept as PATH.bbolt once the
// rivet file is there; and an Open with ConvertBbolt must then finish.
func TestConvertCrash(t *testing.T) {
	seed := testSeed(t)
	rng := randv2.New(randv2.NewPCG(uint64(seed), 11))
	// Several write transactions per conversion, as a large file has.
	defer func(n int64) { convertTxBytes = n }(convertTxBytes)
	convertTxBytes = 1 << 10
	files := []string{"deep-4k.bbolt", "inline-4k.bbolt"}
	if testing.Short() {
		files = files[:1]
	}
	for _, name := range files {
		src := filepath.Join("internal", "boltfile", "testdata", name)
		want := readBoltWant(t, src)
		const path = "/d/app.db"
		cfs, orig := memBoltFS(t, src, path)
		type image struct {
			fs *vfs.CrashFS
			op string
		}
		var images []image
		ops := 0
		take := func(op string) {
			ops++
			images = append(images, image{cfs.CrashKeepNone(), op}, image{cfs.CrashKeepAll(), op})
			for k := 0; k <= cfs.CrashDirOps(); k++ {
				opts := vfs.DefaultCrashOptions
				opts.KeepProbability = rng.Float64()
				images = append(images, image{cfs.CrashKeeping(k, rng, opts), op})
			}
		}
		db, err := openFS(&opHookFS{FS: cfs, before: take}, path, 0o600, convertOpts())
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		verifyConverted(t, cfs, path, orig, want, name+": after the conversion")
		if ops < 20 {
			t.Fatalf("%s: only %d operations hooked", name, ops)
		}
		var asBbolt, asRivet int
		for i, img := range images {
			what := name + ": image " + strconv.Itoa(i) + " (crash before " + img.op + ")"
			now := memFile(t, img.fs, path)
			if bytes.Equal(now, orig) {
				asBbolt++
			} else {
				asRivet++
				verifyConverted(t, img.fs, path, orig, want, what)
			}
			db, err := openFS(img.fs, path, 0o600, convertOpts())
			if err != nil {
				t.Fatalf("%s: Open with ConvertBbolt after the crash: %v", what, err)
			}
			_ = db.Close()
			verifyConverted(t, img.fs, path, orig, want, what+", then converted")
		}
		t.Logf("%s: %d operations, %d crash images: the bbolt file in %d, the rivet file in %d", name, ops, len(images), asBbolt, asRivet)
		if asBbolt == 0 || asRivet == 0 {
			t.Fatalf("%s: the crash points missed a side: %d bbolt, %d rivet", name, asBbolt, asRivet)
		}
	}
}

// TestConvertRefusesWithoutRoom: a file system reporting too little free
// space refuses the conversion before anything is written, with an error
// naming both figures that matches syscall.ENOSPC.
func TestConvertRefusesWithoutRoom(t *testing.T) {
	const path = "/d/app.db"
	cfs, orig := memBoltFS(t, filepath.Join("internal", "boltfile", "testdata", "mixed-4k.bbolt"), path)
	cfs.SetFreeSpace(1 << 20)
	_, err := openFS(cfs, path, 0o600, convertOpts())
	var se *ConvertSpaceError
	if !errors.As(err, &se) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open: %v, want a ConvertSpaceError matching ENOSPC", err)
	}
	if se.Available != 1<<20 || se.Needed <= se.Available || !strings.Contains(err.Error(), strconv.FormatInt(se.Needed, 10)) {
		t.Fatalf("error %q: needed %d, available %d", err, se.Needed, se.Available)
	}
	assertUntouched(t, cfs, path, orig)
	// With room, the same file converts.
	cfs.SetFreeSpace(1 << 30)
	db, err := openFS(cfs, path, 0o600, convertOpts())
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
}

// assertUntouched checks that path holds orig and that neither the backup
// nor the temporary file exists.
func assertUntouched(t testing.TB, fs vfs.FS, path string, orig []byte) {
	t.Helper()
	if b := memFile(t, fs, path); !bytes.Equal(b, orig) {
		t.Fatal("the bbolt file changed")
	}
	for _, name := range []string{path + BboltBackupSuffix, path + convertingSuffix, path + BboltBackupSuffix + partialSuffix} {
		if b := memFile(t, fs, name); b != nil {
			t.Fatalf("%s exists (%d bytes)", name, len(b))
		}
	}
}

// TestConvertDiskFullWhileCopying: ENOSPC from the rivet file's writes
// fails the Open with an error matching ENOSPC, removes the partial rivet
// file and leaves the bbolt file untouched; the next Open converts.
func TestConvertDiskFullWhileCopying(t *testing.T) {
	const path = "/d/app.db"
	cfs, orig := memBoltFS(t, filepath.Join("internal", "boltfile", "testdata", "mixed-4k.bbolt"), path)
	for op, nth := range map[vfs.Op]int{vfs.OpWrite: 3, vfs.OpTruncate: 1, vfs.OpSync: 1} {
		ffs := vfs.NewFaulty(cfs)
		ffs.Arm(vfs.Fault{Op: op, Name: path + convertingSuffix, Nth: nth, Err: syscall.ENOSPC, Persist: true})
		_, err := openFS(ffs, path, 0o600, convertOpts())
		if !errors.Is(err, syscall.ENOSPC) || ffs.Injected() == 0 {
			t.Fatalf("%v fails with ENOSPC: Open: %v (%d injected)", op, err, ffs.Injected())
		}
		assertUntouched(t, cfs, path, orig)
	}
	db, err := openFS(cfs, path, 0o600, convertOpts())
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	verifyConverted(t, cfs, path, orig, readBoltWant(t, filepath.Join("internal", "boltfile", "testdata", "mixed-4k.bbolt")), "after the disk had room")
}

// TestConvertBackupNameTaken: a PATH.bbolt that is some other file is
// refused, not overwritten; one that is a copy of the bbolt file is taken
// as the backup.
func TestConvertBackupNameTaken(t *testing.T) {
	const path = "/d/app.db"
	src := filepath.Join("internal", "boltfile", "testdata", "inline-4k.bbolt")
	cfs, orig := memBoltFS(t, src, path)
	other := []byte("someone else's file")
	writeMem(t, cfs, path+BboltBackupSuffix, other)
	if _, err := openFS(cfs, path, 0o600, convertOpts()); err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("Open with the backup name taken: %v", err)
	}
	if b := memFile(t, cfs, path+BboltBackupSuffix); !bytes.Equal(b, other) {
		t.Fatal("the other file at the backup name changed")
	}
	if b := memFile(t, cfs, path); !bytes.Equal(b, orig) {
		t.Fatal("the bbolt file changed")
	}
	writeMem(t, cfs, path+BboltBackupSuffix, orig)
	db, err := openFS(cfs, path, 0o600, convertOpts())
	if err != nil {
		t.Fatalf("Open with a copy of the bbolt file at the backup name: %v", err)
	}
	_ = db.Close()
	verifyConverted(t, cfs, path, orig, readBoltWant(t, src), "with a copy as the backup")
}

func writeMem(t testing.TB, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
}

// TestConvertWithoutLinks: where the file system refuses hard links the
// backup is a flushed copy.
func TestConvertWithoutLinks(t *testing.T) {
	const path = "/d/app.db"
	src := filepath.Join("internal", "boltfile", "testdata", "mixed-1k.bbolt")
	cfs, orig := memBoltFS(t, src, path)
	ffs := vfs.NewFaulty(cfs)
	ffs.Arm(vfs.Fault{Op: vfs.OpLink, Err: syscall.EPERM, Persist: true})
	var log logRecorder
	opts := convertOpts()
	opts.Logger = &log
	db, err := openFS(ffs, path, 0o600, opts)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if ffs.Injected() == 0 || !log.has("copying it") {
		t.Fatalf("the link was not refused (%d injected) or no copy was logged: %q", ffs.Injected(), log.lines())
	}
	verifyConverted(t, cfs, path, orig, readBoltWant(t, src), "with a copied backup")
	f, _ := cfs.OpenFile(path, os.O_RDONLY, 0)
	defer f.Close()
	if same, _ := cfs.SameFile(f, path+BboltBackupSuffix); same {
		t.Fatal("the backup is the rivet file")
	}
}

// TestReadOnlyOpenDoesNotConvert: ConvertBbolt on a read-only Open reads
// the bbolt file and changes nothing.
func TestReadOnlyOpenDoesNotConvert(t *testing.T) {
	const path = "/d/app.db"
	cfs, orig := memBoltFS(t, filepath.Join("internal", "boltfile", "testdata", "mixed-4k.bbolt"), path)
	opts := convertOpts()
	opts.ReadOnly = true
	db, err := openFS(cfs, path, 0o600, opts)
	if err != nil {
		t.Fatal(err)
	}
	if db.bolt == nil {
		t.Fatal("a read-only Open did not read the bbolt file")
	}
	_ = db.Close()
	assertUntouched(t, cfs, path, orig)
}

// TestConvertRemovesStaleTemp: a temporary file a crashed conversion left
// (here, garbage) is removed and the conversion redone.
func TestConvertRemovesStaleTemp(t *testing.T) {
	const path = "/d/app.db"
	src := filepath.Join("internal", "boltfile", "testdata", "deep-4k.bbolt")
	cfs, orig := memBoltFS(t, src, path)
	writeMem(t, cfs, path+convertingSuffix, bytes.Repeat([]byte("stale"), 1000))
	writeMem(t, cfs, path+BboltBackupSuffix+partialSuffix, orig[:1000])
	db, err := openFS(cfs, path, 0o600, convertOpts())
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	verifyConverted(t, cfs, path, orig, readBoltWant(t, src), "over a stale temporary file")
	if b := memFile(t, cfs, path+BboltBackupSuffix+partialSuffix); b != nil {
		t.Fatal("a stale partial backup is left")
	}
}

// TestOpenAfterAnotherConversion: an Open that opened the bbolt file before
// another Open converted it (and so locked the file that became the
// backup) notices that the path names another file and opens that.
func TestOpenAfterAnotherConversion(t *testing.T) {
	const path = "/d/app.db"
	src := filepath.Join("internal", "boltfile", "testdata", "inline-4k.bbolt")
	cfs, orig := memBoltFS(t, src, path)
	var second *DB
	var secondErr error
	hook := &opHookFS{FS: cfs, before: func(op string) {
		// Just before the rename, another Open opens the path (the bbolt
		// file); it would then wait for the lock, which the conversion
		// holds. It is let in here, with the lock not yet taken, by
		// opening the file first and loading after the rename.
		if strings.HasPrefix(op, "rename") && second == nil {
			second = newDB(cfs, path, 0o600, *convertOpts())
			second.file, secondErr = cfs.OpenFile(path, os.O_RDWR, 0)
		}
	}}
	db, err := openFS(hook, path, 0o600, convertOpts())
	if err != nil || secondErr != nil || second == nil {
		t.Fatalf("conversion: %v; second open: %v", err, secondErr)
	}
	_ = db.Close()
	size, _ := second.file.Size()
	if err := second.loadBboltFile(size); err != errPathMoved {
		t.Fatalf("the second Open, on the file that is now the backup: %v, want errPathMoved", err)
	}
	_ = second.file.Close()
	verifyConverted(t, cfs, path, orig, readBoltWant(t, src), "after the second Open")
}

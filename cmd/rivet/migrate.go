package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/bench"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/digest"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"
)

func init() {
	registerCommand(newImportCmd)
	registerCommand(newExportCmd)
	registerCommand(newVerifyCmd)
}

// migrateFlags are the options import and export share.
type migrateFlags struct {
	force    bool
	txSize   bench.Size
	pageSize int
	fill     float64
	quiet    bool
}

func (f *migrateFlags) add(cmd *cobra.Command) {
	f.txSize = 64 << 20
	f.fill = 1.0
	fl := cmd.Flags()
	fl.BoolVarP(&f.force, "force", "f", false, "replace DST if it exists")
	fl.Var(&f.txSize, "tx-size", "commit the copy every this many bytes of keys and values (e.g. 16MiB); bounds the memory a transaction holds")
	fl.IntVar(&f.pageSize, "page-size", 0, "page size of DST (default: the OS page size)")
	fl.Float64Var(&f.fill, "fill-percent", 1.0, "how full to pack DST's pages, 0.1 to 1.0 (keys arrive in order, so 1.0 packs them tight, as rivet.Compact does)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "draw no progress bar")
}

func (f *migrateFlags) check() error {
	if f.txSize <= 0 {
		return usagef("--tx-size must be positive")
	}
	if f.fill < 0.1 || f.fill > 1.0 {
		return usagef("--fill-percent %v: want 0.1 to 1.0", f.fill)
	}
	if f.pageSize != 0 && (f.pageSize < 1024 || f.pageSize > 64<<10 || f.pageSize&(f.pageSize-1) != 0) {
		return usagef("--page-size %d: want a power of two from 1024 to 65536", f.pageSize)
	}
	return nil
}

func newImportCmd() *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "import SRC.bbolt DST.rivet",
		Short: "Copy a bbolt file into a new rivet file, then verify the copy",
		Long: `Copies every bucket, nested bucket, key, value and sequence number of the
bbolt file SRC into a new rivet file DST, in write transactions of at most
--tx-size bytes, then walks both files (one read transaction each) and
compares them entry by entry. It prints the counts (buckets, keys, bytes of
keys and values) and a SHA-256 digest of each side's contents; exit status 1
if they differ.

SRC is opened read-only and never changed. DST is written: it must not exist
unless --force is given. The copy is built under a temporary name next to
DST and renamed to DST only once it is complete and verified, so a failed or
interrupted import leaves no partial DST (and, with --force, the old DST in
place).

DST's commits are not flushed one by one: nothing but the finished copy is
of any use, so one flush at the end makes it durable (a crash before that
leaves only the temporary file, which is never renamed).

On a terminal, a progress bar counts entries; its total comes from a first
pass over SRC's keys (a read of the leaves only, which also warms the page
cache the copy then reads).`,
		Example: `  rivet import app.bbolt app.rivet
  rivet import --tx-size 16MiB --page-size 8192 app.bbolt app.rivet
  rivet import --force app.bbolt app.rivet`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return migrate(cmd, args[0], args[1], formatBbolt, &f)
		},
	}
	f.add(cmd)
	return cmd
}

func newExportCmd() *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "export SRC.rivet DST.bbolt",
		Short: "Copy a rivet file into a new bbolt file (the way back), then verify the copy",
		Long: `The reverse of import: copies every bucket, nested bucket, key, value and
sequence number of the rivet file SRC into a new bbolt file DST, in write
transactions of at most --tx-size bytes, then walks both files and compares
them entry by entry, printing counts and a SHA-256 digest of each side;
exit status 1 if they differ. The result is a file bbolt opens and checks as
its own.

SRC is opened read-only and never changed. DST is written: it must not exist
unless --force is given; it is built under a temporary name and renamed to
DST once complete and verified, with one flush at the end.`,
		Example: `  rivet export app.rivet app.bbolt
  rivet export --force --page-size 4096 app.rivet app.bbolt`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return migrate(cmd, args[0], args[1], formatRivet, &f)
		},
	}
	f.add(cmd)
	return cmd
}

func newVerifyCmd() *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "verify A B",
		Short: "Compare the contents of two files, of either format, entry by entry",
		Long: `Walks the files A and B (rivet or bbolt, in any combination) in one read
transaction each and compares every bucket, key, value and sequence number,
printing the counts and a SHA-256 digest of each side's contents — the check
import and export run after copying. Exit status 0 when the contents are
identical, 1 when they differ (the first difference is named). Both files
are opened read-only.`,
		Example: `  rivet verify app.bbolt app.rivet`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openView(args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer a.Close()
			b, err := openView(args[1], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := verifyFiles(cmd.Context(), a, b, progressFor(cmd.ErrOrStderr(), quiet, "verifying", -1))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n%s: %s\nidentical: digest %s on both sides\n",
				args[0], res.a.summary(), args[1], res.b.summary(), res.a.Sum())
			return nil
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "draw no progress bar")
	return cmd
}

// migrate copies src (of format want) into a new file dst of the other
// format and verifies the copy.
func migrate(cmd *cobra.Command, src, dst, want string, f *migrateFlags) (err error) {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	verb := "import"
	if want == formatRivet {
		verb = "export"
	}
	format, err := detectFormat(src)
	if err != nil {
		return err
	}
	if format != want {
		other := "import"
		if verb == "import" {
			other = "export"
		}
		return fmt.Errorf("%s is a %s file: rivet %s reads %s files (rivet %s goes the other way)", src, format, verb, want, other)
	}
	tmp, err := prepareDest(src, dst, f.force)
	if err != nil {
		return err
	}
	// Whatever fails from here on, the temporary copy goes.
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()

	var source fileView
	if want == formatBbolt {
		db, err := openBboltReadOnly(src, stderr)
		if err != nil {
			return err
		}
		source = boltFile{db}
	} else {
		db, err := openRivetReadOnly(src, stderr)
		if err != nil {
			return err
		}
		source = rivetFile{db}
	}
	defer source.Close()

	var dest destDB
	if want == formatBbolt {
		dest, err = openRivetDest(tmp, f.pageSize)
	} else {
		dest, err = openBboltDest(tmp, f.pageSize)
	}
	if err != nil {
		return err
	}
	start := time.Now()
	total := int64(-1)
	showBar := !f.quiet && isTerminal(stderr)
	if showBar {
		if total, err = countEntries(source); err != nil {
			dest.close()
			return err
		}
	}
	c := &copier{ctx: cmd.Context(), db: dest, limit: int64(f.txSize), fill: f.fill, bar: progressFor(stderr, !showBar, verb+"ing", total)}
	err = source.View(func(root bucketView) error {
		if err := c.begin(); err != nil {
			return err
		}
		return walkTree(root, c.apply)
	})
	c.bar.finish()
	if err == nil {
		err = c.finish()
	} else {
		c.abort()
	}
	if cerr := dest.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s %s into %s: %w (the partial copy was removed)", verb, src, dst, err)
	}
	copied := time.Since(start)

	verifyStart := time.Now()
	copyView, err := openView(tmp, stderr)
	if err != nil {
		return fmt.Errorf("reopening the copy: %w", err)
	}
	res, err := verifyFiles(cmd.Context(), source, copyView, progressFor(stderr, !showBar, "verifying", c.entries))
	copyView.Close()
	if err != nil && cmd.Context() != nil && cmd.Context().Err() != nil {
		return fmt.Errorf("%s %s into %s: %w (the partial copy was removed)", verb, src, dst, err)
	}
	if err != nil {
		return fmt.Errorf("%s %s into %s: the copy does not match its source (removed): %w", verb, src, dst, err)
	}
	if err := commitDest(tmp, dst); err != nil {
		return err
	}
	past := verb + "ed"
	fmt.Fprintf(stdout, "%s %s keys in %s buckets (%s) in %s; verified in %s: digest %s on both sides\n",
		past, groupDigits(res.a.Keys), groupDigits(res.a.Buckets), sizeString(res.a.Bytes),
		seconds(copied), seconds(time.Since(verifyStart)), res.a.Sum()[:16])
	fmt.Fprintf(stdout, "%s: %s\n%s: %s\n", src, res.a.summary(), dst, res.b.summary())
	return nil
}

// prepareDest checks that dst may be written and returns the temporary path
// the copy is built at (next to dst, so the final rename stays on one file
// system).
func prepareDest(src, dst string, force bool) (string, error) {
	if fi, err := os.Stat(dst); err == nil {
		if !force {
			return "", fmt.Errorf("%s already exists: pass --force to replace it", dst)
		}
		if fi.IsDir() {
			return "", fmt.Errorf("%s is a directory", dst)
		}
		if si, err := os.Stat(src); err == nil && os.SameFile(si, fi) {
			return "", fmt.Errorf("%s and %s are the same file", src, dst)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".partial-"+strconv.Itoa(os.Getpid()))
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return tmp, nil
}

// commitDest renames the finished copy to dst and makes the rename durable.
func commitDest(tmp, dst string) error {
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		err = d.Sync()
		d.Close()
		// Some file systems refuse to sync a directory; the rename is
		// then as durable as they make it.
		_ = err
	}
	return nil
}

// maxWalkNesting bounds bucket nesting in a walk (digest.MaxNesting).
const maxWalkNesting = digest.MaxNesting

// entry is one element of a file's canonical stream (digest.Entry).
type entry = digest.Entry

const (
	kindBucket = digest.KindBucket
	kindEnd    = digest.KindEnd
	kindKV     = digest.KindKV
)

// digestBucket adapts a bucketView to what digest.Walk reads.
type digestBucket struct{ b bucketView }

func (d digestBucket) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return d.b.ForEach(fn)
}

func (d digestBucket) Bucket(name []byte) digest.Bucket {
	c := d.b.Bucket(name)
	if c == nil {
		return nil
	}
	return digestBucket{c}
}

func (d digestBucket) Sequence() uint64 { return d.b.Sequence() }

// walkTree calls fn for every entry under the root b, in canonical order
// (digest.Walk), naming the bucket path and key where a walk fails.
func walkTree(b bucketView, fn func(entry) error) error {
	err := digest.Walk(digestBucket{b}, fn)
	var we *digest.WalkError
	if errors.As(err, &we) {
		return fmt.Errorf("bucket %s key %s: %w", pathString(we.Path), formatBytes(we.Key, fmtAuto), we.Err)
	}
	return err
}

// countEntries counts a file's buckets and keys: the progress bar's total.
func countEntries(f fileView) (int64, error) {
	var n int64
	err := f.View(func(root bucketView) error {
		return walkTree(root, func(e entry) error {
			if e.Kind != kindEnd {
				n++
			}
			return nil
		})
	})
	return n, err
}

// entries returns f's canonical stream as an iterator; a walk error (a
// damaged file) comes as the last pair.
func entries(f fileView) iter.Seq2[entry, error] {
	return func(yield func(entry, error) bool) {
		stopped := errors.New("stopped")
		err := f.View(func(root bucketView) error {
			return walkTree(root, func(e entry) error {
				if !yield(e, nil) {
					return stopped
				}
				return nil
			})
		})
		if err != nil && err != stopped {
			yield(entry{}, err)
		}
	}
}

// streamDigest is one side's digest.Digest, with the tool's summary line.
type streamDigest struct{ *digest.Digest }

func newStreamDigest() *streamDigest { return &streamDigest{digest.New()} }

func (d *streamDigest) summary() string {
	return fmt.Sprintf("%s buckets, %s keys, %s of keys and values, sha256 %s",
		groupDigits(d.Buckets), groupDigits(d.Keys), sizeString(d.Bytes), d.Sum())
}

// verifyResult is what verifyFiles found on each side.
type verifyResult struct{ a, b *streamDigest }

// verifyFiles walks a and b, one read transaction each, comparing their
// canonical streams entry by entry. It fails at the first difference,
// naming its bucket path and key.
func verifyFiles(ctx context.Context, a, b fileView, bar *bar) (verifyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	defer bar.finish()
	res := verifyResult{newStreamDigest(), newStreamDigest()}
	nextA, stopA := iter.Pull2(entries(a))
	defer stopA()
	nextB, stopB := iter.Pull2(entries(b))
	defer stopB()
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return res, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		ea, errA, okA := nextA()
		eb, errB, okB := nextB()
		if errA != nil {
			return res, fmt.Errorf("reading the first file: %w", errA)
		}
		if errB != nil {
			return res, fmt.Errorf("reading the second file: %w", errB)
		}
		if !okA && !okB {
			return res, nil
		}
		if !okA || !okB || !ea.Same(eb) {
			where := pathString(res.a.Path)
			return res, fmt.Errorf("first difference in bucket %s: first file has %s, second has %s",
				where, describeEntry(ea, okA), describeEntry(eb, okB))
		}
		res.a.Add(ea)
		res.b.Add(eb)
		if ea.Kind != kindEnd {
			bar.add(1)
		}
	}
}

func describeEntry(e entry, ok bool) string {
	if !ok {
		return "nothing more"
	}
	switch e.Kind {
	case kindBucket:
		return fmt.Sprintf("nested bucket %s (sequence %d)", formatBytes(e.Key, fmtAuto), e.Seq)
	case kindEnd:
		return "the end of the bucket"
	}
	return fmt.Sprintf("key %s with a %d-byte value (sha256 %.16x)", formatBytes(e.Key, fmtAuto), len(e.Value), sha256.Sum256(e.Value))
}

// destDB is the file a copy writes: rivet for import, bbolt for export.
type destDB interface {
	begin() (destTx, error)
	// sync makes every commit durable (the commits themselves do not flush).
	sync() error
	close() error
}

// destTx is a write transaction on a destDB.
type destTx interface {
	// create makes the bucket name inside parent (nil: at the top level).
	create(parent destBucket, name []byte, fill float64) (destBucket, error)
	// open returns the existing bucket name inside parent (nil: top level).
	open(parent destBucket, name []byte, fill float64) (destBucket, error)
	commit() error
	rollback()
}

// destBucket is a bucket of a destTx.
type destBucket interface {
	put(k, v []byte) error
	setSequence(seq uint64) error
}

// copier applies a canonical stream to a destDB in transactions of at most
// limit bytes of keys and values.
type copier struct {
	db      destDB
	tx      destTx
	limit   int64
	fill    float64
	size    int64 // bytes written by the current transaction
	path    [][]byte
	stack   []destBucket // stack[i] is the bucket at path[:i+1]
	entries int64
	bar     *bar
	// lenient (salvage) turns what a damaged source can hold but a rivet
	// file cannot — a bucket name twice, a key and a bucket of the same
	// name, an over-long key — into conflicts, listed, instead of errors.
	lenient   bool
	conflicts []string
	// ctx, when cancelled (Ctrl-C), stops the copy; the caller then
	// removes the partial file.
	ctx context.Context
}

// refusedEntry reports whether err is a destination's refusal of an entry
// (not a failure of the destination itself).
func refusedEntry(err error) bool {
	for _, e := range []error{rerrors.ErrBucketExists, rerrors.ErrIncompatibleValue, rerrors.ErrKeyRequired,
		rerrors.ErrKeyTooLarge, rerrors.ErrValueTooLarge, rerrors.ErrBucketNameRequired} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (c *copier) begin() (err error) {
	c.tx, err = c.db.begin()
	return err
}

func (c *copier) top() destBucket {
	if len(c.stack) == 0 {
		return nil
	}
	return c.stack[len(c.stack)-1]
}

// apply writes e. A bucket's sequence is set when it is created, so an
// empty bucket keeps it too.
func (c *copier) apply(e entry) error {
	if e.Kind == kindEnd {
		c.path, c.stack = c.path[:len(c.path)-1], c.stack[:len(c.stack)-1]
		return nil
	}
	if c.ctx != nil && c.entries%1024 == 0 && c.ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", c.ctx.Err())
	}
	n := int64(len(e.Key) + len(e.Value))
	if c.size > 0 && c.size+n > c.limit {
		if err := c.rotate(); err != nil {
			return err
		}
	}
	c.size += n
	c.entries++
	c.bar.add(1)
	if e.Kind == kindBucket {
		b, err := c.createBucket(e.Key, e.Seq)
		if err != nil {
			return err
		}
		c.path, c.stack = append(c.path, e.Key), append(c.stack, b)
		return nil
	}
	top := c.top()
	if top == nil {
		// Inside a bucket the destination refused (listed already).
		return nil
	}
	if err := top.put(e.Key, e.Value); err != nil {
		if c.lenient && refusedEntry(err) {
			c.conflicts = append(c.conflicts, fmt.Sprintf("bucket %s key %s: not written: %v", pathString(c.path), formatBytes(e.Key, fmtAuto), err))
			return nil
		}
		return fmt.Errorf("bucket %s key %s: %w", pathString(c.path), formatBytes(e.Key, fmtAuto), err)
	}
	return nil
}

// createBucket creates the bucket name in the current one. A lenient copy
// merges a name met twice into the bucket made first, and skips (nil) a
// bucket whose name a key already holds.
func (c *copier) createBucket(name []byte, seq uint64) (destBucket, error) {
	parent := c.top()
	if len(c.path) > 0 && parent == nil {
		return nil, nil
	}
	b, err := c.tx.create(parent, name, c.fill)
	if err != nil && c.lenient && errors.Is(err, rerrors.ErrBucketExists) {
		b, err = c.tx.open(parent, name, c.fill)
	}
	if err != nil {
		where := pathString(append(c.path[:len(c.path):len(c.path)], name))
		if c.lenient && refusedEntry(err) {
			c.conflicts = append(c.conflicts, fmt.Sprintf("bucket %s: not written, nor anything in it: %v", where, err))
			return nil, nil
		}
		return nil, fmt.Errorf("creating bucket %s: %w", where, err)
	}
	if seq != 0 {
		if err := b.setSequence(seq); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// rotate commits the current transaction, begins the next and reopens the
// bucket path the stream is in.
func (c *copier) rotate() error {
	if err := c.tx.commit(); err != nil {
		c.tx = nil
		return err
	}
	if err := c.begin(); err != nil {
		c.tx = nil
		return err
	}
	c.size = 0
	var parent destBucket
	for i, name := range c.path {
		if c.stack[i] == nil {
			// A refused bucket stays refused, and so does all below it.
			for j := i; j < len(c.stack); j++ {
				c.stack[j] = nil
			}
			break
		}
		b, err := c.tx.open(parent, name, c.fill)
		if err != nil {
			return fmt.Errorf("reopening bucket %s: %w", pathString(c.path[:i+1]), err)
		}
		c.stack[i], parent = b, b
	}
	return nil
}

// finish commits the last transaction and flushes the copy.
func (c *copier) finish() error {
	if err := c.tx.commit(); err != nil {
		return err
	}
	c.tx = nil
	return c.db.sync()
}

func (c *copier) abort() {
	if c.tx != nil {
		c.tx.rollback()
		c.tx = nil
	}
}

// Rivet as a destination. Durability None: a commit does not flush; the
// copy is flushed once, by sync, at the end.

type rivetDest struct{ db *rivet.DB }

func openRivetDest(path string, pageSize int) (destDB, error) {
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: pageSize, Durability: rivet.None, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	return rivetDest{db}, nil
}

func (d rivetDest) begin() (destTx, error) {
	tx, err := d.db.Begin(true)
	if err != nil {
		return nil, err
	}
	return rivetTx{tx}, nil
}
func (d rivetDest) sync() error  { return d.db.Sync() }
func (d rivetDest) close() error { return d.db.Close() }

type rivetTx struct{ tx *rivet.Tx }

func (t rivetTx) create(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *rivet.Bucket
	var err error
	if parent == nil {
		b, err = t.tx.CreateBucket(name)
	} else {
		b, err = parent.(rivetDestBucket).b.CreateBucket(name)
	}
	if err != nil {
		return nil, err
	}
	b.FillPercent = fill
	return rivetDestBucket{b}, nil
}

func (t rivetTx) open(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *rivet.Bucket
	if parent == nil {
		b = t.tx.Bucket(name)
	} else {
		b = parent.(rivetDestBucket).b.Bucket(name)
	}
	if b == nil {
		return nil, rerrors.ErrBucketNotFound
	}
	b.FillPercent = fill
	return rivetDestBucket{b}, nil
}

func (t rivetTx) commit() error { return t.tx.Commit() }
func (t rivetTx) rollback()     { _ = t.tx.Rollback() }

type rivetDestBucket struct{ b *rivet.Bucket }

func (b rivetDestBucket) put(k, v []byte) error        { return b.b.Put(k, v) }
func (b rivetDestBucket) setSequence(seq uint64) error { return b.b.SetSequence(seq) }

// bbolt as a destination: NoSync, then one Sync at the end.

type boltDest struct{ db *bolt.DB }

func openBboltDest(path string, pageSize int) (destDB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: pageSize, NoSync: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	return boltDest{db}, nil
}

func (d boltDest) begin() (destTx, error) {
	tx, err := d.db.Begin(true)
	if err != nil {
		return nil, err
	}
	return boltTx{tx}, nil
}
func (d boltDest) sync() error  { return d.db.Sync() }
func (d boltDest) close() error { return d.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) create(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *bolt.Bucket
	var err error
	if parent == nil {
		b, err = t.tx.CreateBucket(name)
	} else {
		b, err = parent.(boltDestBucket).b.CreateBucket(name)
	}
	if err != nil {
		return nil, err
	}
	b.FillPercent = fill
	return boltDestBucket{b}, nil
}

func (t boltTx) open(parent destBucket, name []byte, fill float64) (destBucket, error) {
	var b *bolt.Bucket
	if parent == nil {
		b = t.tx.Bucket(name)
	} else {
		b = parent.(boltDestBucket).b.Bucket(name)
	}
	if b == nil {
		return nil, errors.New("bucket not found")
	}
	b.FillPercent = fill
	return boltDestBucket{b}, nil
}

func (t boltTx) commit() error { return t.tx.Commit() }
func (t boltTx) rollback()     { _ = t.tx.Rollback() }

type boltDestBucket struct{ b *bolt.Bucket }

func (b boltDestBucket) put(k, v []byte) error        { return b.b.Put(k, v) }
func (b boltDestBucket) setSequence(seq uint64) error { return b.b.SetSequence(seq) }

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

// groupDigits prints n with thousands separators: 1,234,567.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// seconds prints a duration as "12.3 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rivetkv/rivet/bytesize"
	"github.com/spf13/cobra"
)

// The flow import and export share: copy a file of one format into a new
// file of the other (copier.go), then compare the two (verify.go).

// migrateFlags are the options import and export share.
type migrateFlags struct {
	force    bool
	txSize   bytesize.Size
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

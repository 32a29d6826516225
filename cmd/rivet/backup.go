package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/spf13/cobra"
)

func init() {
	registerCommand(newBackupCmd)
	registerCommand(newCloneCmd)
}

// copyFlags are the options backup and clone share.
type copyFlags struct {
	force bool
	quiet bool
}

func (f *copyFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.force, "force", "f", false, "replace DST if it exists (the new copy is built beside it and renamed over it only once verified)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "draw no progress")
}

// copiesHelp is the part of backup's and clone's help they share.
const copiesHelp = `SRC may be in use: when another process has it open for writing and keeps
committing, the copy is still consistent. The tool cannot open such a file
(the writer holds its lock), and it never maps it (the writer may cut the
file under a mapping): it reads it with pread, page by page from the
newest meta down, accepting each page only if it matches the checksum its
parent recorded. A page the writer reused meanwhile fails that check, and
the copy goes on from the writer's newer meta, re-reading only what changed
(a few passes at most, usually one). The copy then holds the newest sync
point the writer had written: in Full mode, every commit it made. When no
process has SRC open for writing, the tool opens it read-only, so none can
start writing until the copy is done, and copies its newest state.

DST must not exist, unless --force is given (then it is replaced, and only
once the new copy is verified). The copy is built under a temporary name
beside DST and renamed to DST at the end. Before that it is opened and
checked (every page reachable once, checksums, key order), and its
transaction id is printed; if it does not verify, it is removed and the
command fails. SRC is never written.

Exit status: 0 when DST was written and verified; 1 when SRC is missing or
not a rivet file, DST exists (without --force), the copy failed or did not
verify; 2 for a wrong command line.`

func newBackupCmd() *cobra.Command {
	var f copyFlags
	cmd := &cobra.Command{
		Use:   "backup SRC DST",
		Short: "Copy a rivet file consistently, even while another process writes it",
		Long: `Writes a consistent copy of the rivet file SRC to DST: the state of one
commit, page by page, as Tx.WriteTo writes it (free pages become zeros, so
the copy may be smaller than SRC). A backup never shares blocks with SRC,
even where the file system could clone (see rivet clone for that). On a
terminal, a progress bar shows the bytes copied.

` + copiesHelp,
		Example: `  rivet backup app.db /backups/app-$(date +%F).db
  rivet backup --force app.db app.db.bak`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCopy(cmd, args[0], args[1], true, &f)
		},
	}
	f.register(cmd)
	return cmd
}

func newCloneCmd() *cobra.Command {
	var f copyFlags
	cmd := &cobra.Command{
		Use:   "clone SRC DST",
		Short: "Clone a rivet file in O(1) through the file system's copy-on-write, or copy it",
		Long: `Makes DST a consistent copy of the rivet file SRC as rivet backup does, but
where the file system can clone files (btrfs, XFS with reflink, bcachefs:
the FICLONE ioctl on Linux; APFS: clonefile on macOS) DST is a
copy-on-write clone of SRC: it takes milliseconds however large SRC is,
copies no data, and shares SRC's blocks until either file changes
them. Elsewhere (ext4, tmpfs, another file system than SRC's, Windows) it
falls back to the copy rivet backup makes. The last line says which it
did, and why it could not clone.

A clone of a file no process is writing is SRC byte for byte. A clone of a
file another process is writing is taken at one instant, which is exactly
what a power cut at that instant would leave on disk; rivet is built to
open such a file at its newest complete commit (docs/design.md §3.2), and
the tool opens the clone once so that it does, and closes it cleanly.

` + copiesHelp,
		Example: `  rivet clone app.db app-snapshot.db
  rivet clone --force /data/app.db /data/app-before-migration.db`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCopy(cmd, args[0], args[1], false, &f)
		},
	}
	f.register(cmd)
	return cmd
}

// runCopy is backup (copy set) and clone.
func runCopy(cmd *cobra.Command, src, dst string, copyIt bool, f *copyFlags) (err error) {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if format, err := detectFormat(src); err != nil {
		return err
	} else if format != formatRivet {
		return fmt.Errorf("%s is a %s file: rivet %s copies rivet files (convert it with rivet import)", src, format, cmd.Name())
	}
	tmp, err := prepareDest(src, dst, f.force)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	holder := ""
	if locked, _ := srcLocked(src); locked {
		holder = lockHolder(src)
		fmt.Fprintf(stderr, "%s is open for writing in another process%s: copying it without its lock\n", src, holder)
	}
	bar := &byteBar{w: stderr, off: f.quiet, label: "copying"}
	ctx := cmd.Context()
	start := time.Now()
	res, err := rivet.CloneFile(src, tmp, &rivet.CloneOptions{
		Mode: fi.Mode().Perm(),
		Copy: copyIt,
		Progress: func(written, total int64) error {
			bar.set(written, total)
			if ctx != nil {
				return ctx.Err()
			}
			return nil
		},
	})
	bar.finish()
	if err != nil {
		return fmt.Errorf("%s %s to %s: %w (nothing was written to %s)", cmd.Name(), src, dst, err, dst)
	}
	took := time.Since(start)

	verifyStart := time.Now()
	txid, err := verifyCopy(tmp, dst)
	if err != nil {
		return err
	}
	if txid != res.Txid {
		return fmt.Errorf("%s opens at txid %d, but the copy was of txid %d (removed)", dst, txid, res.Txid)
	}
	if err := commitDest(tmp, dst); err != nil {
		return err
	}
	verified := time.Since(verifyStart)

	var what string
	switch {
	case res.Method == rivet.CloneReflinked && res.Live:
		what = fmt.Sprintf("cloned %s to %s with %s (copy-on-write, 0 bytes copied) while another process%s was writing it, in %s; the clone was opened once to recover its newest commit",
			src, dst, res.Call, holder, duration(took))
	case res.Method == rivet.CloneReflinked:
		what = fmt.Sprintf("cloned %s to %s with %s (copy-on-write, 0 bytes copied) in %s", src, dst, res.Call, duration(took))
	default:
		what = fmt.Sprintf("copied %s from %s to %s in %s", sizeString(res.Written), src, dst, duration(took))
		if !copyIt {
			what += ": " + res.Fallback
		}
		if res.Live {
			what += fmt.Sprintf("; another process%s was writing %s: read without its lock in %d pass(es)", holder, src, res.Passes)
		}
	}
	fmt.Fprintln(stdout, what)
	fmt.Fprintf(stdout, "verified %s: it opens at txid %d and passes check (%s, %s)\n", dst, txid, sizeString(res.Size), duration(verified))
	return nil
}

// srcLocked reports whether another process holds path's lock for writing,
// as CloneFile will find.
func srcLocked(path string) (bool, error) {
	db, err := rivet.Open(path, 0, &rivet.Options{ReadOnly: true, Timeout: time.Nanosecond})
	if err != nil {
		return errors.Is(err, rerrors.ErrTimeout), err
	}
	return false, db.Close()
}

// verifyCopy opens the copy at tmp read-only and runs the engine's full
// check; it returns the txid the copy opens at. Its errors name dst, the
// path the user asked for.
func verifyCopy(tmp, dst string) (uint64, error) {
	db, err := rivet.Open(tmp, 0, &rivet.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("the copy for %s does not open (removed): %w", dst, err)
	}
	defer db.Close()
	var txid uint64
	var problems []error
	err = db.View(func(tx *rivet.Tx) error {
		txid = uint64(tx.ID())
		for p := range tx.Check() {
			problems = append(problems, p)
		}
		return nil
	})
	if err == nil && len(problems) > 0 {
		err = fmt.Errorf("%d problem(s), the first: %w", len(problems), problems[0])
	}
	if err != nil {
		return 0, fmt.Errorf("the copy for %s fails its check (removed): %w", dst, err)
	}
	return txid, nil
}

// duration prints a short duration readably: "2 ms", "1.4 s".
func duration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return seconds(d)
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/bytesize"
	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/spf13/cobra"
)

func init() { registerCommand(newSalvageCmd) }

type salvageFlags struct {
	force    bool
	format   string
	txSize   int64
	pageSize int
	quiet    bool
}

func newSalvageCmd() *cobra.Command {
	var f salvageFlags
	txSize := bytesize.Size(64 << 20)
	cmd := &cobra.Command{
		Use:   "salvage BAD NEW",
		Short: "Copy every key still readable from a damaged rivet or bbolt file into a new rivet file",
		Long: `Reads the damaged file BAD (rivet or bbolt) without trusting it: every page
is validated (for rivet files against the checksum its parent recorded),
and instead of stopping at the first page that fails, salvage skips the
subtree below it and goes on. Every bucket, key, value and sequence number
it can read is written to NEW, always a rivet file. Then it reports exactly
what was lost: the bucket path and key range each skipped subtree held
(from the separator keys of the branch above it), the page and why it
failed; a value or nested bucket lost alone is named by its key.

BAD is opened read-only and never changed. NEW is written: it must not
exist unless --force is given; it is built under a temporary name and
renamed to NEW at the end, whatever was lost.

The state salvaged from a rivet file is the one Open would use. If the
newest commit does not verify, the previous one is taken; if both meta
pages are damaged, the one whose root page still validates (a note says
so). bbolt pages carry no checksums: damage is found where it breaks the
page structure (wrong page id or type, offsets outside the page, keys out
of order or outside their branch's range, cycles); a changed byte inside a
value cannot be seen.

Exit status: 0 when the file was whole and everything was copied; 1 when
something was lost or the file was damaged in any way (NEW is written
either way and holds everything that could be read); 2 for a wrong command
line.`,
		Example: `  rivet salvage damaged.db rescued.db
  rivet salvage --format bbolt broken.bbolt rescued.rivet`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.txSize = int64(txSize)
			if err := checkChoice("format", f.format, []string{"auto", formatRivet, formatBbolt}); err != nil {
				return err
			}
			mf := migrateFlags{txSize: txSize, pageSize: f.pageSize, fill: 1.0}
			if err := mf.check(); err != nil {
				return err
			}
			return runSalvage(cmd, args[0], args[1], &f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.force, "force", "f", false, "replace NEW if it exists")
	fl.StringVar(&f.format, "format", "auto", "format of BAD: auto (from its meta pages), rivet or bbolt; give it when both meta pages are damaged")
	fl.Var(&txSize, "tx-size", "commit NEW every this many bytes of keys and values")
	fl.IntVar(&f.pageSize, "page-size", 0, "page size of NEW (default: the OS page size)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "draw no progress")
	return cmd
}

func runSalvage(cmd *cobra.Command, bad, dst string, f *salvageFlags) (err error) {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	// rivet.Salvage tells the formats apart by their meta pages' magic
	// numbers alone, so it reads a file whose metas are too damaged for
	// detectFormat; --format names the format for the report then, and
	// must not contradict a file whose format detectFormat can tell.
	format, derr := detectFormat(bad)
	switch {
	case f.format == "auto" && derr != nil:
		return fmt.Errorf("%w (if it is a damaged rivet or bbolt file, say which with --format)", derr)
	case f.format != "auto" && derr == nil && format != f.format:
		return fmt.Errorf("%s is a %s file, not %s (leave --format out)", bad, format, f.format)
	case f.format != "auto":
		format = f.format
	}
	tmp, err := prepareDest(bad, dst, f.force)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	dest, err := openRivetDest(tmp, f.pageSize)
	if err != nil {
		return err
	}
	start := time.Now()
	c := &copier{ctx: cmd.Context(), db: dest, limit: f.txSize, fill: 1.0, lenient: true, bar: progressFor(stderr, f.quiet, "salvaging", -1)}
	sv := &salvageSink{c: c}
	var rep *rivet.SalvageReport
	if err = c.begin(); err == nil {
		rep, err = rivet.Salvage(bad, sv)
		if errors.Is(err, rerrors.ErrTimeout) {
			err = fmt.Errorf("%w; stop it first", err)
		}
	}
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
		return fmt.Errorf("salvage %s: %w", bad, err)
	}
	if err := commitDest(tmp, dst); err != nil {
		return err
	}
	w := stdout
	fmt.Fprintf(w, "salvaged %s keys in %s buckets (%s) from %s (%s, meta %d, txid %d) into %s in %s\n",
		groupDigits(rep.Keys), groupDigits(rep.Buckets), sizeString(rep.Bytes), bad, format, rep.Meta, rep.Txid, dst, seconds(time.Since(start)))
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, l := range rep.Lost {
		fmt.Fprintf(w, "lost: %s\n", lossString(l))
	}
	for _, c := range sv.c.conflicts {
		fmt.Fprintf(w, "lost: %s\n", c)
	}
	switch lost := len(rep.Lost) + len(sv.c.conflicts); {
	case lost > 0:
		return fmt.Errorf("%d part(s) of %s could not be read (listed above); %s holds everything else", lost, bad, dst)
	case len(rep.Notes) > 0:
		return fmt.Errorf("%s is damaged (see the notes above), but every key of the state salvaged was read", bad)
	}
	fmt.Fprintln(w, "nothing lost")
	return nil
}

// lossString describes a loss for the terminal: keys as formatBytes
// prints them.
func lossString(l rivet.SalvageLoss) string {
	var b strings.Builder
	b.WriteString("bucket ")
	b.WriteString(pathString(l.Bucket))
	switch {
	case l.Key != nil:
		fmt.Fprintf(&b, " key %s", formatBytes(l.Key, fmtAuto))
	case l.From == nil && l.To == nil:
		b.WriteString(" all keys")
	default:
		from, to := "first key", "end"
		if l.From != nil {
			from = formatBytes(l.From, fmtAuto)
		}
		if l.To != nil {
			to = formatBytes(l.To, fmtAuto)
		}
		fmt.Fprintf(&b, " keys [%s, %s)", from, to)
	}
	fmt.Fprintf(&b, " (page %d: %s)", l.Page, l.Reason())
	return b.String()
}

// salvageSink turns Salvage's visits into the copier's canonical stream:
// a visit to a bucket or key outside the current bucket path first closes
// the buckets it left. The visitor's slices are valid only during the
// call, so names, keys and values are copied (the copier keeps them until
// its transaction commits).
type salvageSink struct{ c *copier }

// moveTo closes buckets until the copier's path is a prefix of path.
func (s *salvageSink) moveTo(path [][]byte) error {
	c := s.c
	for len(c.path) > len(path) || !isPrefix(c.path, path) {
		if err := c.apply(entry{Kind: kindEnd}); err != nil {
			return err
		}
	}
	return nil
}

func isPrefix(prefix, path [][]byte) bool {
	if len(prefix) > len(path) {
		return false
	}
	for i := range prefix {
		if !bytes.Equal(prefix[i], path[i]) {
			return false
		}
	}
	return true
}

// Bucket implements rivet.SalvageVisitor.
func (s *salvageSink) Bucket(path [][]byte, seq uint64) error {
	if err := s.moveTo(path[:len(path)-1]); err != nil {
		return err
	}
	if len(s.c.path) != len(path)-1 {
		return fmt.Errorf("bucket %s visited before its parent", pathString(path))
	}
	return s.c.apply(entry{Kind: kindBucket, Key: bytes.Clone(path[len(path)-1]), Seq: seq})
}

// Put implements rivet.SalvageVisitor.
func (s *salvageSink) Put(path [][]byte, k, v []byte) error {
	if err := s.moveTo(path); err != nil {
		return err
	}
	if len(s.c.path) != len(path) {
		return fmt.Errorf("key in bucket %s visited before the bucket", pathString(path))
	}
	return s.c.apply(entry{Kind: kindKV, Key: bytes.Clone(k), Value: append([]byte{}, v...)})
}

package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"iter"

	"github.com/rivetkv/rivet/inspect"
	"github.com/spf13/cobra"
)

func init() { registerCommand(newVerifyCmd) }

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

// streamDigest is one side's inspect.Digest, with the tool's summary line.
type streamDigest struct{ *inspect.Digest }

func newStreamDigest() *streamDigest { return &streamDigest{inspect.NewDigest()} }

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

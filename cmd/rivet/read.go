package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// The read commands: buckets, keys, get, dump. Each opens FILE read-only
// in its detected format, walks it in one read transaction and prints
// bytes safely (--format).

func init() {
	registerCommand(newBucketsCmd)
	registerCommand(newKeysCmd)
	registerCommand(newGetCmd)
	registerCommand(newDumpCmd)
}

// readFlags are the flags the read commands share.
type readFlags struct {
	format      string // --format: how keys and values are printed
	parseFormat string // --parse-format: how bucket and key arguments are read
}

func (f *readFlags) add(cmd *cobra.Command, withFormat bool) {
	if withFormat {
		cmd.Flags().StringVar(&f.format, "format", fmtAuto, "how keys and values are printed: "+strings.Join(byteFormats, ", ")+
			" (auto: text as is, anything else as 0x-prefixed hex; json: one object per entry, text as a string, else a _hex field)")
	}
	cmd.Flags().StringVar(&f.parseFormat, "parse-format", fmtASCII, "how BUCKET and KEY arguments are read: ascii or hex")
}

func (f *readFlags) check() error {
	if f.format != "" {
		if err := checkChoice("format", f.format, byteFormats); err != nil {
			return err
		}
	}
	return checkChoice("parse-format", f.parseFormat, parseFormats)
}

// viewFile opens path read-only and runs fn on its root in one read
// transaction.
func viewFile(cmd *cobra.Command, path string, fn func(root bucketView) error) error {
	fv, err := openView(path, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	err = fv.View(fn)
	if cerr := fv.Close(); err == nil {
		err = cerr
	}
	return err
}

// lineWriter buffers a command's output: a dump of millions of keys is
// not a syscall per line.
type lineWriter struct{ *bufio.Writer }

func newLineWriter(w io.Writer) lineWriter { return lineWriter{bufio.NewWriterSize(w, 64<<10)} }

func newBucketsCmd() *cobra.Command {
	var f readFlags
	var recursive bool
	cmd := &cobra.Command{
		Use:   "buckets FILE [BUCKET...]",
		Short: "List the buckets of a file (or the buckets nested in BUCKET...)",
		Long: `Lists the top-level buckets of FILE, one per line, or with BUCKET... the
buckets nested in that bucket path. --recursive lists every bucket below,
indented by depth, with its key count and sequence. Reads rivet and bbolt
files; opens FILE read-only and never writes to it.`,
		Example: `  rivet buckets app.db
  rivet buckets --recursive app.db
  rivet buckets app.db users sessions`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			path, err := parseArgs(args[1:], f.parseFormat)
			if err != nil {
				return err
			}
			out := newLineWriter(cmd.OutOrStdout())
			defer out.Flush()
			return viewFile(cmd, args[0], func(root bucketView) error {
				b := bucketAt(root, path)
				if b == nil {
					return errNotFound("bucket", path)
				}
				return listBuckets(out, b, 0, recursive, f.format)
			})
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "list nested buckets at every depth, with key counts and sequences")
	return cmd
}

// listBuckets prints b's nested buckets (and theirs, if recursive).
func listBuckets(w lineWriter, b bucketView, depth int, recursive bool, format string) error {
	return b.ForEach(func(k, _ []byte, isBucket bool) error {
		if !isBucket {
			return nil
		}
		child := b.Bucket(k)
		if child == nil {
			return fmt.Errorf("bucket %s listed but cannot be opened", formatBytes(k, fmtAuto))
		}
		if format == fmtJSON {
			m := map[string]any{"depth": depth}
			jsonBytes(m, "name", k)
			if recursive {
				m["keys"], m["sequence"] = countKeys(child), child.Sequence()
			}
			return writeJSON(w, m)
		}
		if !recursive {
			_, err := fmt.Fprintln(w, formatBytes(k, format))
			return err
		}
		if _, err := fmt.Fprintf(w, "%s%s  (%d keys, sequence %d)\n", strings.Repeat("  ", depth), formatBytes(k, format), countKeys(child), child.Sequence()); err != nil {
			return err
		}
		return listBuckets(w, child, depth+1, recursive, format)
	})
}

// countKeys counts b's plain keys (not nested buckets).
func countKeys(b bucketView) int {
	n := 0
	_ = b.ForEach(func(_, _ []byte, isBucket bool) error {
		if !isBucket {
			n++
		}
		return nil
	})
	return n
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

func newKeysCmd() *cobra.Command {
	var f readFlags
	var prefix string
	var limit int
	var values bool
	cmd := &cobra.Command{
		Use:   "keys FILE BUCKET...",
		Short: "List the keys of a bucket",
		Long: `Lists the keys of the bucket at BUCKET... (a path of nested buckets), one per
line, in key order; nested buckets are listed with a trailing " (bucket)".
--values prints "key = value" instead. Reads rivet and bbolt files; opens
FILE read-only and never writes to it.`,
		Example: `  rivet keys app.db users
  rivet keys --prefix user: --limit 10 app.db users
  rivet keys --format hex app.db index by-time`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("--limit %d: want 0 (no limit) or more", limit)
			}
			path, err := parseArgs(args[1:], f.parseFormat)
			if err != nil {
				return err
			}
			pfx, err := parseArg(prefix, f.parseFormat)
			if err != nil {
				return err
			}
			out := newLineWriter(cmd.OutOrStdout())
			defer out.Flush()
			return viewFile(cmd, args[0], func(root bucketView) error {
				b := bucketAt(root, path)
				if b == nil {
					return errNotFound("bucket", path)
				}
				n := 0
				err := b.ForEach(func(k, v []byte, isBucket bool) error {
					if !strings.HasPrefix(string(k), string(pfx)) {
						return nil
					}
					if limit > 0 && n == limit {
						return errStop
					}
					n++
					return printEntry(out, nil, k, v, isBucket, values, f.format)
				})
				if errors.Is(err, errStop) {
					return nil
				}
				return err
			})
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringVar(&prefix, "prefix", "", "only keys that start with this (read with --parse-format)")
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most this many keys (0: all)")
	cmd.Flags().BoolVar(&values, "values", false, "print each key's value too")
	return cmd
}

// errStop ends a walk early without an error.
var errStop = errors.New("stop")

// printEntry prints one entry of a bucket at path: a key (and value), or a
// nested bucket.
func printEntry(w io.Writer, path [][]byte, k, v []byte, isBucket, withValue bool, format string) error {
	if format == fmtJSON {
		m := map[string]any{}
		if path != nil {
			names := make([]string, len(path))
			for i, p := range path {
				names[i] = formatBytes(p, fmtAuto)
			}
			m["bucket"] = names
		}
		jsonBytes(m, "key", k)
		if isBucket {
			m["is_bucket"] = true
		} else if withValue {
			jsonBytes(m, "value", v)
		}
		return writeJSON(w, m)
	}
	var err error
	switch {
	case isBucket:
		_, err = fmt.Fprintf(w, "%s (bucket)\n", formatBytes(k, format))
	case withValue:
		_, err = fmt.Fprintf(w, "%s = %s\n", formatBytes(k, format), formatBytes(v, format))
	default:
		_, err = fmt.Fprintln(w, formatBytes(k, format))
	}
	return err
}

func newGetCmd() *cobra.Command {
	var f readFlags
	cmd := &cobra.Command{
		Use:   "get FILE BUCKET... KEY",
		Short: "Print the value of a key",
		Long: `Prints the value of KEY in the bucket at BUCKET... (a path of nested
buckets). With --format auto (the default) a text value prints as it is and
anything else as 0x-prefixed hex; --format raw writes the value's bytes
unchanged (for redirecting into a file). Exits 1 when the bucket or key does
not exist. Reads rivet and bbolt files; opens FILE read-only and never
writes to it.`,
		Example: `  rivet get app.db users alice
  rivet get --format raw app.db blobs avatar.png > avatar.png
  rivet get --parse-format hex app.db 696e646578 0001`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := f.format == "raw"
			if raw {
				f.format = ""
			}
			if err := f.check(); err != nil {
				return err
			}
			parts, err := parseArgs(args[1:], f.parseFormat)
			if err != nil {
				return err
			}
			path, key := parts[:len(parts)-1], parts[len(parts)-1]
			return viewFile(cmd, args[0], func(root bucketView) error {
				b := bucketAt(root, path)
				if b == nil {
					return errNotFound("bucket", path)
				}
				if b.Bucket(key) != nil {
					return fmt.Errorf("%s is a bucket, not a key: list it with rivet keys", pathString(parts))
				}
				v := b.Get(key)
				if v == nil {
					return errNotFound("key", parts)
				}
				out := cmd.OutOrStdout()
				switch {
				case raw:
					_, err := out.Write(v)
					return err
				case f.format == fmtJSON:
					m := map[string]any{}
					jsonBytes(m, "key", key)
					jsonBytes(m, "value", v)
					return writeJSON(out, m)
				default:
					_, err := fmt.Fprintln(out, formatBytes(v, f.format))
					return err
				}
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringVar(&f.format, "format", fmtAuto, "how the value is printed: auto, ascii, hex, json, or raw (the bytes unchanged)")
	return cmd
}

func newDumpCmd() *cobra.Command {
	var f readFlags
	cmd := &cobra.Command{
		Use:   "dump FILE [BUCKET...]",
		Short: "Print every bucket, key and value of a file (or of one bucket tree)",
		Long: `Prints the whole file, or with BUCKET... the tree of that bucket: buckets
with their sequence numbers, then "key = value" lines, nested buckets
indented. --format json prints one JSON object per line instead: a bucket
as {"bucket": [path], "sequence": n}, an entry as {"bucket": [path],
"key": ..., "value": ...} (text as strings, anything else in _hex fields).
Reads rivet and bbolt files; opens FILE read-only and never writes to it.`,
		Example: `  rivet dump app.db
  rivet dump app.db users
  rivet dump --format json app.db > app.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			path, err := parseArgs(args[1:], f.parseFormat)
			if err != nil {
				return err
			}
			out := newLineWriter(cmd.OutOrStdout())
			defer out.Flush()
			return viewFile(cmd, args[0], func(root bucketView) error {
				b := bucketAt(root, path)
				if b == nil {
					return errNotFound("bucket", path)
				}
				return dumpBucket(out, b, path, len(path) > 0, f.format)
			})
		},
	}
	f.add(cmd, true)
	return cmd
}

// dumpBucket prints b (at path) and everything below it; header says
// whether b's own bucket line is printed (not for the file's root).
func dumpBucket(w io.Writer, b bucketView, path [][]byte, header bool, format string) error {
	depth := len(path)
	if header {
		if format == fmtJSON {
			names := make([]string, len(path))
			for i, p := range path {
				names[i] = formatBytes(p, fmtAuto)
			}
			if err := writeJSON(w, map[string]any{"bucket": names, "sequence": b.Sequence()}); err != nil {
				return err
			}
		} else if _, err := fmt.Fprintf(w, "%sbucket %s (sequence %d)\n", strings.Repeat("  ", depth-1), formatBytes(path[depth-1], format), b.Sequence()); err != nil {
			return err
		}
	}
	return b.ForEach(func(k, v []byte, isBucket bool) error {
		if isBucket {
			child := b.Bucket(k)
			if child == nil {
				return fmt.Errorf("bucket %s listed but cannot be opened", pathString(append(path[:depth:depth], k)))
			}
			return dumpBucket(w, child, append(path[:depth:depth], k), true, format)
		}
		if format == fmtJSON {
			return printEntry(w, path, k, v, false, true, format)
		}
		_, err := fmt.Fprintf(w, "%s%s = %s\n", strings.Repeat("  ", depth), formatBytes(k, format), formatBytes(v, format))
		return err
	})
}

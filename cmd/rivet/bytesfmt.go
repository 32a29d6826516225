package main

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// How keys and values are printed (--format) and how key and bucket
// arguments are read (--parse-format).
const (
	fmtAuto  = "auto"  // printable text as is, anything else as hex
	fmtASCII = "ascii" // text, with unprintable bytes escaped (\x00)
	fmtHex   = "hex"   // always hex
	fmtJSON  = "json"  // one JSON object per entry: text as a string, else hex
)

// byteFormats are the --format values; parseFormats the --parse-format ones.
var (
	byteFormats  = []string{fmtAuto, fmtASCII, fmtHex, fmtJSON}
	parseFormats = []string{fmtASCII, fmtHex}
)

// checkChoice returns a usage error unless v is one of choices.
func checkChoice(flag, v string, choices []string) error {
	for _, c := range choices {
		if v == c {
			return nil
		}
	}
	return usagef("--%s %q: want one of %v", flag, v, choices)
}

// isText reports whether b prints safely as it is: valid UTF-8 with no
// control characters, so that a key cannot move the cursor, clear the
// screen or break a line-per-key listing.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// formatBytes renders b for a terminal in format (auto, ascii or hex; json
// callers use jsonBytes). The hex of auto is marked "0x" so a reader can
// tell a hex-printed key from a text key made of hex digits.
func formatBytes(b []byte, format string) string {
	switch format {
	case fmtHex:
		return hex.EncodeToString(b)
	case fmtASCII:
		q := strconv.QuoteToASCII(string(b))
		return q[1 : len(q)-1]
	default:
		if isText(b) {
			return string(b)
		}
		return "0x" + hex.EncodeToString(b)
	}
}

// jsonBytes returns the JSON fields for b under name: {name: text} when b
// is text, else {name+"_hex": hex}, so JSON output is lossless.
func jsonBytes(m map[string]any, name string, b []byte) {
	if isText(b) {
		m[name] = string(b)
		return
	}
	m[name+"_hex"] = hex.EncodeToString(b)
}

// parseArg turns a command-line bucket name or key into bytes.
func parseArg(s, format string) ([]byte, error) {
	if format == fmtHex {
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, usagef("%q is not hex (--parse-format hex): %v", s, err)
		}
		return b, nil
	}
	return []byte(s), nil
}

// parseArgs parses every argument with parseArg.
func parseArgs(args []string, format string) ([][]byte, error) {
	out := make([][]byte, 0, len(args))
	for _, a := range args {
		b, err := parseArg(a, format)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// pathString renders a bucket path for messages: names joined by "/".
func pathString(path [][]byte) string {
	s := ""
	for i, p := range path {
		if i > 0 {
			s += "/"
		}
		s += formatBytes(p, fmtAuto)
	}
	if s == "" {
		return "(root)"
	}
	return s
}

// errNotFound reports a missing bucket or key: exit code 1.
func errNotFound(what string, path [][]byte) error {
	return fmt.Errorf("%s not found: %s", what, pathString(path))
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

// sizeString prints a byte count in binary units.
func sizeString(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// percent prints part as a share of whole ("12.5%"), or "-" when whole is
// not positive.
func percent(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

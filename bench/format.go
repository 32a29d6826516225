package bench

import (
	"math"
	"strconv"
	"time"

	"github.com/rivetkv/rivet/bytesize"
)

// Unit says how a figure's numbers are to be read and printed.
type Unit string

// Units of figures.
const (
	UnitDuration Unit = "ns"    // nanoseconds, printed as a duration
	UnitBytes    Unit = "bytes" // printed with binary prefixes
	UnitRate     Unit = "per_s" // events per second
	UnitCount    Unit = "count" // plain number, e.g. flushes per commit
)

// Format renders v in unit u for a table.
func (u Unit) Format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	switch u {
	case UnitDuration:
		return formatDuration(time.Duration(v))
	case UnitBytes:
		return formatBytes(v)
	case UnitRate:
		return formatSI(v) + "/s"
	case UnitCount:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

// formatDuration prints three significant digits in the largest unit that
// keeps the number >= 1, so columns of latencies compare at a glance
// (time.Duration's String prints "1.234567ms").
func formatDuration(d time.Duration) string {
	f := float64(d)
	switch {
	case f < 1e3:
		return strconv.FormatFloat(f, 'f', 0, 64) + "ns"
	case f < 1e6:
		return sig3(f/1e3) + "µs"
	case f < 1e9:
		return sig3(f/1e6) + "ms"
	default:
		return sig3(f/1e9) + "s"
	}
}

func formatBytes(v float64) string {
	const k = 1024
	switch a := math.Abs(v); {
	case a < k:
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	case a < k*k:
		return sig3(v/k) + " KiB"
	case a < k*k*k:
		return sig3(v/(k*k)) + " MiB"
	default:
		return sig3(v/(k*k*k)) + " GiB"
	}
}

func formatSI(v float64) string {
	switch a := math.Abs(v); {
	case a < 1e3:
		return sig3(v)
	case a < 1e6:
		return sig3(v/1e3) + "k"
	case a < 1e9:
		return sig3(v/1e6) + "M"
	default:
		return sig3(v/1e9) + "G"
	}
}

// sig3 prints v with three significant digits (no exponent).
func sig3(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// Size is a byte count that parses human suffixes ("256MiB", "1G",
// "4096"): the library's bytesize.Size, so the harness and rivet's tool
// take the same syntax.
type Size = bytesize.Size

// ParseSize parses a byte count with an optional unit suffix.
func ParseSize(s string) (Size, error) { return bytesize.Parse(s) }

// Package bytesize is a byte count that command lines write with units:
// "4096", "64MiB", "1.5G". rivet's tool and its benchmark harness take
// their size flags through it, so both accept the same syntax.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a byte count. It implements flag.Value and pflag.Value.
type Size int64

// suffixes are tried longest first; K, M, G and T are binary, as sizes of
// files and memory maps are.
var suffixes = []struct {
	s string
	m int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// Parse parses a byte count with an optional unit suffix (case does not
// matter): KiB, MiB, GiB, TiB and K, M, G, T are powers of 1024; KB, MB,
// GB, TB powers of 1000; B is bytes. The number may have a fraction.
func Parse(s string) (Size, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suf.s)), suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 4096, 2MiB, 1GiB)", s)
	}
	return Size(f * float64(mult)), nil
}

// String prints z in the largest binary unit that divides it ("64MiB"),
// else in bytes; Parse reads it back.
func (z Size) String() string {
	switch {
	case z != 0 && z%(1<<30) == 0:
		return strconv.FormatInt(int64(z>>30), 10) + "GiB"
	case z != 0 && z%(1<<20) == 0:
		return strconv.FormatInt(int64(z>>20), 10) + "MiB"
	case z != 0 && z%(1<<10) == 0:
		return strconv.FormatInt(int64(z>>10), 10) + "KiB"
	}
	return strconv.FormatInt(int64(z), 10)
}

// Set implements flag.Value: it parses s into z.
func (z *Size) Set(s string) error {
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*z = v
	return nil
}

// Type implements pflag.Value: the type name shown in cobra's help.
func (z *Size) Type() string { return "size" }

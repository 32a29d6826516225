package bytesize

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]Size{
		"4096": 4096, "2MiB": 2 << 20, "2mib": 2 << 20, "1GiB": 1 << 30, "1G": 1 << 30,
		"256M": 256 << 20, "1.5KiB": 1536, "10MB": 10_000_000, " 3 k ": 3072, "7B": 7,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "1XB", "abc", "1e30G"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) succeeded", in)
		}
	}
	var z Size
	if err := z.Set("256MiB"); err != nil || z.String() != "256MiB" {
		t.Errorf("Set/String round trip: %v, %q", err, z.String())
	}
}

package rivet

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsString: bbolt's fields keep bbolt's text, and rivet's own
// follow them.
func TestOptionsString(t *testing.T) {
	if got := (*Options)(nil).String(); got != "{}" {
		t.Errorf("nil Options: %q", got)
	}
	o := &Options{Timeout: time.Second, ReadOnly: true, PageSize: 8192, Durability: None, ConvertBbolt: true, LocalitySlack: 0.25}
	got := o.String()
	for _, want := range []string{"{Timeout: 1s, NoGrowSync: false", "ReadOnly: true", "PageSize: 8192", "NoStatistics: false, Durability: " + None.String(), "LocalitySlack: 0.25", "AutoCompact: <nil>", "ConvertBbolt: true}"} {
		if !strings.Contains(got, want) {
			t.Errorf("Options.String() = %q, missing %q", got, want)
		}
	}
}

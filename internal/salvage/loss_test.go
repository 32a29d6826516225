package salvage

import (
	"errors"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

// TestLossReason: a corruption's reason drops the page prefix the loss
// already carries; other errors keep their text; no error is "unreadable".
func TestLossReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{page.Corruptf(7, "checksum %08x, parent recorded %08x", 1, 2), "checksum 00000001, parent recorded 00000002"},
		{errors.New("read: EIO"), "read: EIO"},
		{nil, "unreadable"},
	} {
		if got := (Loss{Err: c.err}).Reason(); got != c.want {
			t.Errorf("Reason of %v = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestLossString: ranges, single keys and whole buckets, with names that
// need quoting.
func TestLossString(t *testing.T) {
	for _, c := range []struct {
		loss Loss
		want string
	}{
		{Loss{Bucket: [][]byte{[]byte("a"), []byte("b")}, From: []byte("k1"), To: []byte("k9"), Page: 12, Err: page.Corruptf(12, "bad")},
			`bucket a/b keys ["k1", "k9") (page 12: bad)`},
		{Loss{Bucket: [][]byte{[]byte("x/y")}, Page: 3}, `bucket "x/y" all keys (page 3: unreadable)`},
		{Loss{Key: []byte("v"), Page: 4, Err: errors.New("gone")}, `bucket (root) key "v" (page 4: gone)`},
		{Loss{Bucket: [][]byte{[]byte("b")}, To: []byte("m"), Page: 5}, `bucket b keys [first, "m") (page 5: unreadable)`},
	} {
		if got := c.loss.String(); got != c.want {
			t.Errorf("String() = %s, want %s", got, c.want)
		}
	}
}

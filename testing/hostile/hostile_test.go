package hostile

import (
	"math/rand"
	"testing"

	"github.com/rivetkv/rivet/internal/page"
)

func TestForgeCRC(t *testing.T) {
	rnd := rand.New(rand.NewSource(3))
	for i := 0; i < 20; i++ {
		b := make([]byte, 1024)
		rnd.Read(b)
		target := rnd.Uint32()
		ForgeCRC(b, page.BlobPayloadStart+i, target)
		if got := page.Checksum(b); got != target {
			t.Fatalf("forged CRC %08x, want %08x", got, target)
		}
	}
}

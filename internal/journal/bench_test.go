package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rivetkv/rivet/internal/vfs"
)

// BenchmarkAppend measures one record per Append followed by a
// Sync(SyncData), on the operating system's files in TMPDIR: the journal's
// share of a durable commit.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{200, 32 << 10} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			name := filepath.Join(b.TempDir(), "bench-journal")
			f, err := vfs.OS().OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			w, err := NewWriter(f, 1, 1, 0)
			if err != nil {
				b.Fatal(err)
			}
			rec := []Record{{Txid: 1, Payload: make([]byte, size)}}
			b.SetBytes(int64(RecordHeaderSize + size))
			for i := 0; b.Loop(); i++ {
				// Rewinding when the growth chunk is full keeps the file
				// at one chunk, as checkpoints would.
				if w.End()+int64(RecordHeaderSize+size) > DefaultGrowChunk {
					if err := w.Rewind(uint64(i) + 2); err != nil {
						b.Fatal(err)
					}
				}
				rec[0].Txid = uint64(i)
				if err := w.Append(rec); err != nil {
					b.Fatal(err)
				}
				if err := w.Sync(vfs.SyncData); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

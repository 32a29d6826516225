package journal_test

import (
	"fmt"
	"os"

	"github.com/rivetkv/rivet/internal/journal"
	"github.com/rivetkv/rivet/internal/vfs"
)

// Example writes a transaction's ops as one record, flushes the journal,
// and reads it back as recovery would.
func Example() {
	f, err := vfs.NewMem().OpenFile("db-journal", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()

	w, err := journal.NewWriter(f, 0x5eed, 1, 0)
	if err != nil {
		panic(err)
	}
	var payload []byte
	payload = journal.AppendOp(payload, &journal.Op{Kind: journal.OpCreateBucket, Key: []byte("users")})
	payload = journal.AppendOp(payload, &journal.Op{Kind: journal.OpPut, Path: [][]byte{[]byte("users")}, Key: []byte("ada"), Value: []byte("admin")})
	if err := w.Append([]journal.Record{{Txid: 42, Payload: payload}}); err != nil {
		panic(err)
	}
	if err := w.Sync(vfs.SyncData); err != nil {
		panic(err)
	}

	sum, err := journal.Read(f, 1<<20, func(r journal.Record) error {
		fmt.Printf("seq %d txid %d\n", r.Seq, r.Txid)
		return journal.DecodeOps(r.Payload, func(op *journal.Op) error {
			fmt.Printf("  %v %q %q %q\n", op.Kind, op.Path, op.Key, op.Value)
			return nil
		})
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(sum.Records, "record(s), stopped at:", sum.Stop)
	// Output:
	// seq 1 txid 42
	//   create-bucket [] "users" ""
	//   put ["users"] "ada" "admin"
	// 1 record(s), stopped at: bad magic
}

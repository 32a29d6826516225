package difftest

import (
	"fmt"
	"hash/crc32"
	"strings"
)

// kind is an API call the harness makes.
type kind uint8

// The calls. The comment names the op fields each one uses: T, B, B2 and C
// name the transaction, bucket and cursor handles by the ID of the call
// that made them (-1 for B or B2: nil, the top level); Key is a key or
// bucket name.
const (
	kBegin  kind = iota // Flag: writable
	kUpdate             // N: what the function does (fnKind)
	kView               // N: what the function does (fnKind)
	kReopen             // Flag: read-only; first tries the closed DB

	kTxBucket                  // T, Key
	kTxCreateBucket            // T, Key
	kTxCreateBucketIfNotExists // T, Key
	kTxDeleteBucket            // T, Key
	kTxMoveBucket              // T, Key, B (src), B2 (dst)
	kTxForEach                 // T, N: stop after N calls (0: never)
	kTxCursor                  // T
	kTxRoot                    // T: Tx.Cursor().Bucket(), the top level as a Bucket
	kTxCommit                  // T
	kTxRollback                // T
	kTxWritable                // T
	kTxOnCommit                // T

	kBucket                  // B, Key
	kCreateBucket            // B, Key
	kCreateBucketIfNotExists // B, Key
	kDeleteBucket            // B, Key
	kMoveBucket              // B, Key, B2 (dst)
	kGet                     // B, Key
	kPut                     // B, Key, Val
	kPutMany                 // B, N Puts (see putMany)
	kDelete                  // B, Key
	kSequence                // B
	kSetSequence             // B, N
	kNextSequence            // B
	kForEach                 // B, N: stop after N calls (0: never)
	kForEachBucket           // B, N: stop after N calls (0: never)
	kStats                   // B
	kCursor                  // B
	kWritable                // B

	kFirst        // C
	kLast         // C
	kNext         // C
	kPrev         // C
	kSeek         // C, Key
	kCursorDelete // C

	numKinds
)

var kindNames = [numKinds]string{
	"DB.Begin", "DB.Update", "DB.View", "Reopen",
	"Tx.Bucket", "Tx.CreateBucket", "Tx.CreateBucketIfNotExists", "Tx.DeleteBucket", "Tx.MoveBucket",
	"Tx.ForEach", "Tx.Cursor", "Tx.Cursor().Bucket", "Tx.Commit", "Tx.Rollback", "Tx.Writable", "Tx.OnCommit",
	"Bucket.Bucket", "Bucket.CreateBucket", "Bucket.CreateBucketIfNotExists", "Bucket.DeleteBucket",
	"Bucket.MoveBucket", "Bucket.Get", "Bucket.Put", "Bucket.Put×N", "Bucket.Delete", "Bucket.Sequence",
	"Bucket.SetSequence", "Bucket.NextSequence", "Bucket.ForEach", "Bucket.ForEachBucket",
	"Bucket.Stats", "Bucket.Cursor", "Bucket.Writable",
	"Cursor.First", "Cursor.Last", "Cursor.Next", "Cursor.Prev", "Cursor.Seek", "Cursor.Delete",
}

func (k kind) String() string { return kindNames[k] }

// Which handle list a call adds to.
func (k kind) makesTx() bool { return k == kBegin || k == kUpdate || k == kView }

func (k kind) makesBucket() bool {
	switch k {
	case kTxBucket, kTxCreateBucket, kTxCreateBucketIfNotExists, kTxRoot,
		kBucket, kCreateBucket, kCreateBucketIfNotExists:
		return true
	}
	return false
}

func (k kind) makesCursor() bool { return k == kTxCursor || k == kCursor }

func (k kind) onTx() bool     { return k >= kTxBucket && k <= kTxOnCommit }
func (k kind) onBucket() bool { return k >= kBucket && k <= kWritable }
func (k kind) onCursor() bool { return k >= kFirst && k <= kCursorDelete }

// fnKind is what the function passed to Update or View does.
type fnKind uint64

const (
	fnWrite    fnKind = iota // Update: create bucket "a" if need be, put a key; View: read it
	fnError                  // return errFn after writing
	fnCommit                 // call tx.Commit inside (bbolt panics: managed)
	fnRollback               // call tx.Rollback inside (bbolt panics: managed)
	fnPanic                  // panic
	numFnKinds
)

var fnNames = [numFnKinds]string{"write", "error", "commit", "rollback", "panic"}

// op is one call with its arguments. Handles are named by the ID of the
// call that made them, so a trace with calls removed (shrinking) still
// means the same handles.
type op struct {
	ID    int
	Kind  kind
	T     int
	B, B2 int
	C     int
	Key   []byte
	Val   []byte
	N     uint64
	Flag  bool
}

func (o op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", o.ID)
	b.WriteString(o.Kind.String())
	b.WriteString("(")
	var args []string
	switch {
	case o.Kind.onTx():
		args = append(args, fmt.Sprintf("tx%d", o.T))
	case o.Kind.onBucket():
		args = append(args, fmt.Sprintf("b%d", o.B))
	case o.Kind.onCursor():
		args = append(args, fmt.Sprintf("c%d", o.C))
	}
	switch o.Kind {
	case kBegin:
		args = append(args, fmt.Sprintf("writable=%t", o.Flag))
	case kUpdate, kView:
		args = append(args, fnNames[o.N])
	case kReopen:
		args = append(args, fmt.Sprintf("readOnly=%t", o.Flag))
	case kTxBucket, kTxCreateBucket, kTxCreateBucketIfNotExists, kTxDeleteBucket,
		kBucket, kCreateBucket, kCreateBucketIfNotExists, kDeleteBucket, kGet, kDelete, kSeek:
		args = append(args, show(o.Key))
	case kTxMoveBucket:
		args = append(args, show(o.Key), handle("b", o.B), handle("b", o.B2))
	case kMoveBucket:
		args = append(args, show(o.Key), handle("b", o.B2))
	case kPut:
		args = append(args, show(o.Key), show(o.Val))
	case kPutMany:
		args = append(args, fmt.Sprintf("n=%d, from=%d, inOrder=%t, values of %s", o.N, o.Key[0], o.Flag, show(o.Val)))
	case kSetSequence:
		args = append(args, fmt.Sprint(o.N))
	case kTxForEach, kForEach, kForEachBucket:
		args = append(args, fmt.Sprintf("stopAfter=%d", o.N))
	}
	b.WriteString(strings.Join(args, ", "))
	b.WriteString(")")
	return b.String()
}

func handle(prefix string, i int) string {
	if i < 0 {
		return "nil"
	}
	return fmt.Sprintf("%s%d", prefix, i)
}

// show renders a key or value: nil, or quoted, or its length and CRC when
// long (a 32 KiB key would drown a trace).
func show(b []byte) string {
	if b == nil {
		return "nil"
	}
	if len(b) > 40 {
		if len(b) > 1<<30 {
			// Longer than MaxValueSize: a reservation never read (see
			// hugeValue); its bytes are not summed.
			return fmt.Sprintf("<%d bytes>", len(b))
		}
		return fmt.Sprintf("<%d bytes crc %08x>", len(b), crc32.ChecksumIEEE(b))
	}
	return fmt.Sprintf("%q", b)
}

package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// cloneOp deep-copies op, keeping nil apart from empty.
func cloneOp(op *Op) Op {
	c := *op
	c.Path = clonePath(op.Path)
	c.Dest = clonePath(op.Dest)
	c.Key = cloneBytes(op.Key)
	c.Value = cloneBytes(op.Value)
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func clonePath(p [][]byte) [][]byte {
	if len(p) == 0 {
		return nil
	}
	out := make([][]byte, len(p))
	for i, name := range p {
		out[i] = cloneBytes(name)
	}
	return out
}

// sameBytes is bytes.Equal that also tells nil from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func samePath(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameBytes(a[i], b[i]) {
			return false
		}
	}
	return true
}

// normalize zeroes the fields op's kind does not use: they are not encoded.
func normalize(op Op) Op {
	out := Op{Kind: op.Kind, Path: op.Path}
	switch op.Kind {
	case OpPut:
		out.Key, out.Value = op.Key, op.Value
	case OpDelete, OpCreateBucket, OpDeleteBucket:
		out.Key = op.Key
	case OpMoveBucket:
		out.Key, out.Dest = op.Key, op.Dest
	case OpSetSequence:
		out.Seq = op.Seq
	}
	if len(out.Path) == 0 {
		out.Path = nil
	}
	if len(out.Dest) == 0 {
		out.Dest = nil
	}
	return out
}

func sameOp(a, b Op) bool {
	return a.Kind == b.Kind && samePath(a.Path, b.Path) && sameBytes(a.Key, b.Key) &&
		sameBytes(a.Value, b.Value) && samePath(a.Dest, b.Dest) && a.Seq == b.Seq
}

func describeOp(op Op) string {
	return fmt.Sprintf("%v path=%q key=%q(nil %v) value=%q(nil %v) dest=%q seq=%d",
		op.Kind, op.Path, op.Key, op.Key == nil, op.Value, op.Value == nil, op.Dest, op.Seq)
}

func encodeOps(ops []Op) []byte {
	var b []byte
	for i := range ops {
		b = AppendOp(b, &ops[i])
	}
	return b
}

func decodeAll(payload []byte) ([]Op, error) {
	var out []Op
	err := DecodeOps(payload, func(op *Op) error {
		out = append(out, cloneOp(op))
		return nil
	})
	return out, err
}

// checkRoundTrip fails unless ops decode from their encoding exactly
// (fields a kind does not use aside).
func checkRoundTrip(t *testing.T, ops []Op) {
	t.Helper()
	payload := encodeOps(ops)
	got, err := decodeAll(payload)
	if err != nil {
		t.Fatalf("DecodeOps of a valid encoding: %v", err)
	}
	if len(got) != len(ops) {
		t.Fatalf("decoded %d ops, encoded %d", len(got), len(ops))
	}
	for i := range ops {
		if want := normalize(ops[i]); !sameOp(got[i], want) {
			t.Fatalf("op %d:\n got %s\nwant %s", i, describeOp(got[i]), describeOp(want))
		}
	}
	if again := encodeOps(got); !bytes.Equal(again, payload) {
		t.Fatalf("re-encoding the decoded ops gives other bytes")
	}
}

func TestOpsRoundTrip(t *testing.T) {
	empty := []byte{}
	ops := []Op{
		{Kind: OpPut, Key: []byte("k"), Value: []byte("v")},
		{Kind: OpPut, Path: [][]byte{[]byte("a"), []byte("b")}, Key: empty, Value: empty},
		{Kind: OpPut, Path: [][]byte{[]byte("a")}, Key: nil, Value: nil},
		{Kind: OpPut, Path: [][]byte{empty, nil}, Key: []byte("k"), Value: nil},
		{Kind: OpDelete, Path: [][]byte{[]byte("a")}, Key: []byte("k")},
		{Kind: OpDelete, Key: empty},
		{Kind: OpCreateBucket, Key: []byte("top")},
		{Kind: OpCreateBucket, Path: [][]byte{[]byte("top")}, Key: []byte("child")},
		{Kind: OpDeleteBucket, Path: [][]byte{[]byte("top")}, Key: []byte("child")},
		{Kind: OpMoveBucket, Path: [][]byte{[]byte("x")}, Key: []byte("b"), Dest: [][]byte{[]byte("y"), []byte("z")}},
		{Kind: OpMoveBucket, Key: []byte("b"), Dest: nil},
		{Kind: OpSetSequence, Path: [][]byte{[]byte("s")}, Seq: 0},
		{Kind: OpSetSequence, Path: [][]byte{[]byte("s")}, Seq: 1<<64 - 1},
		{Kind: OpNotLogged},
		// Fields a kind does not use are not encoded.
		{Kind: OpDelete, Key: []byte("k"), Value: []byte("ignored"), Seq: 9, Dest: [][]byte{[]byte("d")}},
	}
	checkRoundTrip(t, ops)
	for i := range ops {
		checkRoundTrip(t, ops[i:i+1])
	}
	checkRoundTrip(t, nil)
}

// randOp returns a random op, its byte strings sometimes nil, sometimes
// empty.
func randOp(rng *rand.Rand) Op {
	str := func() []byte {
		switch rng.IntN(8) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(200)+1)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	path := func() [][]byte {
		p := make([][]byte, rng.IntN(4))
		for i := range p {
			p[i] = str()
		}
		return p
	}
	op := Op{Kind: OpKind(1 + rng.IntN(6)), Path: path(), Key: str(), Value: str(), Dest: path()}
	switch rng.IntN(3) {
	case 0:
		op.Seq = rng.Uint64()
	case 1:
		op.Seq = uint64(rng.IntN(300))
	}
	return op
}

func TestOpsRandomRoundTrip(t *testing.T) {
	rng := testRand(t)
	for range 2000 {
		ops := make([]Op, rng.IntN(10))
		for i := range ops {
			ops[i] = randOp(rng)
		}
		checkRoundTrip(t, ops)
	}
}

func TestDecodeOpsCorrupt(t *testing.T) {
	valid := AppendOp(nil, &Op{Kind: OpPut, Path: [][]byte{[]byte("b")}, Key: []byte("key"), Value: []byte("value")})
	cases := map[string][]byte{
		"unknown kind":          {8},
		"zero kind":             {0},
		"truncated path count":  {byte(OpPut)},
		"truncated varint":      {byte(OpPut), 0x80},
		"varint overflow":       append([]byte{byte(OpSetSequence), 0}, bytes.Repeat([]byte{0xff}, 10)...),
		"non-minimal varint":    {byte(OpDelete), 0x80, 0x00, 0},
		"huge path count":       {byte(OpDelete), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"path count too large":  {byte(OpDelete), 3, 0, 0},
		"string past the end":   {byte(OpDelete), 0, 5, 'a', 'b'},
		"huge string":           {byte(OpDelete), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"missing value":         {byte(OpPut), 0, 1},
		"missing seq":           {byte(OpSetSequence), 0},
		"missing dest":          {byte(OpMoveBucket), 0, 2, 'b'},
		"valid then truncated":  append(bytes.Clone(valid), valid[:len(valid)-1]...),
		"valid then bad kind":   append(bytes.Clone(valid), 200),
		"truncated valid":       valid[:len(valid)-1],
		"string cut in the key": valid[:5],
	}
	for name, payload := range cases {
		calls := 0
		err := DecodeOps(payload, func(*Op) error { calls++; return nil })
		if !errors.Is(err, rerrors.ErrCorrupt) {
			t.Errorf("%s: DecodeOps = %v, want an ErrCorrupt", name, err)
		}
		if name == "valid then truncated" || name == "valid then bad kind" {
			if calls != 1 {
				t.Errorf("%s: fn called %d times before the bad op, want 1", name, calls)
			}
		}
	}
}

func TestDecodeOpsCallbackError(t *testing.T) {
	payload := encodeOps([]Op{{Kind: OpDelete, Key: []byte("a")}, {Kind: OpDelete, Key: []byte("b")}})
	stop := errors.New("stop")
	calls := 0
	err := DecodeOps(payload, func(*Op) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("DecodeOps = %v after %d calls, want fn's error after 1", err, calls)
	}
}

// TestDecodeOpsAliasing checks that decoded byte strings alias the payload
// without spare capacity, so that appending to one cannot change the next.
func TestDecodeOpsAliasing(t *testing.T) {
	payload := encodeOps([]Op{{Kind: OpPut, Key: []byte("k"), Value: []byte("v")}, {Kind: OpDelete, Key: []byte("x")}})
	orig := bytes.Clone(payload)
	err := DecodeOps(payload, func(op *Op) error {
		if cap(op.Key) != len(op.Key) {
			t.Fatalf("key has spare capacity %d > %d", cap(op.Key), len(op.Key))
		}
		_ = append(op.Key, 'Z')
		return nil
	})
	if err != nil || !bytes.Equal(payload, orig) {
		t.Fatalf("DecodeOps: %v; payload changed: %v", err, !bytes.Equal(payload, orig))
	}
}

func TestAppendOpUnknownKindPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("AppendOp of an unknown kind did not panic")
		}
	}()
	AppendOp(nil, &Op{Kind: 42})
}

func TestDecodeBatch(t *testing.T) {
	ops := AppendOp(nil, &Op{Kind: OpPut, Key: []byte("k"), Value: []byte("v")})
	batch := AppendEntry(AppendEntry(nil, 5, ops), 9, nil)
	var txids []uint64
	if err := DecodeBatch(batch, func(txid uint64, got []byte) error {
		txids = append(txids, txid)
		if txid == 5 && !bytes.Equal(got, ops) {
			t.Errorf("entry 5: ops %x, want %x", got, ops)
		}
		return nil
	}); err != nil || len(txids) != 2 || txids[0] != 5 || txids[1] != 9 {
		t.Fatalf("DecodeBatch: %v, txids %v", err, txids)
	}
	for name, bad := range map[string][]byte{
		"out of order":  AppendEntry(AppendEntry(nil, 9, nil), 5, nil),
		"repeated txid": AppendEntry(AppendEntry(nil, 9, nil), 9, nil),
		"truncated ops": AppendEntry(nil, 5, ops)[:3],
		"no ops field":  {5},
	} {
		if err := DecodeBatch(bad, func(uint64, []byte) error { return nil }); !errors.Is(err, rerrors.ErrCorrupt) {
			t.Errorf("%s: DecodeBatch = %v, want ErrCorrupt", name, err)
		}
	}
}

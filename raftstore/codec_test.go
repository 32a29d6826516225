package raftstore

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// goMsgpackEncode encodes as raft-boltdb v2 does.
func goMsgpackEncode(t testing.TB, l *raft.Log, newTime bool) []byte {
	t.Helper()
	var out []byte
	var h codec.MsgpackHandle
	h.TimeNotBuiltin = !newTime
	if err := codec.NewEncoderBytes(&out, &h).Encode(l); err != nil {
		t.Fatal(err)
	}
	return out
}

// goMsgpackDecode decodes as raft-boltdb v2 does.
func goMsgpackDecode(val []byte, l *raft.Log) error {
	var h codec.MsgpackHandle
	return codec.NewDecoderBytes(val, &h).Decode(l)
}

// codecEdgeBytes returns byte slices around the raw-string size classes.
func codecEdgeBytes(rng *rand.Rand) []byte {
	sizes := []int{-1, 0, 1, 31, 32, 33, 255, 256, 65535, 65536, 70000}
	n := sizes[rng.IntN(len(sizes))]
	if n < 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// codecEdgeUint returns integers around the msgpack integer size classes.
func codecEdgeUint(rng *rand.Rand) uint64 {
	edges := []uint64{0, 1, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0xffffffff, 0x100000000, 1<<63 + 5, ^uint64(0)}
	if rng.IntN(4) == 0 {
		return rng.Uint64() >> rng.IntN(64)
	}
	return edges[rng.IntN(len(edges))]
}

// codecEdgeTime returns times in the forms both time encodings
// distinguish: zero, UTC, fixed zones (whole minutes and not), Local,
// before 1970 and past 2514 (the 12-byte timestamp).
func codecEdgeTime(rng *rand.Rand) time.Time {
	switch rng.IntN(7) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9)).UTC()
	case 2:
		return time.Unix(rng.Int64N(1<<34), 0).In(time.FixedZone("p", 3600*rng.IntN(14)))
	case 3:
		return time.Unix(1_700_000_000, rng.Int64N(1e9)).In(time.FixedZone("s", -3600*5-1800-17))
	case 4:
		return time.Unix(1_700_000_000+rng.Int64N(1e6), rng.Int64N(1e9)).Local()
	case 5:
		return time.Unix(-rng.Int64N(1<<40), rng.Int64N(1e9)).UTC()
	default:
		return time.Unix(1<<35+rng.Int64N(1<<40), rng.Int64N(1e9)).UTC()
	}
}

func randomLog(rng *rand.Rand) *raft.Log {
	return &raft.Log{
		Index:      codecEdgeUint(rng),
		Term:       codecEdgeUint(rng),
		Type:       raft.LogType(rng.IntN(256)),
		Data:       codecEdgeBytes(rng),
		Extensions: codecEdgeBytes(rng),
		AppendedAt: codecEdgeTime(rng),
	}
}

// TestCodecMatchesGoMsgpack: appendLog writes exactly go-msgpack's bytes
// (both time formats), within encodedBound, and decodeLog (fast path)
// reads them back as go-msgpack does.
func TestCodecMatchesGoMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const cases = 1500
	fast := 0
	for i := range cases {
		l := randomLog(rng)
		for _, newTime := range []bool{false, true} {
			want := goMsgpackEncode(t, l, newTime)
			got, err := appendLog([]byte("prefix"), l, newTime)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[6:], want) {
				t.Fatalf("case %d newTime=%v: %+v\n got %s\nwant %s", i, newTime, l, hex.EncodeToString(got[6:]), hex.EncodeToString(want))
			}
			if len(want) > encodedBound(l) {
				t.Fatalf("case %d: %d bytes > bound %d", i, len(want), encodedBound(l))
			}
			var viaUs, viaThem raft.Log
			if fastDecodeLog(want, &viaUs) {
				fast++
			} else if err := decodeLog(want, &viaUs); err != nil {
				t.Fatal(err)
			}
			if err := goMsgpackDecode(want, &viaThem); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(viaUs, viaThem) {
				t.Fatalf("case %d newTime=%v: decoded\n%#v\nwant\n%#v", i, newTime, viaUs, viaThem)
			}
		}
	}
	// Every old-format entry takes the fast path (half the encodings).
	if fast < cases {
		t.Fatalf("fast path decoded %d of %d encodings, want >= %d", fast, 2*cases, cases)
	}
}

// TestDecodeOtherShapes: encodings appendLog never writes (fewer fields,
// other integer and map forms, a key raft.Log lacks) decode as go-msgpack
// decodes them, into a Log that already holds values (absent fields keep
// theirs).
func TestDecodeOtherShapes(t *testing.T) {
	type oldLog struct { // raft before Extensions and AppendedAt
		Index uint64
		Term  uint64
		Type  raft.LogType
		Data  []byte
	}
	type extraLog struct {
		Index uint64
		Data  []byte
		Extra string
	}
	type signedLog struct {
		Index int64
		Term  int32
		Type  int8
	}
	var encs [][]byte
	for _, v := range []any{
		oldLog{Index: 7, Term: 2, Type: raft.LogNoop, Data: []byte("old")},
		oldLog{Index: 1 << 40, Data: []byte{}},
		extraLog{Index: 3, Data: []byte("x"), Extra: "ignored"},
		signedLog{Index: 300, Term: 1, Type: 2},
		map[string]any{"Index": uint64(9), "Data": "str"},
	} {
		var out []byte
		var h codec.MsgpackHandle
		h.WriteExt = true // bin and str8 forms too
		if err := codec.NewEncoderBytes(&out, &h).Encode(v); err != nil {
			t.Fatal(err)
		}
		encs = append(encs, out)
	}
	for i, enc := range encs {
		prior := raft.Log{Index: 100, Term: 100, Type: raft.LogBarrier, Data: []byte("prior"), Extensions: []byte("ext"), AppendedAt: time.Unix(5, 0).UTC()}
		viaUs, viaThem := prior, prior
		viaThem.Data = bytes.Clone(prior.Data)
		errUs := decodeLog(enc, &viaUs)
		errThem := goMsgpackDecode(enc, &viaThem)
		if (errUs == nil) != (errThem == nil) {
			t.Fatalf("case %d: error %v, go-msgpack's %v", i, errUs, errThem)
		}
		if errUs == nil && !reflect.DeepEqual(viaUs, viaThem) {
			t.Fatalf("case %d (%x): decoded\n%#v\nwant\n%#v", i, enc, viaUs, viaThem)
		}
	}
}

// TestDecodeDamaged: truncated and bit-flipped encodings never panic, and
// the fast path never accepts a truncated one.
func TestDecodeDamaged(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		l := randomLog(rng)
		l.Data = l.Data[:min(len(l.Data), 40)]
		l.Extensions = l.Extensions[:min(len(l.Extensions), 40)]
		enc, err := appendLog(nil, l, rng.IntN(2) == 0)
		if err != nil {
			t.Fatal(err)
		}
		for cut := range len(enc) {
			var out raft.Log
			if fastDecodeLog(enc[:cut], &out) {
				t.Fatalf("fast path accepted %d of %d bytes", cut, len(enc))
			}
			_ = decodeLog(enc[:cut], &out)
		}
		for range 20 {
			d := bytes.Clone(enc)
			d[rng.IntN(len(d))] ^= byte(1 << rng.IntN(8))
			var out raft.Log
			_ = decodeLog(d, &out)
		}
	}
}

// FuzzDecodeLog: any bytes decode to a Log or an error, never a panic.
func FuzzDecodeLog(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		enc, err := appendLog(nil, randomLog(rng), rng.IntN(2) == 0)
		if err != nil {
			f.Fatal(err)
		}
		if len(enc) < 4096 {
			f.Add(enc)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		_ = decodeLog(b, &l)
	})
}

package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// A log entry is stored as the MessagePack encoding that raft-boltdb v2
// writes with github.com/hashicorp/go-msgpack/v2 (a MsgpackHandle without
// WriteExt): a fixmap of the six fields of raft.Log in name order, each
// byte slice as a legacy raw string (nil as msgpack nil), each integer in
// its shortest unsigned form, and AppendedAt either as the string of
// time.Time.MarshalBinary (go-msgpack's TimeNotBuiltin, raft-boltdb's
// default) or as the 4, 8 or 12 bytes of the msgpack timestamp in a raw
// string (MsgpackUseNewTimeFormat), nil for the zero time.
//
// appendLog produces those bytes itself instead of going through
// go-msgpack's reflection (one allocation per batch instead of several per
// entry); TestCodecMatchesGoMsgpack checks it byte for byte against
// go-msgpack. decodeLog parses the same shape and hands anything else
// (older raft versions' fewer fields, other integer or map forms, the new
// time format) to go-msgpack itself, so every value raft-boltdb can read,
// raftstore reads the same way.

// Field names, as go-msgpack writes them (struct field names, sorted).
const (
	fieldAppendedAt = "AppendedAt"
	fieldData       = "Data"
	fieldExtensions = "Extensions"
	fieldIndex      = "Index"
	fieldTerm       = "Term"
	fieldType       = "Type"
)

// MessagePack format bytes used here.
const (
	mpFixMap6   = 0x86
	mpFixStrMin = 0xa0
	mpFixStrMax = 0xbf
	mpNil       = 0xc0
	mpUint8     = 0xcc
	mpUint16    = 0xcd
	mpUint32    = 0xce
	mpUint64    = 0xcf
	mpRaw16     = 0xda // str16: go-msgpack's legacy raw string, 32..65535 bytes
	mpRaw32     = 0xdb // str32: longer
)

// maxFixedOverhead bounds the encoding of a log beyond its Data and
// Extensions bytes: the map header, the six names with their headers
// (43 bytes), a time of at most 16 bytes with its header, two raw-string
// headers of at most 5 bytes, and three integers of at most 9 bytes.
const maxFixedOverhead = 1 + 43 + 17 + 5 + 5 + 9 + 9 + 9

// encodedBound returns an upper bound of the encoded size of l.
func encodedBound(l *raft.Log) int {
	return maxFixedOverhead + len(l.Data) + len(l.Extensions)
}

// errTimeEncoding reports an AppendedAt that time.Time.MarshalBinary
// refuses (a zone offset outside what it can represent). go-msgpack would
// silently write nothing for the field and produce an unreadable entry.
var errTimeEncoding = errors.New("raftstore: cannot encode AppendedAt")

// appendLog appends the encoding of l to dst.
func appendLog(dst []byte, l *raft.Log, newTimeFormat bool) ([]byte, error) {
	dst = append(dst, mpFixMap6)
	dst = appendName(dst, fieldAppendedAt)
	var err error
	if dst, err = appendTime(dst, l.AppendedAt, newTimeFormat); err != nil {
		return nil, err
	}
	dst = appendName(dst, fieldData)
	dst = appendRaw(dst, l.Data)
	dst = appendName(dst, fieldExtensions)
	dst = appendRaw(dst, l.Extensions)
	dst = appendName(dst, fieldIndex)
	dst = appendUint(dst, l.Index)
	dst = appendName(dst, fieldTerm)
	dst = appendUint(dst, l.Term)
	dst = appendName(dst, fieldType)
	dst = appendUint(dst, uint64(l.Type))
	return dst, nil
}

// appendName appends a field name (always shorter than 32 bytes).
func appendName(dst []byte, name string) []byte {
	dst = append(dst, mpFixStrMin|byte(len(name)))
	return append(dst, name...)
}

// appendRaw appends b as a legacy raw string, nil as msgpack nil.
func appendRaw(dst, b []byte) []byte {
	if b == nil {
		return append(dst, mpNil)
	}
	switch n := len(b); {
	case n < 32:
		dst = append(dst, mpFixStrMin|byte(n))
	case n < 1<<16:
		dst = append(dst, mpRaw16)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, mpRaw32)
		dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return append(dst, b...)
}

// appendUint appends v in its shortest unsigned form.
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= 0xff:
		return append(dst, mpUint8, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, mpUint16), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, mpUint32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(dst, mpUint64), v)
	}
}

// appendTime appends t as go-msgpack does without WriteExt.
func appendTime(dst []byte, t time.Time, newFormat bool) ([]byte, error) {
	if !newFormat {
		// A raw string holding MarshalBinary's 15 or 16 bytes; the header
		// is written first and patched once the length is known.
		at := len(dst)
		dst = append(dst, mpFixStrMin)
		out, err := t.AppendBinary(dst)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errTimeEncoding, err)
		}
		n := len(out) - at - 1
		if n >= 32 {
			return nil, errTimeEncoding
		}
		out[at] = mpFixStrMin | byte(n)
		return out, nil
	}
	if t.IsZero() {
		return append(dst, mpNil), nil
	}
	t = t.UTC()
	sec, nsec := t.Unix(), uint64(t.Nanosecond())
	if sec >= 0 && sec>>34 == 0 {
		data := nsec<<34 | uint64(sec)
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(dst, mpFixStrMin|4), uint32(data)), nil
		}
		return binary.BigEndian.AppendUint64(append(dst, mpFixStrMin|8), data), nil
	}
	dst = binary.BigEndian.AppendUint32(append(dst, mpFixStrMin|12), uint32(nsec))
	return binary.BigEndian.AppendUint64(dst, uint64(sec)), nil
}

// decodeHandle is go-msgpack's handle for the entries the fast path does
// not take; raft-boltdb decodes with a zero MsgpackHandle, and so does this
// (a handle is safe for concurrent use once configured; this one never is).
var decodeHandle codec.MsgpackHandle

// decodeLog decodes an entry into l: fields absent from the encoding keep
// l's values, as with go-msgpack. Byte slices are copied (val may be
// memory of the database's map).
func decodeLog(val []byte, l *raft.Log) error {
	if fastDecodeLog(val, l) {
		return nil
	}
	if err := codec.NewDecoderBytes(val, &decodeHandle).Decode(l); err != nil {
		return fmt.Errorf("raftstore: decoding log entry: %w", err)
	}
	return nil
}

// fastDecodeLog decodes the shape appendLog writes (any subset of the six
// fields, in any order, the old time format) and reports whether it did;
// on false l is unchanged. It never reads past val.
func fastDecodeLog(val []byte, l *raft.Log) bool {
	if len(val) == 0 || val[0]&0xf0 != 0x80 {
		return false
	}
	n := int(val[0] & 0x0f)
	p := 1
	out := *l
	var data, ext []byte
	var haveData, haveExt bool
	for range n {
		name, q, ok := readFixStr(val, p)
		if !ok {
			return false
		}
		p = q
		switch string(name) {
		case fieldIndex, fieldTerm, fieldType:
			v, q, ok := readUint(val, p)
			if !ok {
				return false
			}
			p = q
			switch string(name) {
			case fieldIndex:
				out.Index = v
			case fieldTerm:
				out.Term = v
			default:
				if v > 0xff {
					return false
				}
				out.Type = raft.LogType(v)
			}
		case fieldData, fieldExtensions:
			b, isNil, q, ok := readRaw(val, p)
			if !ok {
				return false
			}
			p = q
			if isNil {
				b = nil
			}
			if string(name) == fieldData {
				data, haveData = b, true
			} else {
				ext, haveExt = b, true
			}
		case fieldAppendedAt:
			if p >= len(val) {
				return false
			}
			if val[p] == mpNil {
				out.AppendedAt = time.Time{}
				p++
				continue
			}
			b, q, ok := readFixStr(val, p)
			if !ok {
				return false
			}
			var t time.Time
			if t.UnmarshalBinary(b) != nil {
				return false
			}
			p = q
			out.AppendedAt = t
		default:
			return false
		}
	}
	// Copy Data and Extensions out of val in one allocation.
	if haveData || haveExt {
		buf := make([]byte, len(data)+len(ext))
		if haveData {
			out.Data = copySlice(buf[:len(data):len(data)], data)
		}
		if haveExt {
			out.Extensions = copySlice(buf[len(data):], ext)
		}
	}
	*l = out
	return true
}

// copySlice copies src into dst (of the same length) and returns dst, or
// nil for a nil src, keeping go-msgpack's nil-versus-empty distinction.
func copySlice(dst, src []byte) []byte {
	if src == nil {
		return nil
	}
	copy(dst, src)
	return dst
}

// readFixStr reads a fixstr at p.
func readFixStr(val []byte, p int) ([]byte, int, bool) {
	if p >= len(val) || val[p] < mpFixStrMin || val[p] > mpFixStrMax {
		return nil, 0, false
	}
	end := p + 1 + int(val[p]&0x1f)
	if end > len(val) {
		return nil, 0, false
	}
	return val[p+1 : end], end, true
}

// readRaw reads a raw string (fixstr, str16, str32) or nil at p; an empty
// string reads as a non-nil empty slice.
func readRaw(val []byte, p int) (b []byte, isNil bool, next int, ok bool) {
	if p >= len(val) {
		return nil, false, 0, false
	}
	var n, start int
	switch c := val[p]; {
	case c == mpNil:
		return nil, true, p + 1, true
	case c >= mpFixStrMin && c <= mpFixStrMax:
		n, start = int(c&0x1f), p+1
	case c == mpRaw16 && p+3 <= len(val):
		n, start = int(binary.BigEndian.Uint16(val[p+1:])), p+3
	case c == mpRaw32 && p+5 <= len(val):
		n, start = int(binary.BigEndian.Uint32(val[p+1:])), p+5
	default:
		return nil, false, 0, false
	}
	if n > len(val)-start {
		return nil, false, 0, false
	}
	return val[start : start+n : start+n], false, start + n, true
}

// readUint reads a non-negative integer in any of msgpack's unsigned forms.
func readUint(val []byte, p int) (uint64, int, bool) {
	if p >= len(val) {
		return 0, 0, false
	}
	c := val[p]
	var size int
	switch c {
	case mpUint8:
		size = 1
	case mpUint16:
		size = 2
	case mpUint32:
		size = 4
	case mpUint64:
		size = 8
	default:
		if c <= 0x7f {
			return uint64(c), p + 1, true
		}
		return 0, 0, false
	}
	if p+1+size > len(val) {
		return 0, 0, false
	}
	b := val[p+1 : p+1+size]
	switch size {
	case 1:
		return uint64(b[0]), p + 1 + size, true
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), p + 1 + size, true
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), p + 1 + size, true
	default:
		return binary.BigEndian.Uint64(b), p + 1 + size, true
	}
}

package journal

import (
	"encoding/binary"
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
)

// A journal write holds the records of the commits that share its flush in
// one Record, whose payload is a batch: for each commit, in txid order, a
// uvarint txid, then its ops (AppendOp) as a byte string. One Record, one
// checksum: a write that fails part way leaves no valid part of the batch,
// so commits that were told their write failed cannot come back after a
// crash, whichever of them the torn bytes hold.

// AppendEntry appends one commit's entry to a batch payload.
func AppendEntry(dst []byte, txid uint64, ops []byte) []byte {
	dst = binary.AppendUvarint(dst, txid)
	return appendBytes(dst, ops)
}

// DecodeBatch calls fn for each entry of a batch payload, in order, and
// returns fn's first error as is. ops aliases payload. Entries must be in
// strictly increasing txid order. Malformed input returns an error matching
// rerrors.ErrCorrupt; DecodeBatch never panics on it and allocates nothing.
func DecodeBatch(payload []byte, fn func(txid uint64, ops []byte) error) error {
	d := opDecoder{b: payload}
	var prev uint64
	for n := 0; d.pos < len(d.b); n++ {
		start := d.pos
		txid := d.uvarint()
		ops := d.bytes()
		if d.err == "" && n > 0 && txid <= prev {
			d.err = fmt.Sprintf("transaction %d after %d", txid, prev)
		}
		if d.err != "" {
			return fmt.Errorf("journal: batch entry at payload offset %d: %s: %w", start, d.err, rerrors.ErrCorrupt)
		}
		if err := fn(txid, ops); err != nil {
			return err
		}
		prev = txid
	}
	return nil
}

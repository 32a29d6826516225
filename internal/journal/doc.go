// Package journal is rivet's commit journal: a file of records, each
// holding one committed transaction's logical changes, appended and flushed
// on the commit path so that the main file need not be flushed there.
//
// The journal is a redo log. A durable commit writes its pages to the main
// file without flushing it, appends a record to the journal and flushes the
// journal only. A checkpoint (a sync point of the main file) later makes the
// main file durable up to some txid, after which the journal may be rewound
// and its space reused. After a crash, recovery reads the journal and
// re-executes the records newer than the main file's last sync point. This
// package knows nothing of pages or transactions: it stores and returns
// (seq, txid, payload) records and encodes the payload's operations (Op).
//
// # File layout
//
// All integers are little-endian. The header occupies the first HeaderSize
// (4096) bytes so that records start block-aligned:
//
//	off  size  field
//	0    4     magic 0x4c4a5652 ("RVJL" as bytes)
//	4    4     version (1)
//	8    8     salt: random per epoch; every record of the epoch carries it
//	16   8     firstSeq: the seq of the record at offset HeaderSize
//	24   36    reserved, zero
//	60   4     CRC-32C (Castagnoli) of bytes [0,60)
//	64   4032  zero
//
// Records (RecordHeaderSize = 40 bytes of header, then the payload) are
// packed back to back from HeaderSize, without padding:
//
//	off  size  field
//	0    4     magic 0x43524a52 ("RJRC" as bytes)
//	4    4     payload length n
//	8    8     salt (equal to the header's)
//	16   8     seq (the header's firstSeq for the first record, then increasing)
//	24   8     txid of the transaction
//	32   4     CRC-32C of bytes [0,32) followed by the payload
//	36   4     reserved, zero
//	40   n     payload: ops, each encoded by AppendOp
//
// An epoch is the life of one header: NewWriter and Rewind start one, with
// a fresh salt, and appends begin again at HeaderSize. The file keeps its
// size across epochs, so the bytes after the current epoch's last record
// are zeros, stale records of older epochs, or the unflushed remains of
// writes that failed or were cut off by a crash.
//
// # Validity
//
// A record is valid when its magic, salt, seq, reserved field and checksum
// are right, its length is within the reader's bound and it lies wholly
// inside the file. Read returns the valid records from HeaderSize on and
// stops at the first one that is not valid: that is the normal end of a
// journal, not an error.
//
// Seqs come from one counter per writer and are never reused, not even
// those of an Append that failed: the first record of an epoch has the
// header's firstSeq, and every record after it a greater seq than the one
// before, usually by one. A gap marks an Append that failed and whose place
// the next Append took.
//
// Invariant: a record is valid only if it was appended in the header's
// epoch (the salt) and lies where the writer put it after the records
// before it. Stale records of an older epoch fail the salt. The only stale
// records of the current epoch are those of failed appends, and the next
// Append overwrites them from their first byte with records of higher seqs,
// so that a stale one left after those (a retried transaction has the same
// txid and payload, and so the same length) has a lower seq than the record
// before it and fails the seq. (This needs a salt of its own for every
// epoch, which a random 64-bit salt gives.) The records of a failed Append
// that no later Append replaced are, like any failed write, of unknown
// outcome: they may be read.
//
// Invariant: once Writer.Sync has returned nil, every record appended
// before it is read back after any crash, in order (the prefix property):
// its bytes are durable, and so are those of every record before it and the
// header of its epoch. Records appended after the last Sync may come back as
// a prefix of themselves, never out of order and never with a gap, since
// reading stops at the first record that did not survive whole.
//
// Invariant: the header's meaningful bytes lie in [0,64), inside the first
// 512-byte sector, so a torn write of the header leaves either the old
// header or the new one.
//
// # Operations
//
// A payload is a sequence of operations, each a kind byte followed by the
// kind's fields (see OpKind). A byte string is uvarint(len+1) followed by the
// bytes, uvarint 0 standing for nil, so that a nil value and an empty one
// stay apart; a bucket path is uvarint(count) followed by count byte
// strings; a sequence number is a uvarint. Varints are minimal: the decoder
// rejects any other encoding, so a payload that decodes re-encodes to the
// same bytes.
package journal

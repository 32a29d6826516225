package rivet

import (
	"fmt"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/journal"
)

// A journaled write transaction records what it changes as logical
// operations (docs/design.md §3.8): each successful Put, Delete,
// CreateBucket, DeleteBucket, MoveBucket and sequence change appends one op
// to tx.jlog. Replaying the ops, in order, on the state the transaction
// began on gives its committed contents (not its page layout, which
// nothing outside the file depends on).
//
// Invariant: an op is logged only after the change it describes succeeded,
// and a failed change leaves the tree as it was or fails the transaction
// (tx.env.Err), so the log of a committed transaction is exactly what it
// did.

// maxJournalRecord bounds one transaction's journal record. A transaction
// whose ops outgrow it stops logging and commits with a sync point of the
// file instead (bulk loads and large values are written once, in place,
// rather than twice).
const maxJournalRecord = 1 << 20

// logOp appends op to the transaction's journal record, if it keeps one.
func (tx *Tx) logOp(op *journal.Op) {
	if !tx.journaling {
		return
	}
	if tx.jlog == nil {
		tx.jlog = tx.db.takeJournalBuffer()
	}
	tx.jlog = journal.AppendOp(tx.jlog, op)
	if len(tx.jlog) > maxJournalRecord {
		tx.journaling = false
		tx.jlog = nil
	}
}

// path returns the names leading from the top level to b, in tx's scratch
// space (valid until the next call).
func (b *Bucket) path() [][]byte {
	tx := b.tx
	p := tx.jpath[:0]
	for c := b; c != nil && !c.isRoot; c = c.parent {
		p = append(p, c.name)
	}
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
	tx.jpath = p
	return p
}

// logKey logs an op on a key (or a nested bucket's name) of b.
func (b *Bucket) logKey(kind journal.OpKind, key, value []byte) {
	if !b.tx.journaling {
		return
	}
	b.tx.logOp(&journal.Op{Kind: kind, Path: b.path(), Key: key, Value: value})
}

// logMove logs MoveBucket(name, dst) on b.
func (b *Bucket) logMove(name []byte, dst *Bucket) {
	if !b.tx.journaling {
		return
	}
	// path reuses one scratch slice: keep a copy of the source's.
	from := append([][]byte(nil), b.path()...)
	b.tx.logOp(&journal.Op{Kind: journal.OpMoveBucket, Path: from, Key: name, Dest: dst.path()})
}

// logSequence logs b's sequence after SetSequence or NextSequence.
func (b *Bucket) logSequence() {
	if !b.tx.journaling {
		return
	}
	b.tx.logOp(&journal.Op{Kind: journal.OpSetSequence, Path: b.path(), Seq: b.sequence})
}

// applyJournalRecord re-executes one journal record's ops in tx. The
// record's byte slices are referenced by the tree until tx commits (Put
// keeps values), so the caller keeps payload unchanged until then. An op
// that cannot be applied means the journal does not belong to this state:
// corruption.
func applyJournalRecord(tx *Tx, txid uint64, payload []byte) error {
	n := 0
	err := journal.DecodeOps(payload, func(op *journal.Op) error {
		n++
		if err := applyOp(tx, op); err != nil {
			return &rerrors.CorruptError{Reason: fmt.Sprintf("journal record of transaction %d, op %d (%s): %v", txid, n, op.Kind, err)}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tx.env.Err
}

// applyOp applies one logged op.
func applyOp(tx *Tx, op *journal.Op) error {
	b, err := bucketAt(tx, op.Path)
	if err != nil {
		return err
	}
	switch op.Kind {
	case journal.OpPut:
		return b.Put(op.Key, op.Value)
	case journal.OpDelete:
		return b.Delete(op.Key)
	case journal.OpCreateBucket:
		_, err := b.CreateBucket(op.Key)
		return err
	case journal.OpDeleteBucket:
		return b.DeleteBucket(op.Key)
	case journal.OpMoveBucket:
		dst, err := bucketAt(tx, op.Dest)
		if err != nil {
			return err
		}
		return b.MoveBucket(op.Key, dst)
	case journal.OpSetSequence:
		return b.SetSequence(op.Seq)
	}
	return fmt.Errorf("unknown op %d", op.Kind)
}

// bucketAt finds the bucket a logged path names.
func bucketAt(tx *Tx, path [][]byte) (*Bucket, error) {
	b := tx.root
	for _, name := range path {
		if b = b.Bucket(name); b == nil {
			return nil, fmt.Errorf("bucket %q not found", name)
		}
	}
	return b, nil
}

package difftest

// verdict is the judge's reading of two answers to one call.
type verdict struct {
	// rule names the known difference that explains the answers, if any.
	rule string
	// rollback: the engines now hold different states (as the rule
	// expects); the write transaction is rolled back on both.
	rollback bool
	// mismatch: the answers differ and no rule explains it.
	mismatch bool
}

// opTx returns the transaction o acts in, or -1 for calls on the DB.
// Tx.MoveBucket with a source and a destination acts in the source's
// (the receiver is not used; see Tx.MoveBucket).
func (m *model) opTx(o op) int {
	switch {
	case o.Kind == kTxMoveBucket && o.B >= 0 && o.B2 >= 0:
		return m.buckets[o.B].tx
	case o.Kind.onTx():
		return o.T
	case o.Kind.onBucket():
		return m.buckets[o.B].tx
	case o.Kind.onCursor():
		return m.cursors[o.C].tx
	}
	return -1
}

// The known differences. Each is listed in the README's differences.
const (
	// Calls through the buckets and cursors of an ended transaction: bbolt
	// panics on many (nil pointers, "tx closed" assertions) and answers
	// others from what its objects still cache (a nested bucket opened
	// earlier) or from the map (a read transaction's bucket reads its
	// sequence where the page may since have been reused); rivet returns
	// ErrTxClosed, or nil where the method has no error, and Sequence the
	// value the bucket had.
	ruleEnded = "call through an ended transaction's handles: bbolt panics or answers from stale objects, rivet returns ErrTxClosed or nil"
	// A cursor moved by Next or Prev, or deleting, after its bucket
	// changed: bbolt's answer is undefined (its cursor keeps indices into
	// nodes that shifted, and skips or repeats keys); rivet's continues
	// from the key it was on. Not compared; a delete through it may delete
	// different keys, so the transaction is rolled back.
	ruleDisturbedCursor = "cursor moved after a change without repositioning: bbolt's answer is undefined"
	// Cursor.Delete before the cursor was placed: bbolt indexes an empty
	// stack and panics; rivet deletes nothing and returns nil.
	ruleUnplacedDelete = "Cursor.Delete on a cursor never placed: bbolt panics, rivet returns nil"
	// Bucket.MoveBucket(name, nil): bbolt dereferences the nil
	// destination; rivet returns ErrTxClosed (a nil bucket has no open
	// transaction). Tx.MoveBucket's nil means the top level in both.
	ruleNilDst = "Bucket.MoveBucket into a nil bucket: bbolt panics, rivet returns ErrTxClosed"
	// A call through a handle of a bucket deleted earlier in the
	// transaction (or of a bucket inside it): bbolt's object has lost its
	// nodes, and it answers from the last committed pages, from the meta
	// page, or panics (a write asserts that the node map exists); rivet
	// answers reads from the bucket as it was when deleted and refuses
	// writes with ErrBucketNotFound. A write there may have changed bbolt's
	// tree (MoveBucket into a deleted bucket takes the bucket out of its
	// source, then loses it or panics), so the transaction is rolled back.
	ruleDeletedCall = "call through a bucket deleted in the same transaction: bbolt's answer is undefined or a panic"
	// A write through a handle opened before its bucket was moved away in
	// the same transaction: bbolt's object is cut off from the tree and
	// the write is lost at commit; rivet's handle follows the move and the
	// write is kept (ErrBucketNotFound if the bucket it moved into was
	// deleted since).
	ruleMovedWrite = "write through a handle of a bucket moved in the same transaction: bbolt loses it, rivet keeps it"
	// MoveBucket of a bucket that the transaction changed (keys, nested
	// buckets, sequence) before the move: bbolt moves the bucket's last
	// committed header and silently drops the changes (a bbolt bug);
	// rivet moves the bucket as it is.
	ruleMoveDropsChanges = "MoveBucket of a bucket changed earlier in the transaction: bbolt drops the changes, rivet keeps them"
	// Bucket.Stats of a bucket the open write transaction changed: bbolt
	// walks the pages the bucket had at the start of the transaction, or
	// after some changes none (an inline bucket that got a nested bucket
	// reads as empty); rivet counts the last commit, as documented.
	// MoveBucket of a bucket into itself or into a bucket inside it: bbolt
	// moves it, and the bucket, no longer reachable from the top, is lost
	// at commit; rivet refuses with ErrIncompatibleValue.
	ruleMoveIntoItself = "MoveBucket of a bucket into itself or its descendant: bbolt loses the bucket, rivet returns ErrIncompatibleValue"
	// bbolt's own Check finds pages that are neither reachable nor free
	// after some transactions that change a bucket holding nested
	// buckets and then delete it (a leak in bbolt's freelist; the data
	// are right). Counted each time a check meets such a page, not a
	// difference in what the API returns.
	ruleBboltLeak = "bbolt's Check: page unreachable unfreed (bbolt leaks pages of a bucket changed and then deleted)"
	// SetSequence or NextSequence on the top level, reached as
	// Tx.Cursor().Bucket(): bbolt keeps a sequence for it in the meta page;
	// rivet's meta has none (a format change to add), and it returns an
	// error.
	ruleRootSequence = "SetSequence/NextSequence on the top level: bbolt stores it in its meta page, rivet returns an error"
	// Calls through the handles of a transaction of the DB before it was
	// closed and opened again are made on rivet only: bbolt's read
	// transactions' buckets point into the file's old mapping, and a call
	// faults (SIGSEGV, which no recover catches). rivet's answers must be
	// those of an ended transaction.
	ruleClosedDB   = "call through a handle of a closed DB: bbolt may fault (not run), rivet answers as for an ended transaction"
	ruleStatsDirty = "Bucket.Stats of a bucket changed in the open write transaction: bbolt's counts are partial, rivet's are the last commit's"
)

// writes reports whether o changes its bucket, or the bucket or cursor it
// goes through.
func writes(k kind) bool {
	switch k {
	case kPut, kPutMany, kDelete, kCreateBucket, kCreateBucketIfNotExists, kDeleteBucket, kMoveBucket,
		kSetSequence, kNextSequence, kCursorDelete:
		return true
	}
	return false
}

// detachedVia returns the detached bucket handle that o goes through (its
// bucket, a cursor's bucket, or a MoveBucket source or destination), or
// -1. A handle stays detached after its transaction ended: what it caches
// may differ between the engines from the moment it was detached.
func (m *model) detachedVia(o op) int {
	var bs []int
	switch {
	case o.Kind.onBucket():
		bs = append(bs, o.B)
	case o.Kind.onCursor():
		bs = append(bs, m.cursors[o.C].bucket)
	case o.Kind == kTxMoveBucket:
		bs = append(bs, o.B)
	}
	if o.Kind == kMoveBucket || o.Kind == kTxMoveBucket {
		bs = append(bs, o.B2)
	}
	for _, b := range bs {
		if b >= 0 && m.buckets[b].detached {
			return b
		}
	}
	return -1
}

// judge compares bbolt's answer rb with rivet's rr to call o, made in the
// state m describes (before the call).
func judge(m *model, o op, rb, rr result) verdict {
	if rr.panicked && !rb.panicked {
		return verdict{mismatch: true}
	}
	if o.Kind == kMoveBucket && o.B2 < 0 && rb.panicked && rr.err == "ErrTxClosed" {
		return verdict{rule: ruleNilDst}
	}
	if o.Kind == kNext || o.Kind == kPrev || o.Kind == kCursorDelete {
		if c := m.cursors[o.C]; m.live(c.tx) && c.disturbed() {
			return verdict{rule: ruleDisturbedCursor, rollback: o.Kind == kCursorDelete && c.tx == m.writeTx}
		}
	}
	if b := m.detachedVia(o); b >= 0 {
		switch {
		case m.buckets[b].deleted && rb.out != rr.out:
			// A bbolt write there may have changed its tree, in full or
			// half-way (MoveBucket takes the bucket out of its source,
			// then puts it into the deleted destination or panics).
			w := writes(o.Kind) || o.Kind == kTxMoveBucket
			return verdict{rule: ruleDeletedCall, rollback: w && m.live(m.buckets[b].tx)}
		case !m.buckets[b].deleted && m.live(m.buckets[b].tx) && (writes(o.Kind) || o.Kind == kTxMoveBucket):
			// rivet's handle follows the move: the write succeeds where
			// bbolt's does, into the bucket where it now is (or fails
			// with ErrBucketNotFound if that was deleted since).
			if rr.out != rb.out && rr.err != "nil" && rr.err != "ErrBucketNotFound" {
				// A move into a handle that followed its bucket into the
				// bucket being moved: rivet refuses a move into itself.
				if (o.Kind == kMoveBucket || o.Kind == kTxMoveBucket) && rr.err == "ErrIncompatibleValue" && o.B2 >= 0 {
					_, src, _ := m.moveArgs(o)
					if under(m.buckets[o.B2].current(), childPath(src, o.Key)) {
						return verdict{rule: ruleMoveIntoItself, rollback: true}
					}
				}
				return verdict{mismatch: true}
			}
			return verdict{rule: ruleMovedWrite, rollback: true}
		}
	}
	if (o.Kind == kMoveBucket || o.Kind == kTxMoveBucket) && rb.out == "nil" && rr.out == "nil" {
		_, src, _ := m.moveArgs(o)
		if m.dirtyUnder(childPath(src, o.Key)) {
			return verdict{rule: ruleMoveDropsChanges, rollback: true}
		}
	}
	if (o.Kind == kMoveBucket || o.Kind == kTxMoveBucket) && rr.err == "ErrIncompatibleValue" && rb.err == "nil" {
		_, src, dst := m.moveArgs(o)
		if o.B2 >= 0 && under(dst, childPath(src, o.Key)) {
			return verdict{rule: ruleMoveIntoItself, rollback: true}
		}
	}
	if (o.Kind == kSetSequence || o.Kind == kNextSequence) && m.buckets[o.B].root && rr.err == "error(other)" && rb.err == "nil" {
		return verdict{rule: ruleRootSequence, rollback: true}
	}
	if rb.out == rr.out {
		return verdict{}
	}
	if o.Kind == kStats {
		if b := m.buckets[o.B]; b.tx == m.writeTx && m.dirtyUnder(b.path) {
			return verdict{rule: ruleStatsDirty}
		}
	}
	if o.Kind == kCursorDelete && rb.panicked && rr.err == "nil" && !m.cursors[o.C].placed {
		return verdict{rule: ruleUnplacedDelete}
	}
	if t := m.opTx(o); t >= 0 && m.txs[t].ended && closedAnswerFor(o.Kind, rr) {
		return verdict{rule: ruleEnded}
	}
	return verdict{mismatch: true}
}

// closedAnswerFor reports whether r is a possible answer of rivet to a call
// of kind k on an ended transaction: ErrTxClosed, or nothing, or for the
// methods that read what the handle keeps (Sequence, Writable, a new
// cursor that returns nothing, OnCommit that does nothing) anything.
func closedAnswerFor(k kind, r result) bool {
	if r.err != "" {
		return r.err == "ErrTxClosed"
	}
	switch k {
	case kSequence, kWritable, kTxWritable, kTxOnCommit, kTxCursor, kCursor:
		return true
	}
	switch r.out {
	case "nil", "nil=nil", "keys=0 buckets=0":
		return true
	}
	return false
}

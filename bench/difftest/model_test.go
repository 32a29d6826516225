package difftest

import (
	"strconv"
	"strings"
)

// The model follows what the calls did, in bbolt's terms, as far as the
// harness needs it: which handles are live, the path of each bucket
// handle, which buckets the open write transaction changed, and which
// cursors are positioned. It decides which calls the generator may make
// (none that would block the single goroutine) and which differences are
// known (known_test.go).

type txInfo struct {
	failed   bool // the call that made it failed
	writable bool
	ended    bool
	// opened counts the reopens before the transaction began: a handle of
	// a DB that was closed since (opened < model.opened) is not passed to
	// bbolt, whose read transactions' buckets point into the unmapped file
	// (a fault no recover catches).
	opened int
}

type bucketInfo struct {
	failed bool
	tx     int
	path   string
	root   bool // Tx.Cursor().Bucket()
	// detached: the bucket was deleted, or moved away, in the handle's
	// transaction after the handle was made. bbolt's object for it is no
	// longer part of the tree: what is written through it is lost at
	// commit, where rivet's follows the move.
	detached bool
	// deleted: detached by DeleteBucket (not by MoveBucket).
	deleted bool
	// now is where rivet's handle of a bucket moved away points: rivet's
	// handles follow a move. Empty: at path.
	now string
}

// current returns the path rivet's handle b points at.
func (b *bucketInfo) current() string {
	if b.now != "" {
		return b.now
	}
	return b.path
}

type cursorInfo struct {
	failed bool
	tx     int
	path   string
	// bucket is the bucket handle the cursor came from (-1: Tx.Cursor).
	bucket int
	// placed: First, Last or Seek placed it once.
	placed bool
	// positioned: placed, and nothing changed its bucket since. bbolt's
	// cursors are undefined after a change ("you must reposition your
	// cursor after mutating data"), so the answers of Next, Prev and
	// Delete are not compared on a cursor placed and then disturbed.
	positioned bool
}

// disturbed reports whether cursor c was placed and its bucket changed
// since.
func (c cursorInfo) disturbed() bool { return c.placed && !c.positioned }

type model struct {
	// The handles by the ID of the call that made them, and those IDs in
	// order (for the generator, which must not depend on map order).
	txs         map[int]*txInfo
	buckets     map[int]*bucketInfo
	cursors     map[int]*cursorInfo
	txOrder     []int
	bucketOrder []int
	cursorOrder []int
	writeTx     int // the open write transaction, -1 if none
	// opened counts the reopens so far.
	opened   int
	readOnly bool
	// dirty holds the paths of the buckets the open write transaction
	// changed (keys, nested buckets or sequence).
	dirty map[string]bool
}

func newModel() *model {
	return &model{
		txs: map[int]*txInfo{}, buckets: map[int]*bucketInfo{}, cursors: map[int]*cursorInfo{},
		writeTx: -1, dirty: map[string]bool{},
	}
}

// childPath is the path of the nested bucket name in the bucket at path.
// Each part carries its length, so "under" is a prefix test.
func childPath(path string, name []byte) string {
	return path + "/" + strconv.Itoa(len(name)) + ":" + string(name)
}

// under reports whether path is p or inside it.
func under(path, p string) bool { return path == p || strings.HasPrefix(path, p+"/") }

func (m *model) live(tx int) bool { t := m.txs[tx]; return t != nil && !t.failed && !t.ended }

// liveTxs counts the transactions not ended.
func (m *model) liveTxs() int {
	n := 0
	for i := range m.txs {
		if m.live(i) {
			n++
		}
	}
	return n
}

func (m *model) txOK(id int) bool     { t := m.txs[id]; return t != nil && !t.failed }
func (m *model) bucketOK(id int) bool { b := m.buckets[id]; return b != nil && !b.failed }
func (m *model) cursorOK(id int) bool { c := m.cursors[id]; return c != nil && !c.failed }

// valid reports whether o can be made now: its handles exist and are not
// nil, and it cannot block (a second write transaction in one goroutine
// waits for ever, in both engines). The generator makes only valid calls;
// a shrunk trace skips the others.
func (m *model) valid(o op) bool {
	switch {
	case o.Kind.onTx():
		if !m.txOK(o.T) {
			return false
		}
	case o.Kind.onBucket():
		if !m.bucketOK(o.B) {
			return false
		}
	case o.Kind.onCursor():
		if !m.cursorOK(o.C) {
			return false
		}
	}
	for _, b := range []int{o.B, o.B2} {
		if (o.Kind == kTxMoveBucket || o.Kind == kMoveBucket) && b >= 0 && !m.bucketOK(b) {
			return false
		}
	}
	switch o.Kind {
	case kBegin:
		return !o.Flag || m.writeTx < 0
	case kUpdate:
		return m.writeTx < 0
	case kReopen:
		return m.liveTxs() == 0
	}
	return true
}

// note records in m what o did, given the answers (r: bbolt's, which
// the judge found equal to rivet's or explained).
func (m *model) note(o op, r result) {
	switch {
	case o.Kind.makesTx():
		t := &txInfo{failed: r.tx == nil, opened: m.opened}
		switch o.Kind {
		case kBegin:
			t.writable = o.Flag
			if !t.failed && t.writable {
				m.writeTx = o.ID
				clear(m.dirty)
			}
		default:
			t.writable, t.ended = o.Kind == kUpdate, true
		}
		m.txs[o.ID] = t
		m.txOrder = append(m.txOrder, o.ID)
		return
	case o.Kind.makesBucket():
		b := &bucketInfo{failed: r.bucket == nil}
		switch o.Kind {
		case kTxRoot:
			b.tx, b.root = o.T, true
		case kTxBucket, kTxCreateBucket, kTxCreateBucketIfNotExists:
			b.tx, b.path = o.T, childPath("", o.Key)
		default:
			parent := m.buckets[o.B]
			b.tx, b.path = parent.tx, childPath(parent.path, o.Key)
			// Opened through a detached handle: detached too.
			b.detached, b.deleted = parent.detached, parent.deleted
		}
		m.buckets[o.ID] = b
		m.bucketOrder = append(m.bucketOrder, o.ID)
		if o.Kind == kTxCreateBucket || o.Kind == kTxCreateBucketIfNotExists {
			m.changed(o.T, "")
		} else if o.Kind == kCreateBucket || o.Kind == kCreateBucketIfNotExists {
			m.changed(m.buckets[o.B].tx, m.buckets[o.B].path)
		}
		return
	case o.Kind.makesCursor():
		c := &cursorInfo{failed: r.cursor == nil, bucket: -1}
		if o.Kind == kTxCursor {
			c.tx = o.T
		} else {
			b := m.buckets[o.B]
			c.tx, c.path, c.bucket = b.tx, b.path, o.B
		}
		m.cursors[o.ID] = c
		m.cursorOrder = append(m.cursorOrder, o.ID)
		return
	}
	ok := r.err == "nil" && !r.panicked
	switch o.Kind {
	case kReopen:
		m.opened++
		m.readOnly = o.Flag
	case kTxCommit, kTxRollback:
		t := m.txs[o.T]
		if t.ended || (!t.writable && o.Kind == kTxCommit) {
			return
		}
		m.end(o.T)
	case kTxDeleteBucket:
		if ok {
			m.removed(o.T, "", childPath("", o.Key), true)
		}
	case kDeleteBucket:
		if b := m.buckets[o.B]; ok {
			m.removed(b.tx, b.path, childPath(b.path, o.Key), true)
		}
	case kTxMoveBucket, kMoveBucket:
		if !ok {
			return
		}
		tx, src, dst := m.moveArgs(o)
		m.removed(tx, src, childPath(src, o.Key), false)
		m.changed(tx, dst)
		// rivet's handles of the moved bucket and inside it follow it.
		from, to := childPath(src, o.Key), childPath(dst, o.Key)
		if o.B2 >= 0 {
			to = childPath(m.buckets[o.B2].current(), o.Key)
		}
		for _, b := range m.buckets {
			if p := b.current(); b.tx == tx && !b.root && under(p, from) {
				b.now = to + p[len(from):]
			}
		}
	case kPut, kPutMany, kDelete, kSetSequence, kNextSequence:
		if b := m.buckets[o.B]; ok || o.Kind == kPutMany {
			m.changed(b.tx, b.path)
		}
	case kCursorDelete:
		if c := m.cursors[o.C]; ok {
			m.changed(c.tx, c.path)
		}
	case kFirst, kLast, kSeek:
		if m.live(m.cursors[o.C].tx) {
			m.cursors[o.C].placed = true
			m.cursors[o.C].positioned = true
		}
	}
}

// moveArgs returns the transaction of a MoveBucket call and the paths of
// its source and destination.
func (m *model) moveArgs(o op) (tx int, src, dst string) {
	if o.Kind == kMoveBucket {
		s := m.buckets[o.B]
		tx, src = s.tx, s.path
	} else {
		tx = m.opTx(o)
		if o.B >= 0 {
			src = m.buckets[o.B].path
		}
	}
	if o.B2 >= 0 {
		dst = m.buckets[o.B2].path
	}
	return tx, src, dst
}

// changed notes that tx changed the bucket at path: the write transaction's
// dirty set, and its cursors on that bucket lose their place.
func (m *model) changed(tx int, path string) {
	if tx == m.writeTx {
		m.dirty[path] = true
	}
	for _, c := range m.cursors {
		if c.tx == tx && c.path == path {
			c.positioned = false
		}
	}
}

// removed notes that the nested bucket at child left the bucket at parent
// in tx (deleted, or moved away): the handles made for it and inside it are
// detached, cursors on them lose their place.
func (m *model) removed(tx int, parent, child string, deleted bool) {
	m.changed(tx, parent)
	for p := range m.dirty {
		if under(p, child) {
			delete(m.dirty, p)
		}
	}
	for _, b := range m.buckets {
		if b.tx == tx && !b.root && under(b.path, child) {
			b.detached = true
			b.deleted = b.deleted || deleted
		}
	}
	for _, c := range m.cursors {
		if c.tx == tx && c.bucket >= 0 && under(c.path, child) {
			c.positioned = false
		}
	}
}

// end notes that transaction tx ended.
func (m *model) end(tx int) {
	m.txs[tx].ended = true
	if tx == m.writeTx {
		m.writeTx = -1
		clear(m.dirty)
	}
}

// dirtyUnder reports whether the write transaction changed anything at or
// inside path.
func (m *model) dirtyUnder(path string) bool {
	for p := range m.dirty {
		if under(p, path) {
			return true
		}
	}
	return false
}

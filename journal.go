package rivet

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	rerrors "github.com/rivetkv/rivet/errors"
	"github.com/rivetkv/rivet/internal/journal"
	"github.com/rivetkv/rivet/internal/page"
	"github.com/rivetkv/rivet/internal/vfs"
)

// The commit journal (docs/design.md §3.8).
//
// In Full durability a commit whose transaction kept a record of its
// changes (journal_ops.go) does not flush the file: it writes its pages
// there as a None commit does, queues its record, and waits until a
// journal write covers it — one append to the active journal file and one
// flush of that file, shared by the commits that queued meanwhile (group
// commit, as sync points are). The file is made durable by ordinary sync
// points, the checkpoints: in the background whenever the active
// journal file fills (journalSwitchBytes) or the pages waiting for a sync
// point pile up (as in None mode), and at Sync and Close. Recovery opens
// the file at its last sync point S, as without a journal, then re-applies
// the records of transactions after S.
//
// Invariants:
//   - a record is trusted by recovery only if its journal file's header
//     carries the salt of the meta recovery opened at; every meta this
//     process writes carries db.jsalt, and no record is written before a
//     sync point carrying it is durable (db.jready);
//   - a journal write acknowledges commit T only once every commit before
//     T that changed data is durable: by a record of an earlier or the same
//     write, or by a sync point (db.jbarrier);
//   - a journal file is started over (journal.NewWriter) only when a
//     durable sync point covers every record in it (db.jlast).

// journalSwitchBytes is how much of a journal file is filled before the
// next write goes to the other file and a checkpoint starts; it bounds
// what recovery reads and applies to about twice that.
const journalSwitchBytes = 1 << 20

// journalMaxBytes is how far a journal file may grow while the other
// still waits for its checkpoint; past it the journal writer runs the
// checkpoint itself.
const journalMaxBytes = 64 << 20

// journalSwitchAt returns where the active journal file is left for the
// other: journalSwitchBytes, or what a test set.
func (db *DB) journalSwitchAt() int64 {
	if n := db.jswitchBytes; n > 0 {
		return n
	}
	return journalSwitchBytes
}

// journalEntry is a committed transaction's record waiting for the journal.
type journalEntry struct {
	txid    uint64
	payload []byte
}

// journalJob is a journal write whose flush is still to come.
type journalJob struct {
	w       *journal.Writer
	txid    uint64     // the newest transaction it holds
	meta    *page.Meta // the state readers see once it is durable
	records int
}

// journalPath names journal file i of the database at path.
func journalPath(path string, i int) string { return fmt.Sprintf("%s-journal-%d", path, i) }

// journals reports whether this DB keeps a commit journal.
func (db *DB) journals() bool { return db.jsaltBase != nil }

// startJournal runs at Open, once the DB is usable and before any other
// writer. A writable DB in Full durability (without Options.NoJournal)
// opens its journal files, creating them if needed; any writable DB
// applies the records its file's state lacks (then closes the files if it
// does not journal). A read-only DB cannot apply them: it refuses to open
// a file whose journal holds commits beyond it.
func (db *DB) startJournal(meta *page.Meta) error {
	keep := !db.readOnly && db.opts.Durability.mode == modeFull && !db.opts.NoJournal
	if !keep && meta.JournalSalt == 0 {
		return nil
	}
	if err := db.openJournalFiles(false); err != nil {
		return err
	}
	if !keep {
		defer db.closeJournal()
		if db.readOnly {
			recs, err := pendingJournal(db.jfiles[:], meta)
			if err != nil {
				return err
			}
			if len(recs) > 0 {
				return fmt.Errorf("%w: its commit journal holds %d commits (transactions %d-%d) that the file does not; a writable Open applies them", rerrors.ErrJournalPending, len(recs), recs[0].Txid, recs[len(recs)-1].Txid)
			}
			return nil
		}
		// The journal goes once the file holds its records: replay
		// makes them durable before it returns.
		if err := db.replayJournal(meta, true); err != nil {
			return err
		}
		db.removeJournal()
		return nil
	}
	db.jsaltBase, db.jsaltOpened = db.metaSlotsDigest(), meta.JournalSalt
	return db.replayJournal(meta, false)
}

// metaSlotsDigest hashes both meta slots as Open found them, the base of
// this open's journal salt (journalSalt): a valid meta by its encoding
// (the bytes on disk), an invalid one by why it failed, which quotes its
// checksums. It reads nothing: Open read the metas already.
func (db *DB) metaSlotsDigest() []byte {
	h := sha256.New()
	buf := make([]byte, db.pageSize)
	for slot, m := range db.slotMeta {
		if m != nil {
			page.EncodeMeta(buf, m)
			h.Write(buf)
			continue
		}
		fmt.Fprintf(h, "slot %d invalid: %v", slot, db.openedMetaErrs[slot])
	}
	return h.Sum(nil)
}

// journalSalt returns the salt of the sync point m, which makes records
// trusted (the first of this open to be durable; before, db.jsalt is 0):
// a digest of both meta slots as Open found them and of the state m
// names. It differs from the salt of every earlier Open whose records may
// be in the journal (such an Open wrote a durable meta, which changed the
// slots, and the txid only grows), and from a journal of another file
// whose history differs. It is not random: two files built the same way
// stay byte-identical, which bbolt's own tests compare.
func (db *DB) journalSalt(m *page.Meta, previous uint64) uint64 {
	h := sha256.New()
	h.Write(db.jsaltBase)
	var b [40]byte
	binary.LittleEndian.PutUint64(b[0:], m.Txid)
	binary.LittleEndian.PutUint64(b[8:], m.HWM)
	binary.LittleEndian.PutUint64(b[16:], m.Root.ID)
	binary.LittleEndian.PutUint64(b[24:], m.Root.Txid)
	binary.LittleEndian.PutUint32(b[32:], m.Root.Checksum)
	h.Write(b[:])
	salt := binary.LittleEndian.Uint64(h.Sum(nil))
	for salt == 0 || salt == previous {
		salt++
	}
	return salt
}

// openJournalFiles opens the journal files that exist, or, with create,
// both, creating them (and flushing their directory) if needed.
func (db *DB) openJournalFiles(create bool) error {
	created := false
	flag := os.O_RDWR
	if db.readOnly {
		flag = os.O_RDONLY
	}
	for i, have := range db.jfiles {
		if have != nil {
			continue
		}
		name := journalPath(db.path, i)
		f, err := db.fs.OpenFile(name, flag, 0)
		if err != nil && create && errors.Is(err, fs.ErrNotExist) {
			f, err = db.fs.OpenFile(name, os.O_RDWR|os.O_CREATE, db.mode)
			created = true
		}
		if err != nil && !create && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			db.closeJournal()
			return fmt.Errorf("rivet: opening the journal: %w", err)
		}
		db.jfiles[i] = f
	}
	if created {
		// A record in a file whose name a crash can lose would be lost
		// with it.
		if err := db.fs.SyncDir(filepath.Dir(db.path)); err != nil {
			db.closeJournal()
			return fmt.Errorf("rivet: flushing the journal's directory: %w", err)
		}
	}
	return nil
}

// removeJournal closes and deletes the journal files, once a durable sync
// point covers every record in them (Close, and Open after applying them
// without journaling on). The deletions need not be durable: files that
// come back hold only records the file has.
func (db *DB) removeJournal() {
	db.closeJournal()
	for i := range db.jfiles {
		if err := db.fs.Remove(journalPath(db.path, i)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.logger.Warningf("%s: removing the journal: %v", db.path, err)
		}
	}
}

// closeJournal closes the journal files.
func (db *DB) closeJournal() {
	for i, f := range db.jfiles {
		if f != nil {
			_ = f.Close()
			db.jfiles[i] = nil
		}
	}
	db.jw = nil
}

// pendingJournal returns, in order, the records of both journal files
// that extend the state meta: those of transactions after it, in files
// whose salt is meta's. The payloads are copies.
func pendingJournal(files []vfs.File, meta *page.Meta) ([]journal.Record, error) {
	if meta.JournalSalt == 0 {
		return nil, nil
	}
	type chain struct {
		first uint64
		recs  []journal.Record
	}
	var chains []chain
	for _, f := range files {
		if f == nil {
			continue
		}
		var recs []journal.Record
		sum, err := journal.Read(f, journalMaxBytes, func(r journal.Record) error {
			if r.Txid <= meta.Txid {
				return nil
			}
			return journal.DecodeBatch(r.Payload, func(txid uint64, ops []byte) error {
				if txid > meta.Txid {
					recs = append(recs, journal.Record{Seq: r.Seq, Txid: txid, Payload: slices.Clone(ops)})
				}
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("rivet: reading the journal: %w", err)
		}
		if !sum.HeaderValid || sum.Salt != meta.JournalSalt || len(recs) == 0 {
			continue
		}
		chains = append(chains, chain{sum.FirstSeq, recs})
	}
	slices.SortFunc(chains, func(a, b chain) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	var out []journal.Record
	for _, c := range chains {
		for _, r := range c.recs {
			if bytes.Equal(r.Payload, notLoggedRecord) {
				// A transaction after meta that the journal cannot
				// replay: the file does not hold it, so nothing after
				// it was acknowledged (a journal write acknowledges a
				// commit only once the file holds every unlogged one
				// before it).
				return out, nil
			}
			if n := len(out); n > 0 && (r.Txid <= out[n-1].Txid || r.Seq < out[n-1].Seq) {
				return nil, &rerrors.CorruptError{Reason: fmt.Sprintf("journal record of transaction %d (seq %d) follows transaction %d (seq %d)", r.Txid, r.Seq, out[n-1].Txid, out[n-1].Seq)}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// replayJournal applies the journal's records after meta in one write
// transaction. With durable, it makes the result durable with a sync
// point (carrying this open's salt, so the records are not applied again)
// before it returns. Without, Open does not wait for that flush: the
// transaction is committed as a compaction step is (lazy), so readers see
// it at once, and a background sync point makes it durable.
//
// Invariant: until a sync point carrying this open's salt is durable, no
// meta slot and no journal file has changed (records wait for db.jready),
// so a crash meanwhile leaves the file and journal this Open found, and
// the next Open applies the same records again.
func (db *DB) replayJournal(meta *page.Meta, durable bool) error {
	recs, err := pendingJournal(db.jfiles[:], meta)
	if err != nil || len(recs) == 0 {
		return err
	}
	start := time.Now()
	tx, err := db.beginRW()
	if err != nil {
		return err
	}
	tx.lazy = !durable
	tx.replay = true
	for _, r := range recs {
		if err := applyJournalRecord(tx, r.Txid, r.Payload); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("rivet: committing the journal's records: %w", err)
	}
	head := db.headTxid()
	if durable {
		if err := db.syncThrough(head, true, nil); err != nil {
			return err
		}
	} else {
		db.startBackgroundSync(head)
	}
	db.recovered.JournalRecords = len(recs)
	db.recovered.JournalTxid = recs[len(recs)-1].Txid
	db.logger.Infof("%s: applied %d journal records (transactions %d-%d) in %v", db.path, len(recs), recs[0].Txid, recs[len(recs)-1].Txid, time.Since(start))
	return nil
}

// queueJournal queues tx's record for the next journal write, or notes a
// commit that changed data without one (logged false: too large a record,
// or a commit not made durable by its own flush, NoSync's, whose record
// would wait in memory until some durable commit came). Called by commit with the writer
// lock held, once the commit is head.
func (db *DB) queueJournal(tx *Tx, logged bool) {
	if logged {
		db.jqueue = append(db.jqueue, journalEntry{txid: tx.txid, payload: tx.jlog})
		tx.jlog = nil
		return
	}
	// The journal says so, for recovery to stop before it (see
	// pendingJournal); acknowledgements wait for a sync point covering it.
	// Consecutive such commits share one marker, which names the newest:
	// recovery stops at it unless the file holds all of them, so that a
	// program that commits under NoSync for ever queues one entry, not one
	// per commit.
	db.jbarrier = tx.txid
	if n := len(db.jqueue); n > 0 && bytes.Equal(db.jqueue[n-1].payload, notLoggedRecord) {
		db.jqueue[n-1].txid = tx.txid
		return
	}
	db.jqueue = append(db.jqueue, journalEntry{txid: tx.txid, payload: notLoggedRecord})
}

// maxKeptJournalBuffer bounds the journal buffers kept for reuse (a
// write transaction's record, a journal write's batch): larger ones, of
// the rare large transaction, go to the garbage collector.
const maxKeptJournalBuffer = 64 << 10

// maxSpareJournalBuffers bounds how many records' buffers wait for reuse:
// one per commit a journal write covers, up to a group's worth.
const maxSpareJournalBuffers = 64

// takeJournalBuffer returns an empty buffer for a write transaction's
// record, reusing one a journal write is done with. The caller holds the
// writer lock.
func (db *DB) takeJournalBuffer() []byte {
	n := len(db.jspare)
	if n == 0 {
		return nil
	}
	b := db.jspare[n-1]
	db.jspare[n-1] = nil
	db.jspare = db.jspare[:n-1]
	return b[:0]
}

// recycleJournalBuffer keeps b, a record a journal write has copied into
// its batch, for a later transaction. The caller holds the writer lock.
func (db *DB) recycleJournalBuffer(b []byte) {
	if cap(b) == 0 || cap(b) > maxKeptJournalBuffer || len(db.jspare) >= maxSpareJournalBuffers || &b[:1][0] == &notLoggedRecord[0] {
		// The marker of commits without a record is shared: never reused.
		return
	}
	db.jspare = append(db.jspare, b)
}

// notLoggedRecord is the payload of a transaction that changed data
// without a record.
var notLoggedRecord = journal.AppendOp(nil, &journal.Op{Kind: journal.OpNotLogged})

// claimJournal makes the caller the journal writer if no journal write is
// in flight.
func (db *DB) claimJournal() bool {
	db.syncMu.Lock()
	defer db.syncMu.Unlock()
	if db.jwriting {
		return false
	}
	db.jwriting = true
	return true
}

// releaseJournal ends the caller's turn as journal writer.
func (db *DB) releaseJournal() {
	db.syncMu.Lock()
	db.jwriting = false
	db.syncCond.Broadcast()
	db.syncMu.Unlock()
}

// errJournalFull says that the journal cannot take more records until a
// checkpoint covers the older journal file.
var errJournalFull = fmt.Errorf("rivet: journal full")

// errJournalOff says that the journal's files could not be made (the
// database's directory was removed, or cannot be written): this DB stops
// journaling, and the queued commits, and all later ones, are made durable
// by sync points of the file, as with Options.NoJournal.
var errJournalOff = fmt.Errorf("rivet: journal off")

// errJournalBarrier says that a commit before the queued records changed
// data without a record and is not durable yet: one sync point of the
// file covers it and them, cheaper than a journal write and then that sync
// point.
var errJournalBarrier = fmt.Errorf("rivet: journal waits for a sync point")

// writeJournal writes the queued records to the journal (no flush). The
// caller holds the writer lock and the journal writer's turn. On success
// the commits so far are sealed: only a failed flush can fail them now,
// and that latches. If the write fails, the commits after base are taken
// back (abortSync), as when a sync point fails to write.
func (db *DB) writeJournal() (*journalJob, error) {
	db.syncMu.Lock()
	durable := db.durable
	db.syncMu.Unlock()
	// Records a sync point covers already need no journal write.
	i := 0
	for i < len(db.jqueue) && db.jqueue[i].txid <= durable {
		i++
	}
	db.jqueue = db.jqueue[i:]
	if len(db.jqueue) == 0 {
		return nil, nil
	}
	if db.jbarrier > durable {
		// Invariant: a journal write is made only when every commit
		// without a record before its records is durable, so its flush
		// alone acknowledges them.
		return nil, errJournalBarrier
	}
	if err := db.switchJournal(); err != nil {
		return nil, err
	}
	entries := db.jqueue
	db.jqueue = nil
	// One record for the whole write (journal.AppendEntry): a write that
	// fails part way then leaves nothing that recovery could take for a
	// commit.
	batch := db.jbatch[:0]
	for _, e := range entries {
		batch = journal.AppendEntry(batch, e.txid, e.payload)
		db.recycleJournalBuffer(e.payload)
	}
	if cap(batch) <= maxKeptJournalBuffer {
		db.jbatch = batch
	}
	recs := []journal.Record{{Txid: entries[len(entries)-1].txid, Payload: batch}}
	end := db.jw.End()
	if err := db.jw.Append(recs); err != nil {
		err = db.abortSync(nil, fmt.Errorf("writing the journal: %w", err))
		if errors.Is(err, journal.ErrUncertain) {
			// The failed records may survive a crash: what the file
			// holds is no longer certain.
			err = db.latch(err)
		}
		return nil, err
	}
	db.journalBytes.Add(db.jw.End() - end)
	last := entries[len(entries)-1].txid
	db.jlast[db.jactive] = last
	job := &journalJob{w: db.jw, txid: last, meta: db.head, records: len(entries)}
	db.jpublishing.Store(db.head.Txid)
	db.sealSynced()
	return job, nil
}

// switchJournal starts the journal, or moves it to the other file once
// the active one holds journalSwitchBytes and a checkpoint covers every
// record of the other, and then starts a checkpoint for the one it
// leaves. Called by writeJournal.
func (db *DB) switchJournal() error {
	if db.jw != nil && db.jw.End() < db.journalSwitchAt() {
		return nil
	}
	if db.jfiles[0] == nil || db.jfiles[1] == nil {
		// The files are made when the first record is written; their
		// names are durable before any record in them is acknowledged.
		if err := db.openJournalFiles(true); err != nil {
			db.logger.Warningf("%s: no commit journal, commits flush the file: %v", db.path, err)
			db.jqueue = nil
			db.joff.Store(true)
			return errJournalOff
		}
	}
	next, seq := 0, uint64(1)
	if db.jw != nil {
		next, seq = 1-db.jactive, db.jw.NextSeq()
		db.syncMu.Lock()
		durable := db.durable
		db.syncMu.Unlock()
		if db.jlast[next] > durable {
			db.jbehind.Store(true)
			if db.jw.End() < journalMaxBytes {
				return nil
			}
			return errJournalFull
		}
	}
	w, err := journal.NewWriter(db.jfiles[next], db.jsalt, seq, 0)
	if err != nil {
		return db.abortSync(nil, fmt.Errorf("starting a journal file: %w", err))
	}
	if db.jw != nil {
		// Every record of the file left behind is in a state up to head:
		// a sync point of head frees it for the next switch.
		db.startBackgroundSync(db.head.Txid)
	}
	db.jw, db.jactive = w, next
	db.jlast[next] = 0
	db.jbehind.Store(false)
	return nil
}

// finishJournal flushes a written journal write and makes its commits
// durable and visible. It runs without the writer lock.
func (db *DB) finishJournal(job *journalJob) error {
	// Whatever happens, the state is published or never will be by this
	// job: stop holding its pages (beginRW) once this returns.
	defer db.jpublishing.CompareAndSwap(job.meta.Txid, 0)
	start := time.Now()
	if err := job.w.Sync(vfs.SyncData); err != nil {
		return db.latch(err)
	}
	db.lastFlushNs.Store(int64(time.Since(start)))
	db.syncMu.Lock()
	db.logged = max(db.logged, job.txid)
	db.syncMu.Unlock()
	db.journalWrites.Add(1)
	db.journalRecords.Add(int64(job.records))
	db.readers.Publish(job.meta, db.pager.Acquire())
	db.spaceMu.Lock()
	stats := db.space.Stats()
	db.spaceMu.Unlock()
	db.mu.Lock()
	db.spaceStats = stats
	db.mu.Unlock()
	return nil
}

// journalThrough waits until the commit txid is durable, leading journal
// writes itself whenever none is in flight. The commit passes its chain:
// if a failed write takes it back, journalThrough returns that error.
func (db *DB) journalThrough(txid uint64, w *commitChain) error {
	done := func() bool { return db.logged >= txid || db.durable >= txid }
	db.syncMu.Lock()
	for {
		lead, err := db.waitOrLead(w, done, &db.jwriting)
		db.syncMu.Unlock()
		if !lead {
			return err
		}

		db.lingerForCommits()
		// Counted as a waiting writer: compaction lets it go first.
		db.writersWaiting.Add(1)
		db.writer.Lock()
		db.writersWaiting.Add(-1)
		job, err := db.writeJournal()
		db.writer.Unlock()
		if err == errJournalOff || err == errJournalBarrier {
			db.releaseJournal()
			return db.syncThrough(txid, false, w)
		}
		if err == errJournalFull {
			// The older journal file still waits for its checkpoint: run
			// it here, then write.
			db.releaseJournal()
			if err := db.syncThrough(db.jlastOther(), false, nil); err != nil {
				return err
			}
			db.syncMu.Lock()
			continue
		}
		if err == nil && job != nil {
			err = db.finishJournal(job)
		}
		db.releaseJournal()
		if err != nil {
			return err
		}
		if job == nil {
			// Nothing was queued: txid is covered by a sync point (it had
			// no record, or a sync point sealed it) — wait for that.
			return db.syncThrough(txid, false, w)
		}
		db.syncMu.Lock()
	}
}

// jlastOther returns the newest txid in the journal file that is not
// active.
func (db *DB) jlastOther() uint64 {
	db.writer.Lock()
	defer db.writer.Unlock()
	return db.jlast[1-db.jactive]
}

// dropJournalAfter forgets the queued records of the commits after txid,
// which abortSync has taken back. The caller holds the writer lock.
func (db *DB) dropJournalAfter(txid uint64) {
	i := len(db.jqueue)
	for i > 0 && db.jqueue[i-1].txid > txid {
		i--
	}
	clear(db.jqueue[i:])
	db.jqueue = db.jqueue[:i]
	if db.jbarrier > txid {
		// A taken-back commit had no record; an earlier one may have too.
		db.jbarrier = txid
	}
}

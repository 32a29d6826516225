package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
)

// dbFileMode is the mode of a file New creates, as raft-boltdb's.
const dbFileMode = 0o600

// logsFillPercent is how full StoreLogs packs the leaves it splits.
const logsFillPercent = 1.0

// Bucket names, the same as raft-boltdb's, so a raft-boltdb file copied
// bucket for bucket into a rivet file is a raftstore file.
var (
	bucketLogs = []byte("logs")
	bucketConf = []byte("conf")
)

// ErrKeyNotFound is returned by Get and GetUint64 for a key never set.
// Its text is "not found", which hashicorp/raft compares against to tell a
// fresh store from a failing one (as it does with raft-boltdb's error of
// the same name and text).
var ErrKeyNotFound = errors.New("not found")

// Options configure New. Only Path is required.
type Options struct {
	// Path is the database file; New creates it (mode 0600) if missing.
	Path string

	// RivetOptions are passed to rivet.Open: Durability (Full by default:
	// every StoreLogs, DeleteRange and Set is durable when it returns),
	// Timeout for the file lock, ReadOnly for tools that inspect a log,
	// AutoCompact, Logger, and the rest. New copies them; nil means
	// rivet's defaults.
	RivetOptions *rivet.Options

	// NoSync is raft-boltdb's option: writes are not flushed (rivet's
	// Durability None). Unlike bbolt's NoSync it cannot corrupt the file;
	// a crash of the machine loses the writes since the last Sync or
	// Close, which raft's safety does not allow for a voting member.
	NoSync bool

	// MsgpackUseNewTimeFormat writes raft.Log.AppendedAt in msgpack's
	// timestamp form instead of time.Time.MarshalBinary's, as the option of
	// the same name in raft-boltdb v2. Reading accepts both forms.
	MsgpackUseNewTimeFormat bool
}

// Store is a raft.LogStore and raft.StableStore over a rivet database
// file: log entries in the "logs" bucket under their index as an 8-byte
// big-endian key, valued with raft-boltdb's msgpack encoding, and the
// stable store's keys in the "conf" bucket. Its methods are safe for
// concurrent use.
//
// The first and last index are kept in memory: the Store is the only
// writer of its file (rivet holds an exclusive lock on it), so it loads
// them once at New and updates them after every committed StoreLogs and
// DeleteRange; FirstIndex and LastIndex, which raft calls on every append
// and election, do not start a transaction. The stable store's keys are
// kept too, once read or set.
type Store struct {
	db      *rivet.DB
	path    string
	newTime bool

	// state holds the last published bounds of the log. Invariant: it
	// describes the committed state after the write transaction numbered
	// state.seq, and a state is replaced only by one of a later write
	// transaction, so bounds published out of order by concurrent writers
	// (whose commits may return in any order when they share a flush)
	// never go back in time.
	state atomic.Pointer[logState]
	// publishMu serializes replacements of state.
	publishMu sync.Mutex
	// seq numbers the write transactions that change the log. It is taken
	// inside the transaction, and rivet runs one write transaction at a
	// time, so the numbers follow the order of the commits. (rivet's own
	// transaction id does not: a commit that changed nothing keeps the
	// previous id.)
	seq atomic.Uint64

	// setMu is held by Set for its whole transaction, and by a Get that
	// fills conf from the file, so a fill never stores a value a Set is
	// replacing.
	setMu sync.Mutex
	// confMu guards conf, the stable store's keys read or written so far:
	// value, or nil for a key known to be absent. Invariant: an entry
	// equals the committed value of its key. raft keeps three keys here.
	confMu sync.RWMutex
	conf   map[string][]byte
}

// maxConfCache bounds the cached stable-store keys; past it, Get reads the
// file (a program using the stable store for its own data).
const maxConfCache = 1024

// logState is the bounds of the log as of one committed transaction.
type logState struct {
	seq         uint64
	first, last uint64 // both 0 when empty
	closed      bool
}

var closedState = &logState{seq: math.MaxUint64, closed: true}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// NewStore opens (or creates) the store at path with the default options,
// as raft-boltdb's NewBoltStore.
func NewStore(path string) (*Store, error) {
	return New(Options{Path: path})
}

// New opens (or creates) a store as configured by options.
func New(options Options) (*Store, error) {
	var ro rivet.Options
	if options.RivetOptions != nil {
		ro = *options.RivetOptions
	}
	if options.NoSync {
		ro.NoSync = true
		ro.Durability = rivet.None
	}
	db, err := rivet.Open(options.Path, dbFileMode, &ro)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: options.Path, newTime: options.MsgpackUseNewTimeFormat, conf: map[string][]byte{}}
	if !ro.ReadOnly {
		err = db.Update(func(tx *rivet.Tx) error {
			if _, err := tx.CreateBucketIfNotExists(bucketLogs); err != nil {
				return err
			}
			_, err := tx.CreateBucketIfNotExists(bucketConf)
			return err
		})
	}
	if err == nil {
		err = db.View(func(tx *rivet.Tx) error {
			st, err := boundsOf(tx, 0)
			if err == nil {
				s.state.Store(st)
			}
			return err
		})
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// boundsOf reads the log's first and last index in tx, the write
// transaction numbered seq (or a read transaction at New, seq 0).
func boundsOf(tx *rivet.Tx, seq uint64) (*logState, error) {
	st := &logState{seq: seq}
	b := tx.Bucket(bucketLogs)
	if b == nil {
		return st, nil
	}
	c := b.Cursor()
	k, _ := c.First()
	if k == nil {
		return st, nil
	}
	first, err := keyIndex(k)
	if err != nil {
		return nil, err
	}
	k, _ = c.Last()
	last, err := keyIndex(k)
	if err != nil {
		return nil, err
	}
	st.first, st.last = first, last
	return st, nil
}

// keyIndex decodes a key of the logs bucket.
func keyIndex(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: raftstore: log key of %d bytes", rerrors.ErrCorrupt, len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}

// publish makes st the current bounds unless a later transaction's are
// already published.
func (s *Store) publish(st *logState) {
	s.publishMu.Lock()
	if cur := s.state.Load(); cur == nil || cur.seq < st.seq {
		s.state.Store(st)
	}
	s.publishMu.Unlock()
}

// Close closes the database file. Later calls return
// errors.ErrDatabaseNotOpen.
func (s *Store) Close() error {
	s.publish(closedState)
	return s.db.Close()
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Stats returns the database's statistics (rivet.DB.Stats).
func (s *Store) Stats() rivet.Stats { return s.db.Stats() }

// Sync flushes the file: needed only with NoSync or a Durability other than
// Full or Barrier, to make earlier writes durable.
func (s *Store) Sync() error { return s.db.Sync() }

// Compact gives the file's free space back to the file system online
// (rivet.DB.Compact): after a large truncation of the log, the pages that
// held the deleted entries. It returns the bytes the file shrank by.
func (s *Store) Compact(ctx context.Context) (int64, error) {
	return s.db.Compact(ctx)
}

// FirstIndex returns the first index in the log, 0 if it is empty.
func (s *Store) FirstIndex() (uint64, error) {
	st := s.state.Load()
	if st.closed {
		return 0, rerrors.ErrDatabaseNotOpen
	}
	return st.first, nil
}

// LastIndex returns the last index in the log, 0 if it is empty.
func (s *Store) LastIndex() (uint64, error) {
	st := s.state.Load()
	if st.closed {
		return 0, rerrors.ErrDatabaseNotOpen
	}
	return st.last, nil
}

// GetLog reads the entry at index into log; raft.ErrLogNotFound if there
// is none.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], index)
	tx, err := s.db.Begin(false)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	b := tx.Bucket(bucketLogs)
	if b == nil {
		return raft.ErrLogNotFound
	}
	val := b.Get(key[:])
	if val == nil {
		return raft.ErrLogNotFound
	}
	return decodeLog(val, log)
}

// StoreLog stores one entry.
func (s *Store) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores entries in one write transaction: all or none of them
// are in the log after a crash, and with Durability Full all of them are
// durable when it returns nil.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	// Keys and values of the batch in one buffer; rivet keeps references
	// to them until the commit.
	size := 0
	for _, l := range logs {
		size += 8 + encodedBound(l)
	}
	buf := make([]byte, 0, size)
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	b := tx.Bucket(bucketLogs)
	if b == nil {
		return errNoBucket(bucketLogs)
	}
	// Raft appends at the end of the log: leaves split by an append are
	// packed full instead of half (rivet's and bbolt's default, for random
	// inserts), which halves the pages a batch writes and the file's size.
	b.FillPercent = logsFillPercent
	for _, l := range logs {
		at := len(buf)
		buf = binary.BigEndian.AppendUint64(buf, l.Index)
		if buf, err = appendLog(buf, l, s.newTime); err != nil {
			return err
		}
		if err := b.Put(buf[at:at+8], buf[at+8:]); err != nil {
			return err
		}
	}
	return s.commitLogs(tx)
}

// commitLogs commits a transaction that changed the logs bucket and
// publishes the log's new bounds.
func (s *Store) commitLogs(tx *rivet.Tx) error {
	st, err := boundsOf(tx, s.seq.Add(1))
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.publish(st)
	return nil
}

// DeleteRange deletes the entries with indexes from lo to hi, inclusive,
// in one write transaction.
func (s *Store) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	b := tx.Bucket(bucketLogs)
	if b == nil {
		return errNoBucket(bucketLogs)
	}
	var minKey, maxKey [8]byte
	binary.BigEndian.PutUint64(minKey[:], lo)
	binary.BigEndian.PutUint64(maxKey[:], hi)
	c := b.Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	switch {
	case first == nil || bytes.Compare(first, maxKey[:]) > 0 || bytes.Compare(last, minKey[:]) < 0:
		// Nothing in range.
		return nil
	case bytes.Compare(first, minKey[:]) >= 0 && bytes.Compare(last, maxKey[:]) <= 0:
		// The whole log (raft after installing a snapshot): dropping the
		// bucket frees its pages without visiting every entry.
		if err := tx.DeleteBucket(bucketLogs); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketLogs); err != nil {
			return err
		}
	default:
		deleted := 0
		for k, _ := c.Seek(minKey[:]); k != nil && bytes.Compare(k, maxKey[:]) <= 0; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
			deleted++
		}
		if deleted == 0 {
			// A gap of the log: nothing to commit.
			return nil
		}
	}
	return s.commitLogs(tx)
}

// Set stores a stable-store key.
func (s *Store) Set(key, val []byte) error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	b := tx.Bucket(bucketConf)
	if b == nil {
		return errNoBucket(bucketConf)
	}
	if err := b.Put(key, val); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		// The key's value is unknown now (a failed flush latches the
		// DB; its last durable state may or may not hold val).
		s.confMu.Lock()
		delete(s.conf, string(key))
		s.confMu.Unlock()
		return err
	}
	// Never nil, which would mean absent: rivet stores a nil value as an
	// empty one.
	s.cacheConf(key, append([]byte{}, val...))
	return nil
}

// cacheConf records a key's committed value (nil: absent).
func (s *Store) cacheConf(key, val []byte) {
	s.confMu.Lock()
	if _, ok := s.conf[string(key)]; ok || len(s.conf) < maxConfCache {
		s.conf[string(key)] = val
	}
	s.confMu.Unlock()
}

// Get returns a copy of a stable-store key's value, ErrKeyNotFound if it
// was never set.
func (s *Store) Get(key []byte) ([]byte, error) {
	val, err := s.getConf(key)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(val), nil
}

// getConf returns a key's value, shared with the cache: not to be changed.
func (s *Store) getConf(key []byte) ([]byte, error) {
	if s.state.Load().closed {
		return nil, rerrors.ErrDatabaseNotOpen
	}
	s.confMu.RLock()
	val, ok := s.conf[string(key)]
	s.confMu.RUnlock()
	if ok {
		if val == nil {
			return nil, ErrKeyNotFound
		}
		return val, nil
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if b := tx.Bucket(bucketConf); b != nil {
		val = b.Get(key)
	}
	if val == nil {
		s.cacheConf(key, nil)
		return nil, ErrKeyNotFound
	}
	val = bytes.Clone(val)
	s.cacheConf(key, val)
	return val, nil
}

// SetUint64 stores val as an 8-byte big-endian value.
func (s *Store) SetUint64(key []byte, val uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], val)
	return s.Set(key, v[:])
}

// GetUint64 reads a value SetUint64 stored; ErrKeyNotFound if the key was
// never set.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	val, err := s.getConf(key)
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, fmt.Errorf("raftstore: value of %q is %d bytes, not a uint64", key, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// errNoBucket reports a bucket missing from a file the store did not
// create (a read-only open of a foreign file).
func errNoBucket(name []byte) error {
	return fmt.Errorf("raftstore: the file has no %q bucket", name)
}

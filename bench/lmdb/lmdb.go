//go:build cgo && lmdb

package lmdb

/*
#cgo LDFLAGS: -llmdb
#include <stdlib.h>
#include <lmdb.h>

// Each helper runs a whole batch in C. Keys (and values) arrive packed in
// one buffer with their lengths alongside.

static int rb_put_many(MDB_txn *txn, MDB_dbi dbi, char *keys, size_t *klens,
                       char *vals, size_t *vlens, int n) {
	for (int i = 0; i < n; i++) {
		MDB_val k = {klens[i], keys}, v = {vlens[i], vals};
		int rc = mdb_put(txn, dbi, &k, &v, 0);
		if (rc != 0) return rc;
		keys += klens[i];
		vals += vlens[i];
	}
	return 0;
}

static int rb_del_many(MDB_txn *txn, MDB_dbi dbi, char *keys, size_t *klens, int n) {
	for (int i = 0; i < n; i++) {
		MDB_val k = {klens[i], keys};
		int rc = mdb_del(txn, dbi, &k, NULL);
		if (rc != 0 && rc != MDB_NOTFOUND) return rc;
		keys += klens[i];
	}
	return 0;
}

static int rb_get_many(MDB_txn *txn, MDB_dbi dbi, char *keys, size_t *klens, int n, int *found) {
	*found = 0;
	for (int i = 0; i < n; i++) {
		MDB_val k = {klens[i], keys}, v;
		int rc = mdb_get(txn, dbi, &k, &v);
		if (rc == 0) (*found)++;
		else if (rc != MDB_NOTFOUND) return rc;
		keys += klens[i];
	}
	return 0;
}

// rb_scan_many positions a cursor at each start and reads up to per pairs
// from there (like the Go engines' scans, it does not read the values).
static int rb_scan_many(MDB_txn *txn, MDB_dbi dbi, char *keys, size_t *klens, int n, int per,
                        int *pairs) {
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, dbi, &c);
	if (rc != 0) return rc;
	*pairs = 0;
	for (int i = 0; i < n; i++) {
		MDB_val k = {klens[i], keys}, v;
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		for (int j = 0; rc == 0 && j < per; j++) {
			(*pairs)++;
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		}
		if (rc != 0 && rc != MDB_NOTFOUND) {
			mdb_cursor_close(c);
			return rc;
		}
		keys += klens[i];
	}
	mdb_cursor_close(c);
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Available reports whether the binding was compiled in.
const Available = true

// Version returns the linked library's version string.
func Version() string { return C.GoString(C.mdb_version(nil, nil, nil)) }

// Error is an LMDB return code.
type Error struct {
	Op   string
	Code int
}

// Error implements error with LMDB's own message.
func (e *Error) Error() string {
	return fmt.Sprintf("lmdb %s: %s", e.Op, C.GoString(C.mdb_strerror(C.int(e.Code))))
}

func check(op string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(rc)}
}

// ErrClosed is returned by methods of a closed Env.
var ErrClosed = errors.New("lmdb: environment closed")

// Env is an open LMDB environment over one file (MDB_NOSUBDIR: the data
// file is path, the lock file path+"-lock").
type Env struct {
	env      *C.MDB_env
	readOnly bool

	mu   sync.Mutex
	dbis map[string]C.MDB_dbi
}

// Options configure Open.
type Options struct {
	// ReadOnly opens the environment with MDB_RDONLY.
	ReadOnly bool
	// MapSize is the largest the file may grow to; address space is
	// reserved for it but the file grows only as pages are used.
	MapSize int64
	// MaxDBs is the number of named databases the environment may hold.
	MaxDBs int
}

// Open opens (creating, unless read-only) the environment at path. Read
// transactions are not tied to threads (MDB_NOTLS), as goroutines move
// between threads; durability is LMDB's default: every commit is synced.
func Open(path string, o Options) (*Env, error) {
	var env *C.MDB_env
	if err := check("env_create", C.mdb_env_create(&env)); err != nil {
		return nil, err
	}
	fail := func(err error) (*Env, error) {
		C.mdb_env_close(env)
		return nil, err
	}
	if err := check("env_set_mapsize", C.mdb_env_set_mapsize(env, C.size_t(o.MapSize))); err != nil {
		return fail(err)
	}
	if err := check("env_set_maxdbs", C.mdb_env_set_maxdbs(env, C.MDB_dbi(o.MaxDBs))); err != nil {
		return fail(err)
	}
	flags := C.uint(C.MDB_NOSUBDIR | C.MDB_NOTLS)
	if o.ReadOnly {
		flags |= C.MDB_RDONLY
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if err := check("env_open", C.mdb_env_open(env, cpath, flags, 0o644)); err != nil {
		return fail(err)
	}
	return &Env{env: env, readOnly: o.ReadOnly, dbis: map[string]C.MDB_dbi{}}, nil
}

// Close closes the environment. No transaction may be running.
func (e *Env) Close() error {
	if e.env == nil {
		return ErrClosed
	}
	C.mdb_env_close(e.env)
	e.env = nil
	return nil
}

// Txn is a transaction, valid only inside the function given to Update or
// View.
type Txn struct {
	env     *Env
	txn     *C.MDB_txn
	write   bool
	created map[string]C.MDB_dbi // DBIs opened by this write txn
}

// Update runs fn in a write transaction and commits it (durably) if fn
// returns nil, aborting it otherwise. The goroutine stays on its OS thread
// for the transaction: LMDB's writer lock is a mutex its owner thread must
// release.
func (e *Env) Update(fn func(*Txn) error) error {
	if e.env == nil {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := &Txn{env: e, write: true, created: map[string]C.MDB_dbi{}}
	if err := check("txn_begin", C.mdb_txn_begin(e.env, nil, 0, &t.txn)); err != nil {
		return err
	}
	if err := fn(t); err != nil {
		C.mdb_txn_abort(t.txn)
		return err
	}
	if err := check("txn_commit", C.mdb_txn_commit(t.txn)); err != nil {
		return err
	}
	// Handles opened by a committed transaction stay valid for the
	// environment's life.
	if len(t.created) > 0 {
		e.mu.Lock()
		for name, dbi := range t.created {
			e.dbis[name] = dbi
		}
		e.mu.Unlock()
	}
	return nil
}

// View runs fn in a read-only transaction.
func (e *Env) View(fn func(*Txn) error) error {
	if e.env == nil {
		return ErrClosed
	}
	t := &Txn{env: e}
	if err := check("txn_begin", C.mdb_txn_begin(e.env, nil, C.MDB_RDONLY, &t.txn)); err != nil {
		return err
	}
	defer C.mdb_txn_abort(t.txn)
	return fn(t)
}

// DBI is a named database's handle.
type DBI struct{ dbi C.MDB_dbi }

// OpenDB returns the named database, creating it when create is set (write
// transactions only). Handles are cached once a transaction that opened
// them committed. LMDB requires that a transaction opening a handle end
// before another opens one; the benchmark opens its databases in write
// transactions (which are serialised) or once at Open.
func (t *Txn) OpenDB(name []byte, create bool) (DBI, error) {
	key := string(name)
	t.env.mu.Lock()
	dbi, ok := t.env.dbis[key]
	t.env.mu.Unlock()
	if ok {
		return DBI{dbi}, nil
	}
	if dbi, ok := t.created[key]; ok {
		return DBI{dbi}, nil
	}
	var flags C.uint
	if create {
		flags = C.MDB_CREATE
	}
	cname := C.CString(key)
	defer C.free(unsafe.Pointer(cname))
	if err := check("dbi_open", C.mdb_dbi_open(t.txn, cname, flags, &dbi)); err != nil {
		return DBI{}, err
	}
	if t.write {
		t.created[key] = dbi
	} else {
		// A handle opened by a read transaction is usable after it ends.
		t.env.mu.Lock()
		t.env.dbis[key] = dbi
		t.env.mu.Unlock()
	}
	return DBI{dbi}, nil
}

// packed is a batch of byte strings laid out for the C helpers.
type packed struct {
	buf  []byte
	lens []C.size_t
}

func pack(items [][]byte) packed {
	n := 0
	for _, it := range items {
		n += len(it)
	}
	p := packed{buf: make([]byte, 0, n+1), lens: make([]C.size_t, len(items))}
	for i, it := range items {
		p.buf = append(p.buf, it...)
		p.lens[i] = C.size_t(len(it))
	}
	// A non-empty buffer, so &buf[0] exists even for empty items.
	p.buf = append(p.buf, 0)
	return p
}

func (p packed) ptrs() (*C.char, *C.size_t) {
	var lens *C.size_t
	if len(p.lens) > 0 {
		lens = &p.lens[0]
	}
	return (*C.char)(unsafe.Pointer(&p.buf[0])), lens
}

// PutMany stores keys[i] → vals[i] for every i.
func (t *Txn) PutMany(d DBI, keys, vals [][]byte) error {
	if len(keys) != len(vals) {
		return fmt.Errorf("lmdb: %d keys but %d values", len(keys), len(vals))
	}
	if len(keys) == 0 {
		return nil
	}
	pk, pv := pack(keys), pack(vals)
	kb, kl := pk.ptrs()
	vb, vl := pv.ptrs()
	return check("put", C.rb_put_many(t.txn, d.dbi, kb, kl, vb, vl, C.int(len(keys))))
}

// DelMany deletes keys; missing keys are not an error.
func (t *Txn) DelMany(d DBI, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	pk := pack(keys)
	kb, kl := pk.ptrs()
	return check("del", C.rb_del_many(t.txn, d.dbi, kb, kl, C.int(len(keys))))
}

// GetMany looks up keys and returns how many exist.
func (t *Txn) GetMany(d DBI, keys [][]byte) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	pk := pack(keys)
	kb, kl := pk.ptrs()
	var found C.int
	err := check("get", C.rb_get_many(t.txn, d.dbi, kb, kl, C.int(len(keys)), &found))
	return int(found), err
}

// ScanMany positions a cursor at each of starts and reads up to per pairs
// from there; it returns the pairs read.
func (t *Txn) ScanMany(d DBI, starts [][]byte, per int) (int, error) {
	if len(starts) == 0 {
		return 0, nil
	}
	pk := pack(starts)
	kb, kl := pk.ptrs()
	var pairs C.int
	err := check("scan", C.rb_scan_many(t.txn, d.dbi, kb, kl, C.int(len(starts)), C.int(per), &pairs))
	return int(pairs), err
}

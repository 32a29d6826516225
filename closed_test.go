package rivet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

// An apiCall is one exported method called on an object that is not usable:
// a closed or zero DB, or a transaction (with its buckets and cursors) that
// has ended or never began. want is the error it must return, or nil for a
// method without an error return, which must return its zero or nil result
// instead — and nothing may panic.
type apiCall struct {
	method string
	call   func() (result any, err error)
	want   error // nil: the method has no error return
}

// runAPICalls runs every call, failing on a panic or on a wrong result.
func runAPICalls(t *testing.T, what string, calls []apiCall) {
	t.Helper()
	for _, c := range calls {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: %s panicked: %v", what, c.method, p)
				}
			}()
			res, err := c.call()
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %s returned %v, want %v", what, c.method, err, c.want)
				}
				return
			}
			if err != nil {
				t.Errorf("%s: %s returned error %v", what, c.method, err)
			}
			if !isEmptyResult(res) {
				t.Errorf("%s: %s returned %#v, want an empty result", what, c.method, res)
			}
		}()
	}
}

// isEmptyResult reports whether v is what a method without an error return
// gives on an unusable object: nil, a zero value, an empty key/value pair
// or a closed channel that delivered ErrTxClosed (see Check).
func isEmptyResult(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case [2][]byte:
		return x[0] == nil && x[1] == nil
	case *Bucket:
		return x == nil
	case []byte:
		return x == nil
	}
	rv := reflect.ValueOf(v)
	return rv.IsZero() || (rv.Kind() == reflect.Pointer && rv.IsNil())
}

// requireCovered fails unless calls name every exported method of typ
// (except those in exempt, which are pure accessors of fields that stay
// meaningful), so a method added later cannot escape this test.
func requireCovered(t *testing.T, typ reflect.Type, calls []apiCall, exempt ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, c := range calls {
		have[c.method] = true
	}
	var missing []string
	for i := 0; i < typ.NumMethod(); i++ {
		m := typ.Method(i).Name
		if !have[m] && !slices.Contains(exempt, m) {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%v: methods not exercised on an unusable object: %v", typ, missing)
	}
}

func pair(k, v []byte) (any, error) { return [2][]byte{k, v}, nil }

// dbCalls are the calls on a DB that is closed or was never opened.
func dbCalls(db *DB) []apiCall {
	return []apiCall{
		{"Begin", func() (any, error) { return db.Begin(false) }, rerrors.ErrDatabaseNotOpen},
		{"Begin", func() (any, error) { return db.Begin(true) }, rerrors.ErrDatabaseNotOpen},
		{"Update", func() (any, error) { return nil, db.Update(func(*Tx) error { return nil }) }, rerrors.ErrDatabaseNotOpen},
		{"View", func() (any, error) { return nil, db.View(func(*Tx) error { return nil }) }, rerrors.ErrDatabaseNotOpen},
		{"Batch", func() (any, error) { return nil, db.Batch(func(*Tx) error { return nil }) }, rerrors.ErrDatabaseNotOpen},
		{"Sync", func() (any, error) { return nil, db.Sync() }, rerrors.ErrDatabaseNotOpen},
		{"Compact", func() (any, error) { return db.Compact(context.Background()) }, rerrors.ErrDatabaseNotOpen},
		{"CompactWith", func() (any, error) { return db.CompactWith(context.Background(), nil) }, rerrors.ErrDatabaseNotOpen},
		{"Clone", func() (any, error) { return db.Clone(filepath.Join(db.Path(), "no-such-dir", "clone"), nil) }, rerrors.ErrDatabaseNotOpen},
		{"Close", func() (any, error) { return nil, db.Close() }, nil},
		{"Info", func() (any, error) {
			if info := db.Info(); info == nil || info.Data != 0 {
				return info, nil
			}
			return nil, nil
		}, nil},
		{"Stats", func() (any, error) { s := db.Stats(); return s.OpenTxN, nil }, nil},
	}
}

// TestClosedDBMethods calls every exported method of DB on a closed DB and
// on a zero DB{} (bbolt's TestDB_BeginRW_Closed, TestDB_Begin_
// ErrDatabaseNotOpen and TestDB_Update_Closed): the transaction methods
// return ErrDatabaseNotOpen, Close returns nil, nothing panics.
func TestClosedDBMethods(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	calls := dbCalls(db)
	requireCovered(t, reflect.TypeOf(db), calls, "GoString", "String", "IsReadOnly", "Logger", "Path", "Recovery")
	runAPICalls(t, "closed DB", calls)
	runAPICalls(t, "zero DB", dbCalls(&DB{}))
	// A closed read-only DB refuses writes as read-only first, as bbolt's.
	ro, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = ro.Close()
	if _, err := ro.Begin(true); !errors.Is(err, rerrors.ErrDatabaseReadOnly) {
		t.Errorf("Begin(true) on a closed read-only DB: %v", err)
	}
	if _, err := ro.Begin(false); !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
		t.Errorf("Begin(false) on a closed read-only DB: %v", err)
	}
	// The accessors exempted above do not panic on a zero DB either.
	zero := &DB{}
	_, _, _, _, _, _ = zero.GoString(), zero.String(), zero.IsReadOnly(), zero.Logger(), zero.Path(), zero.Recovery()
}

// endedTx is a transaction that has ended, with a bucket, a nested bucket
// and cursors obtained while it was open.
type endedTx struct {
	name      string
	tx        *Tx
	b, nested *Bucket
	c         *Cursor
	writable  bool
}

// txCalls are the calls on a transaction that has ended (or a zero Tx).
func txCalls(e endedTx, other *Bucket) []apiCall {
	tx := e.tx
	return []apiCall{
		{"Bucket", func() (any, error) { return tx.Bucket([]byte("b")), nil }, nil},
		{"CreateBucket", func() (any, error) { return tx.CreateBucket([]byte("new")) }, rerrors.ErrTxClosed},
		{"CreateBucketIfNotExists", func() (any, error) { return tx.CreateBucketIfNotExists([]byte("b")) }, rerrors.ErrTxClosed},
		{"DeleteBucket", func() (any, error) { return nil, tx.DeleteBucket([]byte("b")) }, rerrors.ErrTxClosed},
		{"MoveBucket", func() (any, error) { return nil, tx.MoveBucket([]byte("nested"), e.b, nil) }, rerrors.ErrTxClosed},
		{"MoveBucket", func() (any, error) { return nil, tx.MoveBucket([]byte("nested"), nil, other) }, rerrors.ErrTxClosed},
		{"ForEach", func() (any, error) { return nil, tx.ForEach(func([]byte, *Bucket) error { return nil }) }, rerrors.ErrTxClosed},
		{"Cursor", func() (any, error) { return pair(tx.Cursor().First()) }, nil},
		{"Commit", func() (any, error) { return nil, tx.Commit() }, rerrors.ErrTxClosed},
		{"Rollback", func() (any, error) { return nil, tx.Rollback() }, rerrors.ErrTxClosed},
		{"Check", func() (any, error) {
			var errs []error
			for err := range tx.Check() {
				errs = append(errs, err)
			}
			return nil, errors.Join(errs...)
		}, rerrors.ErrTxClosed},
		{"WriteTo", func() (any, error) { return tx.WriteTo(io.Discard) }, rerrors.ErrTxClosed},
		{"Copy", func() (any, error) { return nil, tx.Copy(io.Discard) }, rerrors.ErrTxClosed},
		{"CopyFile", func() (any, error) {
			return nil, tx.CopyFile(filepath.Join(endedCopyDir, fmt.Sprintf("copy-%s", e.name)), 0o600)
		}, rerrors.ErrTxClosed},
		{"Inspect", func() (any, error) {
			if s := tx.Inspect(); s.KeyN != 0 || len(s.Children) != 0 {
				return s, nil
			}
			return nil, nil
		}, nil},
		{"Page", func() (any, error) { return tx.Page(2) }, rerrors.ErrTxClosed},
		{"WalkPages", func() (any, error) { return nil, tx.WalkPages(func(PageUse) error { return nil }) }, rerrors.ErrTxClosed},
		{"DB", func() (any, error) { return tx.DB(), nil }, nil},
		{"Err", func() (any, error) { return nil, tx.Err() }, nil},
	}
}

// bucketCalls are the calls on a bucket of an ended transaction (or a zero
// Bucket).
func bucketCalls(b, other *Bucket) []apiCall {
	return []apiCall{
		{"Bucket", func() (any, error) { return b.Bucket([]byte("nested")), nil }, nil},
		{"CreateBucket", func() (any, error) { return b.CreateBucket([]byte("new")) }, rerrors.ErrTxClosed},
		{"CreateBucketIfNotExists", func() (any, error) { return b.CreateBucketIfNotExists([]byte("nested")) }, rerrors.ErrTxClosed},
		{"DeleteBucket", func() (any, error) { return nil, b.DeleteBucket([]byte("nested")) }, rerrors.ErrTxClosed},
		{"MoveBucket", func() (any, error) { return nil, b.MoveBucket([]byte("nested"), other) }, rerrors.ErrTxClosed},
		{"MoveBucket", func() (any, error) { return nil, other.MoveBucket([]byte("x"), b) }, rerrors.ErrTxClosed},
		{"Get", func() (any, error) { return b.Get([]byte("k")), nil }, nil},
		{"Put", func() (any, error) { return nil, b.Put([]byte("k"), []byte("v")) }, rerrors.ErrTxClosed},
		{"Delete", func() (any, error) { return nil, b.Delete([]byte("k")) }, rerrors.ErrTxClosed},
		{"NextSequence", func() (any, error) { return b.NextSequence() }, rerrors.ErrTxClosed},
		{"SetSequence", func() (any, error) { return nil, b.SetSequence(9) }, rerrors.ErrTxClosed},
		{"ForEach", func() (any, error) { return nil, b.ForEach(func(k, v []byte) error { return nil }) }, rerrors.ErrTxClosed},
		{"ForEachBucket", func() (any, error) { return nil, b.ForEachBucket(func(k []byte) error { return nil }) }, rerrors.ErrTxClosed},
		{"Cursor", func() (any, error) { return pair(b.Cursor().Last()) }, nil},
		{"Stats", func() (any, error) { return b.Stats(), nil }, nil},
		{"Inspect", func() (any, error) {
			if s := b.Inspect(); s.KeyN != 0 || len(s.Children) != 0 {
				return s, nil
			}
			return nil, nil
		}, nil},
	}
}

// cursorCalls are the calls on a cursor of an ended transaction (or a zero
// Cursor).
func cursorCalls(c *Cursor) []apiCall {
	return []apiCall{
		{"First", func() (any, error) { return pair(c.First()) }, nil},
		{"Last", func() (any, error) { return pair(c.Last()) }, nil},
		{"Next", func() (any, error) { return pair(c.Next()) }, nil},
		{"Prev", func() (any, error) { return pair(c.Prev()) }, nil},
		{"Seek", func() (any, error) { return pair(c.Seek([]byte("k"))) }, nil},
		{"Delete", func() (any, error) { return nil, c.Delete() }, rerrors.ErrTxClosed},
	}
}

// endedCopyDir is where CopyFile calls on ended transactions would write (they
// must not).
var endedCopyDir string

// TestEndedTxMethods calls every exported method of Tx, Bucket and Cursor
// on transactions that ended every way — a read transaction rolled back, a
// write transaction committed, one rolled back, a managed one after Update
// and View returned, one whose DB has since closed — and on zero values:
// methods with an error return give bbolt's error (ErrTxClosed), the
// others nil or zero, and nothing panics or reads the released snapshot.
func TestEndedTxMethods(t *testing.T) {
	db := openTestDB(t, nil)
	endedCopyDir = t.TempDir()
	setup := func(tx *Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("b"))
		if err != nil {
			return err
		}
		if _, err := b.CreateBucketIfNotExists([]byte("nested")); err != nil {
			return err
		}
		return b.Put([]byte("k"), bytes.Repeat([]byte("v"), 3000)) // a blob
	}
	if err := db.Update(setup); err != nil {
		t.Fatal(err)
	}
	capture := func(name string, tx *Tx) endedTx {
		b := tx.Bucket([]byte("b"))
		c := b.Cursor()
		c.First()
		return endedTx{name: name, tx: tx, b: b, nested: b.Bucket([]byte("nested")), c: c, writable: tx.Writable()}
	}
	var ended []endedTx
	for _, how := range []string{"read, rolled back", "write, committed", "write, rolled back"} {
		tx, err := db.Begin(how != "read, rolled back")
		if err != nil {
			t.Fatal(err)
		}
		e := capture(how, tx)
		if how == "write, committed" {
			if err := e.b.Put([]byte("k2"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		} else if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		ended = append(ended, e)
	}
	var managed endedTx
	if err := db.Update(func(tx *Tx) error { managed = capture("Update, returned", tx); return nil }); err != nil {
		t.Fatal(err)
	}
	ended = append(ended, managed)
	if err := db.View(func(tx *Tx) error { managed = capture("View, returned", tx); return nil }); err != nil {
		t.Fatal(err)
	}
	ended = append(ended, managed)

	// A live write transaction's bucket, as the other side of MoveBucket.
	live, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	other := live.Bucket([]byte("b"))
	for _, e := range ended {
		txc := txCalls(e, other)
		bc := append(bucketCalls(e.b, other), bucketCalls(e.nested, other)...)
		cc := cursorCalls(e.c)
		requireCovered(t, reflect.TypeOf(e.tx), txc, "ID", "Size", "Writable", "Stats", "OnCommit")
		requireCovered(t, reflect.TypeOf(e.b), bc, "Tx", "Writable", "Root", "Sequence")
		requireCovered(t, reflect.TypeOf(e.c), cc, "Bucket")
		runAPICalls(t, e.name+": Tx", txc)
		runAPICalls(t, e.name+": Bucket", bc)
		runAPICalls(t, e.name+": Cursor", cc)
		// The accessors stay meaningful after the end.
		if e.tx.Writable() != e.writable || e.b.Writable() != e.writable || e.tx.Size() == 0 || e.tx.ID() == 0 || e.c.Bucket() != e.b {
			t.Errorf("%s: accessors changed after the end: writable %t/%t size %d id %d", e.name, e.tx.Writable(), e.b.Writable(), e.tx.Size(), e.tx.ID())
		}
		_ = e.tx.Stats()
		e.tx.OnCommit(func() { t.Errorf("%s: OnCommit handler of an ended transaction ran", e.name) })
	}
	if err := live.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A zero Tx, Bucket and Cursor (never began) behave the same.
	zero := endedTx{name: "zero", tx: &Tx{}, b: &Bucket{}, nested: &Bucket{}, c: &Cursor{}}
	runAPICalls(t, "zero Tx", txCalls(zero, other))
	runAPICalls(t, "zero Bucket", bucketCalls(zero.b, zero.nested))
	runAPICalls(t, "zero Cursor", cursorCalls(zero.c))
	if _, err := (&Tx{}).Stats(), (&Tx{}).Err(); err != nil || (&Tx{}).Size() != 0 || (&Bucket{}).Root() != 0 || (&Bucket{}).Writable() {
		t.Errorf("zero Tx/Bucket accessors")
	}

	// After the DB closed, the transactions' memory maps are gone: the
	// methods must still not touch them.
	if err := db.Update(setup); err != nil {
		t.Fatal(err)
	}
	var afterClose endedTx
	if err := db.View(func(tx *Tx) error { afterClose = capture("View, DB closed since", tx); return nil }); err != nil {
		t.Fatal(err)
	}
	db.checkAndClose()
	runAPICalls(t, afterClose.name+": Tx", txCalls(afterClose, &Bucket{}))
	runAPICalls(t, afterClose.name+": Bucket", bucketCalls(afterClose.b, &Bucket{}))
	runAPICalls(t, afterClose.name+": Cursor", cursorCalls(afterClose.c))
	if names, _ := filepath.Glob(filepath.Join(endedCopyDir, "copy-*")); len(names) > 0 {
		t.Errorf("CopyFile of an ended transaction created %v", names)
	}
}

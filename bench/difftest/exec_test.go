package difftest

import (
	"errors"
	"fmt"
	"strings"

	rerrors "github.com/rivetkv/rivet/errors"
	berrors "go.etcd.io/bbolt/errors"
)

// world is one engine's side of a run: its database and the handles the
// calls so far made, by the ID of the call that made each (as the other
// side's).
type world struct {
	eng      engine
	path     string
	pageSize int
	db       DB
	txs      map[int]Tx
	buckets  map[int]Bucket
	cursors  map[int]Cursor
	// hooks counts the OnCommit handlers that ran.
	hooks int
}

// result is one side's answer to a call.
type result struct {
	// out is the answer as compared: values rendered, errors by class.
	out string
	// err is the class of the error the call returned ("nil"), or "" for a
	// call without an error result.
	err string
	// detail adds what is not compared (error messages, panic values).
	detail   string
	panicked bool
	// The handle the call made, if its kind makes one (nil if it failed).
	tx     Tx
	bucket Bucket
	cursor Cursor
}

func (r result) String() string {
	if r.detail != "" {
		return r.out + " [" + r.detail + "]"
	}
	return r.out
}

// Errors the functions passed to the API return.
var (
	errFn   = errors.New("difftest: function error")
	errStop = errors.New("difftest: stop iterating")
)

// errClasses pairs bbolt's and rivet's error values: an error is compared
// by the first class it matches on either side.
var errClasses = []struct {
	name              string
	boltErr, rivetErr error
}{
	{"ErrDatabaseNotOpen", berrors.ErrDatabaseNotOpen, rerrors.ErrDatabaseNotOpen},
	{"ErrInvalid", berrors.ErrInvalid, rerrors.ErrInvalid},
	{"ErrVersionMismatch", berrors.ErrVersionMismatch, rerrors.ErrVersionMismatch},
	{"ErrChecksum", berrors.ErrChecksum, rerrors.ErrChecksum},
	{"ErrTimeout", berrors.ErrTimeout, rerrors.ErrTimeout},
	{"ErrTxNotWritable", berrors.ErrTxNotWritable, rerrors.ErrTxNotWritable},
	{"ErrTxClosed", berrors.ErrTxClosed, rerrors.ErrTxClosed},
	{"ErrDatabaseReadOnly", berrors.ErrDatabaseReadOnly, rerrors.ErrDatabaseReadOnly},
	{"ErrBucketNotFound", berrors.ErrBucketNotFound, rerrors.ErrBucketNotFound},
	{"ErrBucketExists", berrors.ErrBucketExists, rerrors.ErrBucketExists},
	{"ErrBucketNameRequired", berrors.ErrBucketNameRequired, rerrors.ErrBucketNameRequired},
	{"ErrKeyRequired", berrors.ErrKeyRequired, rerrors.ErrKeyRequired},
	{"ErrKeyTooLarge", berrors.ErrKeyTooLarge, rerrors.ErrKeyTooLarge},
	{"ErrValueTooLarge", berrors.ErrValueTooLarge, rerrors.ErrValueTooLarge},
	{"ErrMaxSizeReached", berrors.ErrMaxSizeReached, rerrors.ErrMaxSizeReached},
	{"ErrIncompatibleValue", berrors.ErrIncompatibleValue, rerrors.ErrIncompatibleValue},
	{"ErrSameBuckets", berrors.ErrSameBuckets, rerrors.ErrSameBuckets},
	{"ErrDifferentDB", berrors.ErrDifferentDB, rerrors.ErrDifferentDB},
	{"errFn", errFn, errFn},
	{"errStop", errStop, errStop},
}

// classify names err's class; an error of neither engine's list is
// "error(other)", its message kept for the detail.
func classify(err error) string {
	if err == nil {
		return "nil"
	}
	for _, c := range errClasses {
		if errors.Is(err, c.boltErr) || errors.Is(err, c.rivetErr) {
			return c.name
		}
	}
	return "error(other)"
}

// errDetail is the message of an error classify could not name.
func errDetail(err error) string {
	if err != nil && classify(err) == "error(other)" {
		return err.Error()
	}
	return ""
}

// errResult is the answer of a call that returns err, after what is
// rendered in prefix.
func errResult(prefix string, err error) result {
	c := classify(err)
	out := c
	if prefix != "" {
		out = prefix + " " + c
	}
	return result{out: out, err: c, detail: errDetail(err)}
}

func kvString(k, v []byte) string { return show(k) + "=" + show(v) }

func cursorness(isNil bool) string {
	if isNil {
		return "nil"
	}
	return "cursor"
}

func nilness(isNil bool) string {
	if isNil {
		return "nil"
	}
	return "bucket"
}

// apply makes call o on w. A panic is an answer ("panic"), not a failure
// of the run; w's handle lists grow by the call's handle in any case.
func (w *world) apply(o op) (r result) {
	defer func() {
		if p := recover(); p != nil {
			r = result{out: "panic", detail: fmt.Sprint(p), panicked: true}
		}
		w.keep(o, r)
	}()
	return w.call(o)
}

// keep adds the handle o made (nil if it failed) to w's lists.
func (w *world) keep(o op, r result) {
	switch {
	case o.Kind.makesTx():
		w.txs[o.ID] = r.tx
	case o.Kind.makesBucket():
		w.buckets[o.ID] = r.bucket
	case o.Kind.makesCursor():
		w.cursors[o.ID] = r.cursor
	}
}

func (w *world) bucketArg(i int) Bucket {
	if i < 0 {
		return nil
	}
	return w.buckets[i]
}

func (w *world) call(o op) result {
	switch {
	case o.Kind.onTx():
		return w.callTx(o, w.txs[o.T])
	case o.Kind.onBucket():
		return w.callBucket(o, w.buckets[o.B])
	case o.Kind.onCursor():
		return w.callCursor(o, w.cursors[o.C])
	}
	switch o.Kind {
	case kBegin:
		tx, err := w.db.Begin(o.Flag)
		r := errResult("", err)
		r.tx = tx
		return r
	case kUpdate, kView:
		var kept Tx
		fn := func(tx Tx) error {
			kept = tx
			return runFn(tx, fnKind(o.N), o.Kind == kUpdate)
		}
		var err error
		if o.Kind == kUpdate {
			err = w.db.Update(fn)
		} else {
			err = w.db.View(fn)
		}
		r := errResult("", err)
		r.tx = kept
		return r
	case kReopen:
		return w.reopen(o.Flag)
	}
	panic("difftest: unknown call " + o.Kind.String())
}

// runFn is the function Update and View run.
func runFn(tx Tx, k fnKind, write bool) error {
	switch k {
	case fnWrite, fnError:
		if write {
			b, err := tx.CreateBucketIfNotExists([]byte("a"))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("fn"), []byte("update")); err != nil {
				return err
			}
		} else if b := tx.Bucket([]byte("a")); b != nil {
			_ = b.Get([]byte("fn"))
		}
		if k == fnError {
			return errFn
		}
		return nil
	case fnCommit:
		return tx.Commit()
	case fnRollback:
		return tx.Rollback()
	case fnPanic:
		panic("difftest: function panics")
	}
	return nil
}

// reopen closes the DB, tries it closed, and opens it again.
func (w *world) reopen(readOnly bool) result {
	var outs []string
	err := w.db.Close()
	outs = append(outs, "close="+classify(err))
	_, err = w.db.Begin(false)
	outs = append(outs, "begin(false)="+classify(err))
	_, err = w.db.Begin(true)
	outs = append(outs, "begin(true)="+classify(err))
	err = w.db.Update(func(Tx) error { return nil })
	outs = append(outs, "update="+classify(err))
	err = w.db.View(func(Tx) error { return nil })
	outs = append(outs, "view="+classify(err))
	err = w.db.Close()
	outs = append(outs, "close again="+classify(err))
	db, err := w.eng.open(w.path, readOnly, w.pageSize)
	outs = append(outs, "open="+classify(err))
	if err != nil {
		// The run cannot go on; the comparison reports it.
		return result{out: strings.Join(outs, " "), detail: err.Error()}
	}
	w.db = db
	return result{out: strings.Join(outs, " ")}
}

func (w *world) callTx(o op, tx Tx) result {
	switch o.Kind {
	case kTxBucket:
		b := tx.Bucket(o.Key)
		return result{out: nilness(b == nil), bucket: b}
	case kTxCreateBucket, kTxCreateBucketIfNotExists:
		var b Bucket
		var err error
		if o.Kind == kTxCreateBucket {
			b, err = tx.CreateBucket(o.Key)
		} else {
			b, err = tx.CreateBucketIfNotExists(o.Key)
		}
		r := errResult(nilness(b == nil), err)
		r.bucket = b
		return r
	case kTxDeleteBucket:
		err := tx.DeleteBucket(o.Key)
		return errResult("", err)
	case kTxMoveBucket:
		err := tx.MoveBucket(o.Key, w.bucketArg(o.B), w.bucketArg(o.B2))
		return errResult("", err)
	case kTxForEach:
		var seen []string
		err := tx.ForEach(func(name []byte, b Bucket) error {
			seen = append(seen, show(name)+":"+nilness(b == nil))
			if o.N > 0 && uint64(len(seen)) >= o.N {
				return errStop
			}
			return nil
		})
		return errResult(fmt.Sprint(seen), err)
	case kTxCursor:
		c := tx.Cursor()
		return result{out: cursorness(c == nil), cursor: c}
	case kTxRoot:
		b := tx.Cursor().Bucket()
		return result{out: nilness(b == nil), bucket: b}
	case kTxCommit:
		before := w.hooks
		err := tx.Commit()
		r := errResult("", err)
		r.out += fmt.Sprintf(" hooks=%d", w.hooks-before)
		return r
	case kTxRollback:
		err := tx.Rollback()
		return errResult("", err)
	case kTxWritable:
		return result{out: fmt.Sprint(tx.Writable())}
	case kTxOnCommit:
		tx.OnCommit(func() { w.hooks++ })
		return result{out: "ok"}
	}
	panic("difftest: unknown call " + o.Kind.String())
}

func (w *world) callBucket(o op, b Bucket) result {
	switch o.Kind {
	case kBucket:
		c := b.Bucket(o.Key)
		return result{out: nilness(c == nil), bucket: c}
	case kCreateBucket, kCreateBucketIfNotExists:
		var c Bucket
		var err error
		if o.Kind == kCreateBucket {
			c, err = b.CreateBucket(o.Key)
		} else {
			c, err = b.CreateBucketIfNotExists(o.Key)
		}
		r := errResult(nilness(c == nil), err)
		r.bucket = c
		return r
	case kDeleteBucket:
		err := b.DeleteBucket(o.Key)
		return errResult("", err)
	case kMoveBucket:
		err := b.MoveBucket(o.Key, w.bucketArg(o.B2))
		return errResult("", err)
	case kGet:
		return result{out: show(b.Get(o.Key))}
	case kPut:
		err := b.Put(o.Key, o.Val)
		return errResult("", err)
	case kPutMany:
		n, err := putMany(b, o)
		return errResult(fmt.Sprint(n), err)
	case kDelete:
		err := b.Delete(o.Key)
		return errResult("", err)
	case kSequence:
		return result{out: fmt.Sprint(b.Sequence())}
	case kSetSequence:
		err := b.SetSequence(o.N)
		return errResult("", err)
	case kNextSequence:
		n, err := b.NextSequence()
		return errResult(fmt.Sprint(n), err)
	case kForEach:
		var seen []string
		err := b.ForEach(func(k, v []byte) error {
			seen = append(seen, kvString(k, v))
			if o.N > 0 && uint64(len(seen)) >= o.N {
				return errStop
			}
			return nil
		})
		return errResult(fmt.Sprint(seen), err)
	case kForEachBucket:
		var seen []string
		err := b.ForEachBucket(func(k []byte) error {
			seen = append(seen, show(k))
			if o.N > 0 && uint64(len(seen)) >= o.N {
				return errStop
			}
			return nil
		})
		return errResult(fmt.Sprint(seen), err)
	case kStats:
		s := b.Stats()
		return result{out: fmt.Sprintf("keys=%d buckets=%d", s.KeyN, s.BucketN)}
	case kCursor:
		c := b.Cursor()
		return result{out: cursorness(c == nil), cursor: c}
	case kWritable:
		return result{out: fmt.Sprint(b.Writable())}
	}
	panic("difftest: unknown call " + o.Kind.String())
}

func (w *world) callCursor(o op, c Cursor) result {
	var k, v []byte
	switch o.Kind {
	case kFirst:
		k, v = c.First()
	case kLast:
		k, v = c.Last()
	case kNext:
		k, v = c.Next()
	case kPrev:
		k, v = c.Prev()
	case kSeek:
		k, v = c.Seek(o.Key)
	case kCursorDelete:
		err := c.Delete()
		return errResult("", err)
	default:
		panic("difftest: unknown call " + o.Kind.String())
	}
	return result{out: kvString(k, v)}
}

// putMany makes the Puts of a kPutMany call: N keys "k%03d" from a
// position of the key pool that Key's first byte chooses, in order if
// Flag, else scattered; values are slices of Val. It returns how many
// Puts succeeded before the first error.
func putMany(b Bucket, o op) (int, error) {
	start := 0
	if len(o.Key) > 0 {
		start = int(o.Key[0])
	}
	for i := range int(o.N) {
		k := start + i
		if !o.Flag {
			k = start + i*37
		}
		key := fmt.Appendf(nil, "k%03d", k%keyPool)
		v := o.Val[i%len(o.Val):]
		if err := b.Put(key, v); err != nil {
			return i, err
		}
	}
	return int(o.N), nil
}

//go:build kvbench

// Package rivet adds rivet to the kvbench harness (github.com/tamnd/kvbench)
// as two engines that differ from the harness's bbolt adapter only in
// Options.Durability:
//
//   - rivet-none: Durability None. Commits are written to the file but not
//     flushed; DB.Sync (the harness's Flush) and Close flush.
//   - rivet-periodic: Durability Periodic(100ms). Commits are written to the
//     file and a sync point runs every 100 ms.
//   - rivet-none-batch: Durability None, and each Put and Delete made
//     through DB.Batch with DB.MaxBatchDelay 0 instead of its own Update:
//     concurrent clients' writes share transactions, as pebble's commit
//     pipeline groups concurrent writers' batches. A call returns once
//     the transaction holding it has committed, as with Update.
//
// rivet with its default durability (Full, a flush per commit) is measured
// through the harness's own bbolt adapter, built with go.etcd.io/bbolt
// replaced by rivet's compat/bbolt module, so it needs no adapter here.
//
// When the harness asks for FULL durability (a flush per commit), both
// engines open with Durability Full, the mode that contract names.
//
// This file is not part of rivet's build: the build tag keeps it out, and
// bench/kvbench/run.sh copies it into the harness's adapters/rivet and
// builds the harness with -tags kvbench.
package rivet

import (
	"context"
	"path/filepath"
	"time"

	"github.com/rivetkv/rivet"
	"github.com/tamnd/kvbench/engine"
)

// version names the rivet commit under test; run.sh sets it with -ldflags -X.
var version = "unknown"

// periodicInterval is the sync-point interval of rivet-periodic.
const periodicInterval = 100 * time.Millisecond

func init() {
	engine.Register("rivet-none", func() engine.Engine {
		return &eng{name: "rivet-none", durability: rivet.None}
	})
	engine.Register("rivet-periodic", func() engine.Engine {
		return &eng{name: "rivet-periodic", durability: rivet.Periodic(periodicInterval)}
	})
	engine.Register("rivet-none-batch", func() engine.Engine {
		return &eng{name: "rivet-none-batch", durability: rivet.None, batch: true}
	})
}

// bucket is the one bucket every key lives in, as in the harness's bbolt
// adapter, so the two adapters do the same work per operation.
var bucket = []byte("kvbench")

type eng struct {
	name       string
	durability rivet.Durability
	// batch sends single writes through DB.Batch without a gathering
	// delay rather than each through its own Update.
	batch bool
	db    *rivet.DB
}

// write runs fn in a write transaction: its own Update, or with batch a
// Batch call whose transaction it may share with concurrent calls (fn may
// then run more than once, which a Put or Delete allows).
func (e *eng) write(fn func(*rivet.Tx) error) error {
	if e.batch {
		return e.db.Batch(fn)
	}
	return e.db.Update(fn)
}

func (e *eng) Meta() engine.Meta {
	return engine.Meta{
		Name: e.name, Family: engine.FamilyCOWBTree, Mode: engine.ModeInProc,
		Version: version,
		Caps: engine.Capabilities{
			Ordered: true, AtomicBatch: true, Durable: true, Transactions: true,
			OnlineBackup: true, SingleFile: true, PureNoCgo: true,
		},
		Asterisks: []engine.Asterisk{{
			Code: "default-durability",
			Note: "DEFAULT opens with Durability " + e.durability.String() +
				": crash-consistent, a crash loses the commits since the last sync point; FULL opens with Durability Full (a flush per commit)",
		}},
	}
}

func (e *eng) Open(_ context.Context, cfg engine.Config) error {
	opts := &rivet.Options{Durability: e.durability}
	if cfg.Synchronous == "FULL" {
		opts.Durability = rivet.Full
	}
	db, err := rivet.Open(filepath.Join(cfg.Dir, "data.db"), 0o644, opts)
	if err != nil {
		return err
	}
	e.db = db
	if e.batch {
		db.MaxBatchDelay = 0
	}
	return db.Update(func(tx *rivet.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	})
}

func (e *eng) Get(_ context.Context, key []byte) ([]byte, bool, error) {
	var out []byte
	var found bool
	err := e.db.View(func(tx *rivet.Tx) error {
		// The value lives in the mapped file only while the transaction is open.
		if v := tx.Bucket(bucket).Get(key); v != nil {
			out = append([]byte(nil), v...)
			found = true
		}
		return nil
	})
	return out, found, err
}

func (e *eng) Put(_ context.Context, key, value []byte) error {
	return e.write(func(tx *rivet.Tx) error {
		return tx.Bucket(bucket).Put(key, value)
	})
}

func (e *eng) Delete(_ context.Context, key []byte) error {
	return e.write(func(tx *rivet.Tx) error {
		return tx.Bucket(bucket).Delete(key)
	})
}

func (e *eng) NewBatch() engine.Batch { return &batch{e: e} }

func (e *eng) Scan(_ context.Context, start []byte) (engine.Iterator, error) {
	tx, err := e.db.Begin(false)
	if err != nil {
		return nil, err
	}
	return &iter{tx: tx, c: tx.Bucket(bucket).Cursor(), start: start, first: true}, nil
}

func (e *eng) Flush(_ context.Context) error { return e.db.Sync() }

func (e *eng) Stats(_ context.Context) (engine.Stats, error) {
	s := engine.UnknownStats()
	s.NumFiles = 1
	return s, nil
}

func (e *eng) Close(_ context.Context) error {
	if e.db != nil {
		return e.db.Close()
	}
	return nil
}

// batch collects writes and applies them in one write transaction.
type batch struct {
	e   *eng
	ops []op
}

type op struct {
	del  bool
	k, v []byte
}

func (b *batch) Put(k, v []byte) {
	b.ops = append(b.ops, op{k: append([]byte(nil), k...), v: append([]byte(nil), v...)})
}

func (b *batch) Delete(k []byte) { b.ops = append(b.ops, op{del: true, k: append([]byte(nil), k...)}) }

func (b *batch) Len() int { return len(b.ops) }

func (b *batch) Commit(_ context.Context) error {
	err := b.e.db.Update(func(tx *rivet.Tx) error {
		bk := tx.Bucket(bucket)
		for _, o := range b.ops {
			var err error
			if o.del {
				err = bk.Delete(o.k)
			} else {
				err = bk.Put(o.k, o.v)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	b.ops = nil
	return err
}

// iter walks a read transaction's cursor from start; Close ends the
// transaction.
type iter struct {
	tx    *rivet.Tx
	c     *rivet.Cursor
	start []byte
	first bool
	k, v  []byte
}

func (i *iter) Next() bool {
	if i.first {
		i.first = false
		i.k, i.v = i.c.Seek(i.start)
	} else {
		i.k, i.v = i.c.Next()
	}
	return i.k != nil
}

func (i *iter) Key() []byte   { return i.k }
func (i *iter) Value() []byte { return i.v }
func (i *iter) Err() error    { return nil }
func (i *iter) Close() error  { return i.tx.Rollback() }

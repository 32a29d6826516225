package rivet

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Batch runs fn as part of a batch: calls from several goroutines are
// gathered (up to DB.MaxBatchSize calls, or DB.MaxBatchDelay) and run in one
// write transaction, so they share one commit. Each call reads both fields,
// as bbolt's does, so changes to them apply to the next call. It has bbolt's
// semantics: if one fn returns an error, the batch is retried without it
// and that fn is then run alone, so fn may run more than once and must be
// idempotent; the error fn returns alone is Batch's error.
//
// Concurrent Update calls share flushes too (group commit); Batch is kept
// for programs written for bbolt.
func (db *DB) Batch(fn func(*Tx) error) error {
	errCh := make(chan error, 1)
	db.batchMu.Lock()
	if db.batch == nil || len(db.batch.calls) >= db.MaxBatchSize {
		db.batch = &batch{db: db}
		db.batch.timer = time.AfterFunc(db.MaxBatchDelay, db.batch.trigger)
	}
	b := db.batch
	b.calls = append(b.calls, batchCall{fn: fn, err: errCh})
	if len(b.calls) >= db.MaxBatchSize {
		go b.trigger()
	}
	db.batchMu.Unlock()

	err := <-errCh
	if errors.Is(err, errTrySolo) {
		err = db.Update(fn)
	}
	return err
}

var errTrySolo = errors.New("rivet: batch function returned an error and should be re-run solo")

type batchCall struct {
	fn  func(*Tx) error
	err chan<- error
}

type batch struct {
	db    *DB
	timer *time.Timer
	once  sync.Once
	calls []batchCall
}

func (b *batch) trigger() { b.once.Do(b.run) }

func (b *batch) run() {
	db := b.db
	db.batchMu.Lock()
	b.timer.Stop()
	if db.batch == b {
		db.batch = nil
	}
	db.batchMu.Unlock()

	for len(b.calls) > 0 {
		failed := -1
		err := db.Update(func(tx *Tx) error {
			for i, c := range b.calls {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			// Take the failing call out, tell it to run alone, retry the rest.
			c := b.calls[failed]
			b.calls[failed] = b.calls[len(b.calls)-1]
			b.calls = b.calls[:len(b.calls)-1]
			c.err <- errTrySolo
			continue
		}
		for _, c := range b.calls {
			c.err <- err
		}
		return
	}
}

// callSafely runs fn, turning a panic into an error so one bad call cannot
// take the batch (and the goroutines waiting on it) down.
func callSafely(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("rivet: batch function panicked: %v", p)
		}
	}()
	return fn(tx)
}

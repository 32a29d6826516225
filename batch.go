package rivet

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Batch runs fn as part of a batch: calls from several goroutines are
// gathered and run in one write transaction, so they share one commit. It
// has bbolt's semantics: if one fn returns an error, the batch is retried
// without it and that fn is then run alone, so fn may run more than once
// and must be idempotent; the error fn returns alone is Batch's error.
//
// How calls are gathered depends on DB.MaxBatchDelay, which each call
// reads, as it reads DB.MaxBatchSize:
//
//   - Above zero (the default), as in bbolt: a batch runs once it holds
//     MaxBatchSize calls or MaxBatchDelay after its first call, whichever
//     comes first.
//   - Zero or below, rivet's own: a call made while no batch runs starts
//     one at once; calls made while a batch runs gather into the next, up
//     to MaxBatchSize calls a batch, which starts as soon as the running
//     one ends. Batches then grow with the load, and a lone call does not
//     wait. (bbolt runs each call alone there.)
//
// Concurrent Update calls share flushes too (group commit); Batch is kept
// for programs written for bbolt.
func (db *DB) Batch(fn func(*Tx) error) error {
	errCh := make(chan error, 1)
	call := batchCall{fn: fn, err: errCh}
	db.batchMu.Lock()
	if db.MaxBatchDelay <= 0 {
		lead := db.queueBatchCall(call)
		db.batchMu.Unlock()
		if lead != nil {
			lead.run()
		}
	} else {
		if db.batch == nil || len(db.batch.calls) >= db.MaxBatchSize {
			db.batch = &batch{db: db}
			db.batch.timer = time.AfterFunc(db.MaxBatchDelay, db.batch.trigger)
		}
		b := db.batch
		b.calls = append(b.calls, call)
		if len(b.calls) >= db.MaxBatchSize {
			go b.trigger()
		}
		db.batchMu.Unlock()
	}

	err := <-errCh
	if errors.Is(err, errTrySolo) {
		err = db.Update(fn)
	}
	return err
}

// queueBatchCall adds call to the last batch waiting to run, or to a new
// one if that is full or none waits. If no batch is running, the caller
// is to run the oldest one at once: queueBatchCall returns it. The caller
// holds batchMu.
func (db *DB) queueBatchCall(call batchCall) *batch {
	n := len(db.batches)
	if n == 0 || len(db.batches[n-1].calls) >= db.MaxBatchSize {
		db.batches = append(db.batches, &batch{db: db, queued: true})
		n++
	}
	db.batches[n-1].calls = append(db.batches[n-1].calls, call)
	if db.batchRunning {
		return nil
	}
	// Invariant: no batch waits while none runs, so the queue holds only
	// the batch this call joined.
	db.batchRunning = true
	return db.popBatch()
}

// popBatch takes the oldest waiting batch off the queue. The caller holds
// batchMu and the queue is not empty.
func (db *DB) popBatch() *batch {
	b := db.batches[0]
	db.batches[0] = nil
	db.batches = db.batches[1:]
	if len(db.batches) == 0 {
		db.batches = db.batches[:0:0]
	}
	return b
}

var errTrySolo = errors.New("rivet: batch function returned an error and should be re-run solo")

type batchCall struct {
	fn  func(*Tx) error
	err chan<- error
}

// batch is a group of Batch calls that run in one transaction. A batch
// with a timer runs when it fires or the batch is full (trigger); a
// queued one when the batch before it in db.batches has run.
type batch struct {
	db     *DB
	timer  *time.Timer
	once   sync.Once
	queued bool
	calls  []batchCall
}

func (b *batch) trigger() { b.once.Do(b.run) }

// run runs the batch and answers its calls. A queued batch starts the
// next waiting one, in a goroutine of its own, once its functions have
// run and it is about to commit: that batch then waits for the writer
// lock, which a commit lets go of before its flush, so consecutive
// batches share flushes as concurrent Updates do.
func (b *batch) run() {
	db := b.db
	if !b.queued {
		db.batchMu.Lock()
		b.timer.Stop()
		if db.batch == b {
			db.batch = nil
		}
		db.batchMu.Unlock()
	}
	handedOn := !b.queued
	handOn := func() {
		if !handedOn {
			handedOn = true
			db.startNextBatch()
		}
	}
	for len(b.calls) > 0 {
		failed := -1
		err := db.update(func(tx *Tx) error {
			for i, c := range b.calls {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		}, handOn)
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
		break
	}
	handOn()
}

// startNextBatch starts the oldest waiting batch in a goroutine of its
// own, or, if none waits, ends the turn of queued batches: the next call
// starts one at once.
func (db *DB) startNextBatch() {
	db.batchMu.Lock()
	if len(db.batches) == 0 {
		db.batchRunning = false
		db.batchMu.Unlock()
		return
	}
	next := db.popBatch()
	db.batchMu.Unlock()
	go next.run()
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

package main

import (
	"errors"
	"fmt"
	"iter"

	"github.com/rivetkv/rivet/inspect"
)

// A file's canonical stream (inspect.Walk): what import and export copy,
// verify compares and salvage rebuilds.

// entry is one element of a file's canonical stream (inspect.Entry).
type entry = inspect.Entry

const (
	kindBucket = inspect.EntryBucket
	kindEnd    = inspect.EntryEnd
	kindKV     = inspect.EntryKV
)

// digestBucket adapts a bucketView to what inspect.Walk reads.
type digestBucket struct{ b bucketView }

func (d digestBucket) ForEach(fn func(k, v []byte, isBucket bool) error) error {
	return d.b.ForEach(fn)
}

func (d digestBucket) Bucket(name []byte) inspect.WalkBucket {
	c := d.b.Bucket(name)
	if c == nil {
		return nil
	}
	return digestBucket{c}
}

func (d digestBucket) Sequence() uint64 { return d.b.Sequence() }

// walkTree calls fn for every entry under the root b, in canonical order
// (inspect.Walk), naming the bucket path and key where a walk fails.
func walkTree(b bucketView, fn func(entry) error) error {
	err := inspect.Walk(digestBucket{b}, fn)
	var we *inspect.WalkError
	if errors.As(err, &we) {
		return fmt.Errorf("bucket %s key %s: %w", pathString(we.Path), formatBytes(we.Key, fmtAuto), we.Err)
	}
	return err
}

// countEntries counts a file's buckets and keys: the progress bar's total.
func countEntries(f fileView) (int64, error) {
	var n int64
	err := f.View(func(root bucketView) error {
		return walkTree(root, func(e entry) error {
			if e.Kind != kindEnd {
				n++
			}
			return nil
		})
	})
	return n, err
}

// entries returns f's canonical stream as an iterator; a walk error (a
// damaged file) comes as the last pair.
func entries(f fileView) iter.Seq2[entry, error] {
	return func(yield func(entry, error) bool) {
		stopped := errors.New("stopped")
		err := f.View(func(root bucketView) error {
			return walkTree(root, func(e entry) error {
				if !yield(e, nil) {
					return stopped
				}
				return nil
			})
		})
		if err != nil && err != stopped {
			yield(entry{}, err)
		}
	}
}

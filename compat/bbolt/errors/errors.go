// Package errors is bbolt's errors package over rivet's: the same error
// values, so errors.Is matches whichever name a program or its
// dependencies use (see the parent package).
package errors

import rerrors "github.com/rivetkv/rivet/errors"

// The errors of bbolt v1.5's errors package, as rivet's.
var (
	ErrDatabaseNotOpen    = rerrors.ErrDatabaseNotOpen
	ErrInvalid            = rerrors.ErrInvalid
	ErrInvalidMapping     = rerrors.ErrInvalidMapping
	ErrVersionMismatch    = rerrors.ErrVersionMismatch
	ErrChecksum           = rerrors.ErrChecksum
	ErrTimeout            = rerrors.ErrTimeout
	ErrTxNotWritable      = rerrors.ErrTxNotWritable
	ErrTxClosed           = rerrors.ErrTxClosed
	ErrDatabaseReadOnly   = rerrors.ErrDatabaseReadOnly
	ErrFreePagesNotLoaded = rerrors.ErrFreePagesNotLoaded
	ErrBucketNotFound     = rerrors.ErrBucketNotFound
	ErrBucketExists       = rerrors.ErrBucketExists
	ErrBucketNameRequired = rerrors.ErrBucketNameRequired
	ErrKeyRequired        = rerrors.ErrKeyRequired
	ErrKeyTooLarge        = rerrors.ErrKeyTooLarge
	ErrValueTooLarge      = rerrors.ErrValueTooLarge
	ErrIncompatibleValue  = rerrors.ErrIncompatibleValue
	ErrSameBuckets        = rerrors.ErrSameBuckets
	ErrDifferentDB        = rerrors.ErrDifferentDB
	ErrMaxSizeReached     = rerrors.ErrMaxSizeReached
)

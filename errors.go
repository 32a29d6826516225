package rivet

import rerrors "github.com/rivetkv/rivet/errors"

// Error values, re-exported from github.com/rivetkv/rivet/errors so code
// written against bbolt's root-package names keeps compiling. Each is the
// same value as its counterpart there, so errors.Is works with either.
//
// Deprecated: use the values in github.com/rivetkv/rivet/errors (as bbolt
// deprecates its root-package names in favour of go.etcd.io/bbolt/errors).
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
)

// ErrCorrupt is the class of every error caused by bytes in the file that
// fail validation; concrete errors are *errors.CorruptError with the page id
// and reason. Not deprecated: it is rivet's own.
var ErrCorrupt = rerrors.ErrCorrupt

// ErrLatched wraps a failed flush; after it the DB refuses writes until
// reopened. A failed write (a full disk) does not latch: the commit is
// rolled back and the DB goes on.
var ErrLatched = rerrors.ErrLatched

// ErrJournalPending is returned by a read-only Open of a file whose commit
// journal holds commits the file does not yet; a writable Open applies them.
var ErrJournalPending = rerrors.ErrJournalPending

// ErrBboltFile is returned by a writable Open of a file written by bbolt,
// unless Options.ConvertBbolt is set: open it read-only, or convert it
// (it also matches ErrInvalid).
var ErrBboltFile = rerrors.ErrBboltFile

var (
	errDifferentDB = rerrors.ErrDifferentDB
	errSameBuckets = rerrors.ErrSameBuckets
)

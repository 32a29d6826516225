// Package errors defines the error values returned by rivet.
//
// The values mirror go.etcd.io/bbolt/errors one for one, so code that compares
// errors with errors.Is keeps working after switching its import path. rivet
// adds a few of its own: ErrCorrupt (the class of every error caused by bad
// bytes on disk), ErrLatched (the DB refuses writes after a failed
// flush) and ErrReadOnlyTx aliases.
package errors

import "errors"

// These errors can be returned when opening or calling methods on a DB.
var (
	// ErrDatabaseNotOpen is returned when a DB instance is accessed before it
	// is opened or after it is closed.
	ErrDatabaseNotOpen = errors.New("database not open")

	// ErrInvalid is returned when neither meta page of a file is valid, which
	// typically means the file is not a rivet database.
	ErrInvalid = errors.New("invalid database")

	// ErrInvalidMapping is returned when the database file cannot be mapped.
	ErrInvalidMapping = errors.New("database isn't correctly mapped")

	// ErrVersionMismatch is returned when the file was written with a format
	// version this build of rivet does not understand.
	ErrVersionMismatch = errors.New("version mismatch")

	// ErrChecksum is returned when a checksum does not match.
	ErrChecksum = errors.New("checksum error")

	// ErrTimeout is returned when a database cannot obtain its file lock
	// within the timeout passed to Open.
	ErrTimeout = errors.New("timeout")
)

// These errors can occur when beginning or committing a Tx.
var (
	// ErrTxNotWritable is returned when performing a write operation on a
	// read-only transaction.
	ErrTxNotWritable = errors.New("tx not writable")

	// ErrTxClosed is returned when committing or rolling back a transaction
	// that has already been committed or rolled back.
	ErrTxClosed = errors.New("tx closed")

	// ErrDatabaseReadOnly is returned when a mutating transaction is started
	// on a read-only database.
	ErrDatabaseReadOnly = errors.New("database is in read-only mode")

	// ErrFreePagesNotLoaded is kept for bbolt compatibility. rivet loads free
	// space lazily and never returns it.
	ErrFreePagesNotLoaded = errors.New("free pages are not pre-loaded")
)

// These errors can occur when putting or deleting a value or a bucket.
var (
	// ErrBucketNotFound is returned when trying to access a bucket that has
	// not been created yet.
	ErrBucketNotFound = errors.New("bucket not found")

	// ErrBucketExists is returned when creating a bucket that already exists.
	ErrBucketExists = errors.New("bucket already exists")

	// ErrBucketNameRequired is returned when creating a bucket with a blank name.
	ErrBucketNameRequired = errors.New("bucket name required")

	// ErrKeyRequired is returned when inserting a zero-length key.
	ErrKeyRequired = errors.New("key required")

	// ErrKeyTooLarge is returned when inserting a key that is larger than MaxKeySize.
	ErrKeyTooLarge = errors.New("key too large")

	// ErrValueTooLarge is returned when inserting a value that is larger than MaxValueSize.
	ErrValueTooLarge = errors.New("value too large")

	// ErrMaxSizeReached is returned when the configured maximum size of the
	// data file is reached.
	ErrMaxSizeReached = errors.New("database reached maximum size")

	// ErrIncompatibleValue is returned when trying to create or delete a
	// bucket on an existing non-bucket key or when trying to create or delete
	// a non-bucket key on an existing bucket key.
	ErrIncompatibleValue = errors.New("incompatible value")

	// ErrSameBuckets is returned when trying to move a sub-bucket between
	// source and target buckets, while source and target buckets are the same.
	ErrSameBuckets = errors.New("the source and target are the same bucket")

	// ErrDifferentDB is returned when trying to move a sub-bucket between
	// source and target buckets in different database files.
	ErrDifferentDB = errors.New("the source and target buckets are in different database files")
)

// rivet's own errors.
var (
	// ErrCorrupt is the class of every error caused by bytes read from the
	// file that fail validation. Concrete errors carry the page id and the
	// reason (see CorruptError) and match ErrCorrupt with errors.Is.
	ErrCorrupt = errors.New("rivet: file is corrupt")

	// ErrLatched is wrapped around a failed flush. Once a flush has failed
	// the DB no longer knows what reached the disk (the page cache may have
	// dropped the pages it could not write), so it refuses every later write
	// until it is closed and reopened. A failed write or file growth (a full
	// disk) does not latch: the commit is rolled back, the durable state is
	// untouched, and later commits succeed once there is room.
	ErrLatched = errors.New("rivet: an earlier flush failed; reopen the database")

	// ErrJournalPending is returned by a read-only Open of a file whose
	// commit journal holds acknowledged commits the file itself does not
	// yet (a crash before the checkpoint that writes them in): only a
	// writable Open can apply them.
	ErrJournalPending = errors.New("rivet: the commit journal holds commits the file does not; open it writable once")

	// ErrBboltFile is returned by a writable Open of a file bbolt (or
	// boltdb) wrote, unless Options.ConvertBbolt asks for it to be
	// converted: rivet writes only its own format. A read-only Open reads
	// such a file; when it cannot (no valid meta, a page size rivet does
	// not read), its error wraps this one with the reason. It also matches
	// ErrInvalid with errors.Is, so code that treats every file that is
	// not a database alike keeps working.
	ErrBboltFile error = &invalidKind{msg: "a bbolt file: rivet writes only its own format; open it read-only, or convert it (Options.ConvertBbolt, or `rivet import`)"}
)

// invalidKind is a distinct error value that is also an ErrInvalid.
type invalidKind struct{ msg string }

func (e *invalidKind) Error() string { return e.msg }

// Is reports whether target is ErrInvalid.
func (e *invalidKind) Is(target error) bool { return target == ErrInvalid }

// CorruptError describes bytes on disk that failed validation. It matches
// ErrCorrupt with errors.Is.
type CorruptError struct {
	// Page is the id of the page that failed validation.
	Page uint64
	// Reason says what was wrong, in words.
	Reason string
}

// Error implements error.
func (e *CorruptError) Error() string {
	return "rivet: corrupt page " + utoa(e.Page) + ": " + e.Reason
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func utoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

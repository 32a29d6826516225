// Package bbolt is bbolt's API over rivet, for a whole build at once.
//
// Changing one import path moves a program's own code to rivet. Its
// dependencies (containerd's metadata store inside buildkit, a raft log
// store inside a service) keep importing go.etcd.io/bbolt, and a *bbolt.DB
// they hand over is not a *rivet.DB. This module declares itself as
// go.etcd.io/bbolt and makes every name of bbolt v1.5's package an alias of
// rivet's, so one replace directive in the main module's go.mod moves the
// program and all its dependencies together:
//
//	replace go.etcd.io/bbolt => <a checkout of rivet>/compat/bbolt
//
// Types are aliases, not copies: a *bbolt.DB from one package is the
// *rivet.DB another expects, and rivet's own additions (Durability,
// Compact, Clone, ...) are there on the same values. Files are rivet's:
// a read-only Open reads a bbolt file as it is, a writable one converts it
// in place with Options.ConvertBbolt and otherwise refuses it with
// ErrBboltFile (or convert it first with `rivet import`). See the README's
// "Moving from bbolt" and its differences from bbolt.
package bbolt

import (
	"os"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
)

// Limits and defaults, as in bbolt.
const (
	// MaxKeySize is the maximum length of a key, in bytes.
	MaxKeySize = rivet.MaxKeySize
	// MaxValueSize is the maximum length of a value, in bytes.
	MaxValueSize = rivet.MaxValueSize
	// DefaultFillPercent is the fill a split leaves in the left page.
	DefaultFillPercent = rivet.DefaultFillPercent
)

// Freelist types: accepted and ignored (rivet keeps free space in region
// maps).
const (
	FreelistArrayType = rivet.FreelistArrayType
	FreelistMapType   = rivet.FreelistMapType
)

// The types of bbolt's API, as rivet's.
type (
	// DB is rivet.DB.
	DB = rivet.DB
	// Tx is rivet.Tx.
	Tx = rivet.Tx
	// Bucket is rivet.Bucket.
	Bucket = rivet.Bucket
	// Cursor is rivet.Cursor.
	Cursor = rivet.Cursor
	// Options is rivet.Options.
	Options = rivet.Options
	// Stats is rivet.Stats.
	Stats = rivet.Stats
	// TxStats is rivet.TxStats.
	TxStats = rivet.TxStats
	// BucketStats is rivet.BucketStats.
	BucketStats = rivet.BucketStats
	// BucketStructure is rivet.BucketStructure.
	BucketStructure = rivet.BucketStructure
	// Info is rivet.Info.
	Info = rivet.Info
	// FreelistType is rivet.FreelistType.
	FreelistType = rivet.FreelistType
	// CheckOption is rivet.CheckOption.
	CheckOption = rivet.CheckOption
	// KVStringer is rivet.KVStringer.
	KVStringer = rivet.KVStringer
	// Logger is rivet.Logger.
	Logger = rivet.Logger
	// DefaultLogger is rivet.DefaultLogger.
	DefaultLogger = rivet.DefaultLogger
)

// DefaultOptions is rivet.DefaultOptions (the same value).
var DefaultOptions = rivet.DefaultOptions

// Errors, the same values as rivet's errors package (and this module's),
// so errors.Is matches across the names.
//
// Deprecated: use the values in go.etcd.io/bbolt/errors, as bbolt says.
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

// Open is rivet.Open.
func Open(path string, mode os.FileMode, options *Options) (*DB, error) {
	return rivet.Open(path, mode, options)
}

// Compact is rivet.CompactInto, under bbolt's name.
func Compact(dst, src *DB, txMaxSize int64) error { return rivet.CompactInto(dst, src, txMaxSize) }

// WithKVStringer is rivet.WithKVStringer.
func WithKVStringer(s KVStringer) CheckOption { return rivet.WithKVStringer(s) }

// WithPageId is rivet.WithPageId (bbolt's spelling).
func WithPageId(id uint64) CheckOption { return rivet.WithPageId(id) }

// HexKVStringer is rivet.HexKVStringer.
func HexKVStringer() KVStringer { return rivet.HexKVStringer() }

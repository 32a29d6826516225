package bench

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Engine opens databases of one storage engine in one configuration.
// "bbolt" and "bbolt-nofreelistsync" are two Engines over the same library,
// because the option changes the figures the seed report is about.
type Engine interface {
	// Name identifies the engine on the command line and in result rows.
	Name() string
	// Open opens or creates the database file at path. Unless opts.ReadOnly
	// is set, the bucket named BucketName exists when Open returns, so workloads
	// never pay for or race on its creation.
	Open(path string, opts OpenOptions) (DB, error)
}

// OpenOptions are the engine-neutral knobs a workload may set. They are few
// on purpose: every engine runs with its defaults unless a workload is about
// a specific option, which then gets its own Engine (see bbolt-nofreelistsync).
type OpenOptions struct {
	// ReadOnly opens the file without write access and without creating
	// anything, as the inspection commands need.
	ReadOnly bool
}

// BucketName is the name of the single bucket every workload writes to.
var BucketName = []byte("bench")

// KV is one key/value pair of an update.
type KV struct {
	Key, Value []byte
}

// BucketKVs is the part of a multi-bucket update going to one bucket.
type BucketKVs struct {
	Bucket []byte
	KVs    []KV
}

// Batcher is implemented by DBs whose engine can merge concurrent callers'
// updates into one transaction, as bbolt's DB.Batch does. Batch returns
// once kvs are durable in bucket; the engine decides which other callers'
// updates share the commit.
type Batcher interface {
	Batch(bucket []byte, kvs []KV) error
}

// BatchDelaySetter is implemented by Batchers whose gathering delay can be
// set: rivet's DB.MaxBatchDelay, where zero or below starts a batch at
// once when none runs and gathers the calls made while one does. It may
// be called only while no Batch call runs.
type BatchDelaySetter interface {
	SetBatchDelay(d time.Duration)
}

// NestedUpdater is implemented by DBs with nested buckets (bbolt and
// rivet; not LMDB): UpdateNested creates, under the top-level bucket
// parent, each bucket named in batches (both if missing) and puts its
// pairs, all in one durable write transaction.
type NestedUpdater interface {
	UpdateNested(parent []byte, batches []BucketKVs) error
}

// DB is an open database as the workloads see it. Every method is one
// transaction, so a workload's transaction boundaries are explicit at the call
// site and identical across engines.
type DB interface {
	// Update puts kvs into bucket in one durable write transaction.
	// With one pair it is the "one-key durable commit" of the seed report.
	Update(bucket []byte, kvs []KV) error
	// UpdateBuckets puts every batch into its bucket, creating buckets that
	// do not exist yet, all in one durable write transaction.
	UpdateBuckets(batches []BucketKVs) error
	// Delete removes keys from bucket in one durable write transaction.
	Delete(bucket []byte, keys [][]byte) error
	// Get looks up keys in bucket inside one read transaction and returns
	// how many were found. Batching amortises the transaction's fixed cost,
	// which otherwise dominates a single Get in every engine.
	Get(bucket []byte, keys [][]byte) (found int, err error)
	// Scan positions a cursor at each of starts (one read transaction for
	// all) and reads up to n pairs from there; it returns the pairs read.
	Scan(bucket []byte, starts [][]byte, n int) (pairs int, err error)
	// Counters returns the engine's own cumulative I/O counters since Open.
	Counters() Counters
	// Close closes the database.
	Close() error
}

// Counters are an engine's own measurements, keyed by the Ctr* names.
// A name is present only when the engine really counts it: bbolt has no
// flush counter, and inventing "2 per commit" would hide exactly the kind of
// surprise a benchmark exists to show.
type Counters map[string]int64

// Names of engine counters. All are cumulative since Open.
const (
	// CtrPagesWritten is pages written to the file.
	CtrPagesWritten = "pages_written"
	// CtrBytesWritten is bytes written to the file.
	CtrBytesWritten = "bytes_written"
	// CtrWriteCalls is pwrite-style calls made: rivet coalesces adjacent
	// pages into one call (WriteRuns), bbolt issues one per page run.
	CtrWriteCalls = "write_calls"
	// CtrFlushes is fsync/fdatasync calls made.
	CtrFlushes = "flushes"
	// CtrJournalWrites is writes to a commit journal (rivet: each one
	// append and one flush of the journal file), CtrJournalRecords the
	// commits they held and CtrJournalBytes their bytes; not in the file
	// counters above.
	CtrJournalWrites  = "journal_writes"
	CtrJournalRecords = "journal_records"
	CtrJournalBytes   = "journal_bytes"
	// CtrPagesRead is pages read with pread (rivet: Open, recovery and
	// free-space map loads; reads through the memory map are not counted).
	CtrPagesRead = "pages_read"
)

// commitFlushes splits an engine's flushes into those its commits wait
// for and those that run beside them: with a commit journal (rivet in Full
// mode) a commit waits for a journal write and the file's flushes are
// checkpoints; otherwise every flush is a commit's. ok is false for an
// engine that counts no flushes.
func commitFlushes(dc Counters) (commit, checkpoint int64, ok bool) {
	files, ok := dc[CtrFlushes]
	if !ok {
		return 0, 0, false
	}
	if jw := dc[CtrJournalWrites]; jw > 0 {
		return jw, files, true
	}
	return files, 0, true
}

// Sub returns c − base for every counter present in both, which is what a
// workload reports for the span between two snapshots.
func (c Counters) Sub(base Counters) Counters {
	d := Counters{}
	for k, v := range c {
		if b, ok := base[k]; ok {
			d[k] = v - b
		}
	}
	return d
}

// Inspector is implemented by engines that can describe and verify an
// existing file; the rivet command's stats and check subcommands use it.
type Inspector interface {
	Engine
	// Detect reports whether header, the first bytes of a file (at least
	// 64 unless the file is shorter), looks like this engine's format.
	Detect(header []byte) bool
	// Inspect opens path read-only and returns its statistics.
	Inspect(path string) (*Inspection, error)
	// Check opens path read-only, runs the engine's consistency check and
	// calls report for each problem found; it returns how many there were.
	// A non-nil error means the check itself could not run.
	Check(path string, report func(error)) (problems int, err error)
}

// Inspection is what Inspect found in a file.
type Inspection struct {
	Engine   string        `json:"engine"`
	Path     string        `json:"path"`
	FileSize int64         `json:"file_size"`
	PageSize int           `json:"page_size"`
	DB       []Field       `json:"db"`
	Buckets  []BucketStats `json:"buckets"`
}

// BucketStats is the statistics of one top-level bucket.
type BucketStats struct {
	Name  string  `json:"name"`
	Stats []Field `json:"stats"`
}

// Field is one named statistic.
type Field struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// Fields flattens the exported numeric fields of struct v (nested structs
// are prefixed with their field name and a dot) in declaration order.
// Engines' Stats types differ (rivet adds I/O counters to bbolt's fields);
// reflection reports whatever each one has without a hand-kept list that
// would silently drop a field added later.
func Fields(v any) []Field {
	var out []Field
	var walk func(prefix string, rv reflect.Value)
	walk = func(prefix string, rv reflect.Value) {
		for rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return
			}
			rv = rv.Elem()
		}
		rt := rv.Type()
		for i := range rt.NumField() {
			f := rt.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := rv.Field(i)
			switch fv.Kind() {
			case reflect.Struct:
				walk(prefix+f.Name+".", fv)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
				reflect.Float32, reflect.Float64, reflect.Bool:
				out = append(out, Field{Name: prefix + f.Name, Value: fv.Interface()})
			}
		}
	}
	walk("", reflect.ValueOf(v))
	return out
}

var (
	registryMu sync.Mutex
	registry   []Engine
)

// Register makes an engine selectable by name. Engines of this package
// register from package variable initialisers (see register), so an adapter
// that needs a build tag (or an optional C library, such as LMDB) simply is
// or is not in the binary.
func Register(e Engine) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, r := range registry {
		if r.Name() == e.Name() {
			panic("bench: engine registered twice: " + e.Name())
		}
	}
	registry = append(registry, e)
}

// register registers engines from a package variable initialiser: those
// run before any init function, and the memory workload's child process is
// started from init (wl_memory.go) and must find every engine of this
// package registered.
func register(es ...Engine) bool {
	for _, e := range es {
		Register(e)
	}
	return true
}

// Engines returns the registered engines, sorted by name so listings and
// default orders are stable whatever the init order of files was.
func Engines() []Engine {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := append([]Engine(nil), registry...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// DefaultEngines returns the registered engines a run uses when it names
// none: every engine but the Variants (durability variants such as
// rivet-none), which run only when named.
func DefaultEngines() []Engine {
	var out []Engine
	for _, e := range Engines() {
		if _, ok := e.(Variant); !ok {
			out = append(out, e)
		}
	}
	return out
}

// EngineNames returns the names of the registered engines.
func EngineNames() []string {
	var names []string
	for _, e := range Engines() {
		names = append(names, e.Name())
	}
	return names
}

// LookupEngine returns the engine called name (case-insensitive).
func LookupEngine(name string) (Engine, error) {
	for _, e := range Engines() {
		if strings.EqualFold(e.Name(), name) {
			return e, nil
		}
	}
	if why, ok := unavailable[strings.ToLower(name)]; ok {
		return nil, fmt.Errorf("engine %q: %s", name, why)
	}
	return nil, fmt.Errorf("unknown engine %q; available: %s", name, strings.Join(EngineNames(), ", "))
}

// Names of the engines this package provides.
const (
	// RivetEngine is rivet with default options.
	RivetEngine = "rivet"
	// BaselineEngine is bbolt with default options: every ratio in a report
	// is relative to it, as users compare against what they run today.
	BaselineEngine = "bbolt"
	// BoltNoFreelistSyncEngine is bbolt with Options.NoFreelistSync, the
	// workaround containerd uses and buildkit proposed.
	BoltNoFreelistSyncEngine = "bbolt-nofreelistsync"
	// LMDBEngine is LMDB through cgo; it exists only in binaries built with
	// cgo and the build tag "lmdb" (see bench/lmdb).
	LMDBEngine = "lmdb"
)

// unavailable maps engines this binary was built without to the reason,
// so asking for one explains how to get it instead of "unknown engine".
var unavailable = map[string]string{}

// bucketLabel renders a bucket name for people: as is when it is printable
// text, Go-quoted otherwise, so a binary name cannot garble a terminal.
func bucketLabel(name []byte) string {
	s := string(name)
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// OnlineCompactor is implemented by DBs that give space back in place
// while in use (rivet's DB.Compact).
type OnlineCompactor interface {
	// CompactOnline shrinks the open file in place and returns the bytes
	// given back.
	CompactOnline(ctx context.Context) (int64, error)
}

// OfflineCompactor is implemented by engines that can rewrite a closed
// file compactly into a new one (bbolt's and rivet's Compact): the only
// bbolt gives space back (rivet also has OnlineCompactor).
type OfflineCompactor interface {
	// CompactFile copies every bucket and key of the file at src into a
	// new file at dst, committing about every txMaxSize bytes.
	CompactFile(src, dst string, txMaxSize int64) error
}

package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
)

var _ = register(rivetEngine{})

// rivetEngine is rivet with default options (Durability Full). The other
// durability modes are variants of it (engine_durability.go).
type rivetEngine struct{}

// Name implements Engine.
func (rivetEngine) Name() string { return RivetEngine }

func (rivetEngine) options(readOnly bool) *rivet.Options {
	return &rivet.Options{Timeout: lockTimeout, ReadOnly: readOnly}
}

// Open implements Engine.
func (e rivetEngine) Open(path string, opts OpenOptions) (DB, error) {
	return openRivet(path, e.options(opts.ReadOnly))
}

// openRivet opens a rivet DB with o and adapts it to DB.
func openRivet(path string, o *rivet.Options) (DB, error) {
	db, err := rivet.Open(path, 0o600, o)
	if err != nil {
		return nil, err
	}
	k, err := openKV[*rivet.DB, *rivet.Tx, *rivet.Bucket, *rivet.Cursor](db, o.ReadOnly, func() Counters {
		s := db.Stats()
		return Counters{
			CtrPagesWritten: s.PagesWritten,
			CtrBytesWritten: s.BytesWritten,
			CtrWriteCalls:   s.WriteRuns,
			CtrFlushes:      s.Flushes,
			CtrPagesRead:    s.PagesRead,

			CtrJournalWrites:  s.JournalWrites,
			CtrJournalRecords: s.JournalRecords,
			CtrJournalBytes:   s.JournalBytes,
		}
	})
	if err != nil {
		return nil, err
	}
	return rivetKV{k}, nil
}

// rivetKV is a rivet DB as the workloads see it, with online compaction.
type rivetKV struct {
	*kvDB[*rivet.DB, *rivet.Tx, *rivet.Bucket, *rivet.Cursor]
}

// SetBatchDelay implements BatchDelaySetter with DB.MaxBatchDelay.
func (r rivetKV) SetBatchDelay(d time.Duration) { r.db.MaxBatchDelay = d }

// CompactOnline implements OnlineCompactor with DB.Compact.
func (r rivetKV) CompactOnline(ctx context.Context) (int64, error) { return r.db.Compact(ctx) }

// Detect implements Inspector.
func (rivetEngine) Detect(header []byte) bool { return inspect.Detect(header) == inspect.FormatRivet }

// Inspect implements Inspector.
func (e rivetEngine) Inspect(path string) (*Inspection, error) {
	db, err := rivet.Open(path, 0o400, e.options(true))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	ins := &Inspection{
		Engine:   RivetEngine,
		Path:     path,
		FileSize: fi.Size(),
		PageSize: db.Info().PageSize,
		DB:       Fields(db.Stats()),
	}
	err = db.View(func(tx *rivet.Tx) error {
		return tx.ForEach(func(name []byte, b *rivet.Bucket) error {
			if b == nil {
				return nil // a plain value at the top level: no bucket
			}
			ins.Buckets = append(ins.Buckets, BucketStats{Name: bucketLabel(name), Stats: Fields(b.Stats())})
			return nil
		})
	})
	return ins, err
}

// Check implements Inspector.
func (e rivetEngine) Check(path string, report func(error)) (int, error) {
	db, err := rivet.Open(path, 0o400, e.options(true))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	// A torn last commit or a damaged meta page is not corruption of the
	// state opened: say what Open found, without counting it as a problem.
	switch r := db.Recovery(); {
	case r.FellBack:
		report(fmt.Errorf("note: opened at txn %d, not the newest commit: %s", r.Txid, r.Reason))
	case r.DamagedMeta != "":
		report(fmt.Errorf("note: %s; it is older than txn %d, which opened, so nothing is lost", r.DamagedMeta, r.Txid))
	}
	n := 0
	err = db.View(func(tx *rivet.Tx) error {
		for cerr := range tx.Check() {
			n++
			report(cerr)
		}
		return nil
	})
	return n, err
}

// CompactFile implements OfflineCompactor with rivet's Compact.
func (e rivetEngine) CompactFile(src, dst string, txMaxSize int64) (err error) {
	s, err := rivet.Open(src, 0o400, e.options(true))
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := rivet.Open(dst, 0o600, e.options(false))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}()
	return rivet.CompactInto(d, s, txMaxSize)
}

package bench

import (
	"os"
	"time"

	"github.com/rivetkv/rivet/inspect"
	bolt "go.etcd.io/bbolt"
)

var _ = register(
	boltEngine{name: BaselineEngine},
	boltEngine{name: BoltNoFreelistSyncEngine, noFreelistSync: true},
)

// lockTimeout bounds how long an Open waits for the file lock: a benchmark
// or inspection of a file another process holds should fail, not hang.
const lockTimeout = 5 * time.Second

// boltEngine is bbolt v1.5 with default options, or with NoFreelistSync,
// or (as the durability variant bbolt-nosync) with NoSync.
type boltEngine struct {
	name           string
	noFreelistSync bool
	noSync         bool
}

// Name implements Engine.
func (e boltEngine) Name() string { return e.name }

func (e boltEngine) options(readOnly bool) *bolt.Options {
	return &bolt.Options{
		Timeout:        lockTimeout,
		ReadOnly:       readOnly,
		NoFreelistSync: e.noFreelistSync,
		NoSync:         e.noSync,
	}
}

// Open implements Engine.
func (e boltEngine) Open(path string, opts OpenOptions) (DB, error) {
	db, err := bolt.Open(path, 0o600, e.options(opts.ReadOnly))
	if err != nil {
		return nil, err
	}
	return openKV[*bolt.DB, *bolt.Tx, *bolt.Bucket, *bolt.Cursor](db, opts.ReadOnly, func() Counters {
		// bbolt counts one write per page run it writes (plus the meta);
		// it counts neither bytes nor flushes.
		s := db.Stats()
		return Counters{CtrWriteCalls: s.TxStats.GetWrite()}
	})
}

// boltMagic is the magic number of a bbolt meta page, which the hostile
// file builder writes; bbolt stores it in native byte order right after the
// 16-byte page header.
const boltMagic = 0xED0CDAED

// Detect implements Inspector.
func (e boltEngine) Detect(header []byte) bool { return inspect.IsBbolt(header) }

// Inspect implements Inspector.
func (e boltEngine) Inspect(path string) (*Inspection, error) {
	db, err := bolt.Open(path, 0o400, e.options(true))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	ins := &Inspection{
		Engine:   e.name,
		Path:     path,
		FileSize: fi.Size(),
		PageSize: db.Info().PageSize,
		DB:       Fields(db.Stats()),
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
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
func (e boltEngine) Check(path string, report func(error)) (int, error) {
	db, err := bolt.Open(path, 0o400, e.options(true))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bolt.Tx) error {
		for cerr := range tx.Check() {
			n++
			report(cerr)
		}
		return nil
	})
	return n, err
}

// CompactFile implements OfflineCompactor with bbolt's Compact.
func (e boltEngine) CompactFile(src, dst string, txMaxSize int64) (err error) {
	s, err := bolt.Open(src, 0o600, e.options(true))
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := bolt.Open(dst, 0o600, e.options(false))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}()
	return bolt.Compact(d, s, txMaxSize)
}

//go:build cgo && lmdb

package bench

import "github.com/rivetkv/rivet/bench/lmdb"

var _ = register(lmdbEngine{})

// lmdbMapSize is the map size every LMDB environment gets: the largest file
// any preset builds (4 GiB in open-scaling) with ample room. It reserves
// address space only; the file grows with use.
const lmdbMapSize = 64 << 30

// lmdbEngine is LMDB through the cgo binding in bench/lmdb, with default
// (fully synced) commits, the read-speed anchor of the CoW B+tree family.
type lmdbEngine struct{}

// Name implements Engine.
func (lmdbEngine) Name() string { return LMDBEngine }

// Open implements Engine.
func (lmdbEngine) Open(path string, opts OpenOptions) (DB, error) {
	env, err := lmdb.Open(path, lmdb.Options{ReadOnly: opts.ReadOnly, MapSize: lmdbMapSize, MaxDBs: 16})
	if err != nil {
		return nil, err
	}
	db := &lmdbDB{env: env}
	if opts.ReadOnly {
		err = env.View(func(t *lmdb.Txn) error { _, err := t.OpenDB(BucketName, false); return err })
	} else {
		err = env.Update(func(t *lmdb.Txn) error { _, err := t.OpenDB(BucketName, true); return err })
	}
	if err != nil {
		_ = env.Close()
		return nil, err
	}
	return db, nil
}

// lmdbDB adapts an LMDB environment to DB: buckets are named databases.
type lmdbDB struct{ env *lmdb.Env }

func splitKVs(kvs []KV) (keys, vals [][]byte) {
	keys, vals = make([][]byte, len(kvs)), make([][]byte, len(kvs))
	for i, kv := range kvs {
		keys[i], vals[i] = kv.Key, kv.Value
	}
	return keys, vals
}

// Update implements DB.
func (d *lmdbDB) Update(bucket []byte, kvs []KV) error {
	keys, vals := splitKVs(kvs)
	return d.env.Update(func(t *lmdb.Txn) error {
		dbi, err := t.OpenDB(bucket, false)
		if err != nil {
			return err
		}
		return t.PutMany(dbi, keys, vals)
	})
}

// UpdateBuckets implements DB.
func (d *lmdbDB) UpdateBuckets(batches []BucketKVs) error {
	return d.env.Update(func(t *lmdb.Txn) error {
		for _, b := range batches {
			dbi, err := t.OpenDB(b.Bucket, true)
			if err != nil {
				return err
			}
			keys, vals := splitKVs(b.KVs)
			if err := t.PutMany(dbi, keys, vals); err != nil {
				return err
			}
		}
		return nil
	})
}

// Delete implements DB.
func (d *lmdbDB) Delete(bucket []byte, keys [][]byte) error {
	return d.env.Update(func(t *lmdb.Txn) error {
		dbi, err := t.OpenDB(bucket, false)
		if err != nil {
			return err
		}
		return t.DelMany(dbi, keys)
	})
}

// Get implements DB.
func (d *lmdbDB) Get(bucket []byte, keys [][]byte) (found int, err error) {
	err = d.env.View(func(t *lmdb.Txn) error {
		dbi, err := t.OpenDB(bucket, false)
		if err != nil {
			return err
		}
		found, err = t.GetMany(dbi, keys)
		return err
	})
	return found, err
}

// Scan implements DB.
func (d *lmdbDB) Scan(bucket []byte, starts [][]byte, n int) (pairs int, err error) {
	err = d.env.View(func(t *lmdb.Txn) error {
		dbi, err := t.OpenDB(bucket, false)
		if err != nil {
			return err
		}
		pairs, err = t.ScanMany(dbi, starts, n)
		return err
	})
	return pairs, err
}

// Counters implements DB. LMDB keeps no I/O counters; the workloads'
// /proc/self/io figures cover it.
func (d *lmdbDB) Counters() Counters { return Counters{} }

// Close implements DB.
func (d *lmdbDB) Close() error { return d.env.Close() }

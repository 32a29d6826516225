// Package rivet is an embedded, transactional, copy-on-write B+tree
// key/value store with the API of go.etcd.io/bbolt: a program moves from
// bbolt by changing its import path.
//
// What changes underneath: a commit writes only the pages it changed plus
// the free-space regions it touched (bbolt rewrites its whole freelist), and
// makes them durable with one flush; Open reads two meta pages and, after a
// crash, only what the last commit wrote (no scan, whatever the file size);
// every page a parent points to is checksummed in the parent, so a torn or
// stale page is detected and corrupt input returns errors.ErrCorrupt instead
// of panicking; growing the file never waits for readers.
//
// # Basics
//
// A DB holds buckets; buckets hold keys, values and nested buckets. All
// access goes through transactions: any number of read-only ones at once,
// and one read-write one. Keys and values returned by a transaction are valid
// only until it ends.
//
//	db, err := rivet.Open("my.db", 0o600, nil)
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//
//	err = db.Update(func(tx *rivet.Tx) error {
//		b, err := tx.CreateBucketIfNotExists([]byte("widgets"))
//		if err != nil {
//			return err
//		}
//		return b.Put([]byte("foo"), []byte("bar"))
//	})
//	if err != nil {
//		return err
//	}
//
//	err = db.View(func(tx *rivet.Tx) error {
//		v := tx.Bucket([]byte("widgets")).Get([]byte("foo"))
//		fmt.Printf("foo = %s\n", v)
//		return nil
//	})
//
// # Errors
//
// Error values live in github.com/rivetkv/rivet/errors (and, deprecated, in
// this package), one for one with bbolt's, so errors.Is comparisons carry
// over. Methods without an error return (Get, Cursor moves, Bucket) record
// corruption on the transaction; View, Update and Commit return it.
//
// # Caveats
//
// A long-running read transaction keeps the pages of its snapshot from being
// reused, so the file grows while it is open. Values larger than a quarter of
// a page are stored out of line; values larger than a 16 MiB extent are
// returned as a copy rather than a slice of the memory map.
package rivet

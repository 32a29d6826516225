package rivet_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rivetkv/rivet"
	rerrors "github.com/rivetkv/rivet/errors"
)

func tempPath() (string, func()) {
	dir, err := os.MkdirTemp("", "rivet-example-")
	if err != nil {
		log.Fatal(err)
	}
	return filepath.Join(dir, "example.db"), func() { os.RemoveAll(dir) }
}

// Open a database, write in one transaction and read in another.
func Example() {
	path, cleanup := tempPath()
	defer cleanup()

	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = db.Update(func(tx *rivet.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("widgets"))
		if err != nil {
			return err
		}
		return b.Put([]byte("foo"), []byte("bar"))
	})
	if err != nil {
		log.Fatal(err)
	}

	err = db.View(func(tx *rivet.Tx) error {
		fmt.Printf("foo = %s\n", tx.Bucket([]byte("widgets")).Get([]byte("foo")))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: foo = bar
}

// Iterate over a bucket in key order, and over a key range with Seek.
func ExampleCursor() {
	path, cleanup := tempPath()
	defer cleanup()
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	_ = db.Update(func(tx *rivet.Tx) error {
		b, _ := tx.CreateBucket([]byte("animals"))
		for _, k := range []string{"dog", "cat", "liger", "owl", "ant"} {
			if err := b.Put([]byte(k), []byte("ok")); err != nil {
				return err
			}
		}
		return nil
	})
	_ = db.View(func(tx *rivet.Tx) error {
		c := tx.Bucket([]byte("animals")).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			fmt.Println(string(k))
		}
		fmt.Println("from d:")
		for k, _ := c.Seek([]byte("d")); k != nil; k, _ = c.Next() {
			fmt.Println(string(k))
		}
		return nil
	})
	// Output:
	// ant
	// cat
	// dog
	// liger
	// owl
	// from d:
	// dog
	// liger
	// owl
}

// Buckets nest, and each has a sequence for generating ids.
func ExampleBucket_NextSequence() {
	path, cleanup := tempPath()
	defer cleanup()
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	_ = db.Update(func(tx *rivet.Tx) error {
		users, _ := tx.CreateBucketIfNotExists([]byte("users"))
		for _, name := range []string{"ada", "grace"} {
			id, _ := users.NextSequence()
			u, _ := users.CreateBucket([]byte(fmt.Sprint(id)))
			_ = u.Put([]byte("name"), []byte(name))
		}
		return nil
	})
	_ = db.View(func(tx *rivet.Tx) error {
		users := tx.Bucket([]byte("users"))
		return users.ForEachBucket(func(id []byte) error {
			fmt.Printf("%s: %s\n", id, users.Bucket(id).Get([]byte("name")))
			return nil
		})
	})
	// Output:
	// 1: ada
	// 2: grace
}

// Errors compare with errors.Is against the values in the errors package,
// exactly as with bbolt.
func ExampleTx_CreateBucket_errors() {
	path, cleanup := tempPath()
	defer cleanup()
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	err = db.Update(func(tx *rivet.Tx) error {
		if _, err := tx.CreateBucket([]byte("b")); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte("b"))
		return err
	})
	fmt.Println(errors.Is(err, rerrors.ErrBucketExists))
	// Output: true
}

// WriteTo makes a hot backup while writers keep going.
func ExampleTx_WriteTo() {
	path, cleanup := tempPath()
	defer cleanup()
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	_ = db.Update(func(tx *rivet.Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		return b.Put([]byte("k"), []byte("v"))
	})

	backup := path + ".bak"
	err = db.View(func(tx *rivet.Tx) error { return tx.CopyFile(backup, 0o600) })
	if err != nil {
		log.Fatal(err)
	}
	bdb, err := rivet.Open(backup, 0o600, &rivet.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer bdb.Close()
	_ = bdb.View(func(tx *rivet.Tx) error {
		fmt.Printf("%s\n", tx.Bucket([]byte("b")).Get([]byte("k")))
		return nil
	})
	// Output: v
}

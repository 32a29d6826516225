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

// A program that moved from bbolt opens its users' existing bbolt files
// with Options.ConvertBbolt: the first writable Open converts the file in
// place (keeping the bbolt file as PATH.bbolt) and opens the result; later
// Opens find a rivet file. Read-only Opens read a bbolt file as it is.
func ExampleOptions_convertBbolt() {
	path, cleanup := tempPath()
	defer cleanup()
	// A bbolt file that bbolt v1.5 made: buckets nested twelve deep.
	bolt, err := os.ReadFile(filepath.Join("internal", "boltfile", "testdata", "deep-4k.bbolt"))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, bolt, 0o600); err != nil {
		log.Fatal(err)
	}

	// Read-only: the bbolt file is read through rivet's API, unconverted.
	ro, err := rivet.Open(path, 0o600, &rivet.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	err = ro.View(func(tx *rivet.Tx) error {
		b := tx.Bucket([]byte("level0"))
		fmt.Printf("read-only: level0/k = %s, sequence %d\n", b.Get([]byte("k")), b.Sequence())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	ro.Close()

	// Writable, without the option: refused.
	if _, err := rivet.Open(path, 0o600, nil); errors.Is(err, rivet.ErrBboltFile) {
		fmt.Println("writable: ErrBboltFile")
	}

	// Writable, with the option: converted, then opened.
	db, err := rivet.Open(path, 0o600, &rivet.Options{ConvertBbolt: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *rivet.Tx) error {
		return tx.Bucket([]byte("level0")).Put([]byte("k"), []byte("rewritten by rivet"))
	})
	if err != nil {
		log.Fatal(err)
	}
	err = db.View(func(tx *rivet.Tx) error {
		fmt.Printf("converted: level0/k = %s\n", tx.Bucket([]byte("level0")).Get([]byte("k")))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := os.Stat(path + rivet.BboltBackupSuffix); err == nil {
		fmt.Println("the bbolt file is kept as PATH" + rivet.BboltBackupSuffix)
	}
	// Output:
	// read-only: level0/k = 1, sequence 1000
	// writable: ErrBboltFile
	// converted: level0/k = rewritten by rivet
	// the bbolt file is kept as PATH.bbolt
}

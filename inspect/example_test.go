package inspect_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/inspect"
)

// Reading a file's meta pages and decoding the leaf its root points to.
func Example() {
	dir, err := os.MkdirTemp("", "inspect-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: 4096})
	if err != nil {
		log.Fatal(err)
	}
	err = db.Update(func(tx *rivet.Tx) error {
		_, err := tx.CreateBucket([]byte("widgets"))
		return err
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		log.Fatal(err)
	}
	metas, errs := inspect.ReadMetas(f, fi.Size())
	newest := metas[0]
	for slot, m := range metas {
		if errs[slot] != nil {
			log.Fatalf("meta %d: %v", slot, errs[slot])
		}
		if m.Txid > newest.Txid {
			newest = m
		}
	}
	fmt.Printf("page size %d, high-water mark %d pages\n", newest.PageSize, newest.HWM)

	// The root bucket's tree holds one record per top-level bucket.
	buf := make([]byte, newest.PageSize)
	if _, err := f.ReadAt(buf, int64(newest.Root.ID)*int64(newest.PageSize)); err != nil {
		log.Fatal(err)
	}
	p, err := inspect.DecodePage(buf, newest.Root.ID, newest.PageSize, newest.HWM)
	if err != nil {
		log.Fatal(err)
	}
	if p.Err != nil {
		log.Fatal(p.Err)
	}
	for _, e := range p.Node.Elements {
		if e.Flags == inspect.FlagBucket {
			fmt.Printf("%s element %q: a bucket, empty %v\n", p.Header.Type, e.Key, e.Bucket.Root.IsZero() && !e.Bucket.Inline)
		}
	}
	// Output:
	// page size 4096, high-water mark 5 pages
	// leaf element "widgets": a bucket, empty true
}

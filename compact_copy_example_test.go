package rivet_test

import (
	"fmt"
	"log"
	"path/filepath"

	"github.com/rivetkv/rivet"
)

// ExampleCompactInto rewrites a file compactly into a new one, committing
// every 64 KiB of keys and values, while the source stays open.
func ExampleCompactInto() {
	path, cleanup := tempPath()
	defer cleanup()
	src, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	err = src.Update(func(tx *rivet.Tx) error {
		b, err := tx.CreateBucket([]byte("users"))
		if err != nil {
			return err
		}
		if err := b.SetSequence(7); err != nil {
			return err
		}
		for i := range 1000 {
			if err := b.Put(fmt.Appendf(nil, "user%04d", i), make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	dst, err := rivet.Open(filepath.Join(filepath.Dir(path), "compact.db"), 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer dst.Close()
	if err := rivet.CompactInto(dst, src, 64<<10); err != nil {
		log.Fatal(err)
	}
	err = dst.View(func(tx *rivet.Tx) error {
		b := tx.Bucket([]byte("users"))
		fmt.Println(b.Stats().KeyN, "keys, sequence", b.Sequence())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: 1000 keys, sequence 7
}

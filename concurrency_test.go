package rivet

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

// TestReadersSeeTheirSnapshot: readers that began at different commits keep
// seeing exactly their snapshot while a writer keeps committing (and frees
// and reuses pages under them).
func TestReadersSeeTheirSnapshot(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 1024})
	const keys = 300
	put := func(gen int) {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			for i := 0; i < keys; i++ {
				v := make([]byte, 40)
				binary.BigEndian.PutUint64(v, uint64(gen))
				if err := b.Put([]byte(fmt.Sprintf("%05d", i)), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	var txs []*Tx
	for gen := 1; gen <= 5; gen++ {
		tx, err := db.Begin(false)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		put(gen)
	}
	// A concurrent writer keeps going while the readers verify.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := 100; ; gen++ {
			select {
			case <-stop:
				return
			default:
			}
			put(gen)
		}
	}()
	for round := 0; round < 3; round++ {
		for i, tx := range txs {
			want := uint64(i) // reader i began before generation i+1 was written
			n := 0
			err := tx.Bucket([]byte("b")).ForEach(func(k, v []byte) error {
				if got := binary.BigEndian.Uint64(v); got != want {
					return fmt.Errorf("reader %d saw generation %d at %s", i, got, k)
				}
				n++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != keys {
				t.Fatalf("reader %d saw %d keys", i, n)
			}
		}
	}
	close(stop)
	wg.Wait()
	for _, tx := range txs {
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentReadersAndWriter runs readers in parallel with a writer that
// grows the file well past the first memory map, under -race.
func TestConcurrentReadersAndWriter(t *testing.T) {
	db := openTestDB(t, &Options{PageSize: 4096, InitialMmapSize: 1 << 16})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := db.View(func(tx *Tx) error {
					b := tx.Bucket([]byte("data"))
					if b == nil {
						return nil
					}
					var last uint64
					return b.ForEach(func(k, v []byte) error {
						n := binary.BigEndian.Uint64(k)
						if n != last {
							return fmt.Errorf("gap: key %d after %d", n, last)
						}
						last = n + 1
						if len(v) != 512 {
							return fmt.Errorf("value of %d is %d bytes", n, len(v))
						}
						return nil
					})
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	next := uint64(0)
	for i := 0; i < 60; i++ {
		err := db.Update(func(tx *Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("data"))
			if err != nil {
				return err
			}
			for j := 0; j < 100; j++ {
				k := make([]byte, 8)
				binary.BigEndian.PutUint64(k, next)
				next++
				if err := b.Put(k, make([]byte, 512)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

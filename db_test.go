package rivet

import (
	"errors"
	"fmt"
	"testing"

	rerrors "github.com/rivetkv/rivet/errors"
)

func TestClosedAndReadOnlyDB(t *testing.T) {
	db := openTestDB(t, nil)
	if err := db.Update(func(tx *Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	path := db.Path()
	db.checkAndClose()
	if _, err := (&DB{}).Begin(false); !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
		t.Errorf("begin on closed db: %v", err)
	}
	ro, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.IsReadOnly() {
		t.Error("IsReadOnly false")
	}
	if err := ro.Update(func(*Tx) error { return nil }); !errors.Is(err, rerrors.ErrDatabaseReadOnly) {
		t.Errorf("update on read-only db: %v", err)
	}
	// A second read-only open shares the file.
	ro2, err := Open(path, 0o600, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("second read-only open: %v", err)
	}
	if err := ro2.View(func(tx *Tx) error {
		if tx.Bucket([]byte("b")) == nil {
			return fmt.Errorf("bucket missing")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ro2.Close()
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.View(func(*Tx) error { return nil }); !errors.Is(err, rerrors.ErrDatabaseNotOpen) {
		t.Errorf("view after close: %v", err)
	}
}

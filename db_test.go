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

// TestBeginRWIgnoresSupersededJournalWrite: a journal write still in flight
// holds the pages its state can see, since readers may begin on it once it
// is published; but once a newer state is published, Publish refuses it
// and it holds nothing. Frees a sync point covers are then released at the
// next transaction's begin.
func TestBeginRWIgnoresSupersededJournalWrite(t *testing.T) {
	db := openTestDB(t, nil)
	for i := range 3 {
		mustPutOne(t, db.DB, "b", "k", fmt.Sprintf("value %d", i))
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	head := db.headTxid()
	if head < 3 {
		t.Fatalf("head %d: too few commits to stand for a superseded write", head)
	}
	pendingAtBegin := func() uint64 {
		t.Helper()
		var n uint64
		if err := db.Update(func(tx *Tx) error {
			db.spaceMu.Lock()
			n = db.space.Stats().PendingPages
			db.spaceMu.Unlock()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The frees of head-1 and head are pending until a reader on head-2
	// may be gone: that write "in flight" holds them, unless head is
	// published.
	db.jpublishing.Store(head - 2)
	if n := pendingAtBegin(); n != 0 {
		t.Errorf("%d pages pending behind a superseded journal write, want 0", n)
	}
	db.jpublishing.Store(0)
}

package rivet

import (
	"bytes"
	"testing"
)

// firstKeyIs opens a cursor it does not keep, as etcd's backend does for
// each key it reads.
func firstKeyIs(b *Bucket, want []byte) bool {
	k, _ := b.Cursor().First()
	return bytes.Equal(k, want)
}

// TestCursorNotKeptDoesNotAllocate pins what design §5.1 says:
// Bucket.Cursor inlines, so a cursor its caller does not keep stays on the
// caller's stack: past the stacks a read transaction lends, it allocates
// its stack and nothing else. A change that makes Cursor too big to
// inline, or lets init keep a pointer to the cursor, fails here.
func TestCursorNotKeptDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	db := openTestDB(t, nil)
	mustPutOne(t, db.DB, "b", "k", "v")
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	b := tx.Bucket([]byte("b"))
	// Use up the stacks the transaction lends (whether lending allocates
	// depends on whether its pooled state is new), so that from here on
	// each cursor allocates exactly its own stack, and nothing else if
	// the cursor itself stays on the stack.
	for range 8 {
		firstKeyIs(b, []byte("k"))
	}
	ok := true
	allocs := testing.AllocsPerRun(100, func() {
		ok = ok && firstKeyIs(b, []byte("k"))
	})
	if !ok {
		t.Fatal("the cursor did not find the key")
	}
	if allocs != 1 {
		t.Fatalf("a cursor the caller does not keep made %.2f allocations, want 1 (its stack)", allocs)
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rivetkv/rivet"
)

// TestVerifyFindsDifference: one changed value makes verify fail, naming
// the bucket and the key.
func TestVerifyFindsDifference(t *testing.T) {
	src := migrateFixture(t)
	dst := filepath.Join(t.TempDir(), "dst.rivet")
	out, errOut, code := runBin(t, "import", "-q", src, dst)
	wantCode(t, code, 0, out, errOut)
	db, err := rivet.Open(dst, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *rivet.Tx) error {
		return tx.Bucket([]byte("users")).Bucket([]byte("logs")).Bucket([]byte("deep")).Put([]byte("d050"), []byte("changed"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runBin(t, "verify", src, dst)
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "first difference in bucket users/logs/deep") || !strings.Contains(errOut, "key d050") {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

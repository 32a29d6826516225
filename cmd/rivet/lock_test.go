package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
)

// TestLockedFile: while this process holds a rivet file open for writing,
// a read command says it is waiting and who holds the lock, then gives up
// after --lock-timeout with one line naming the holder (exit 1); compact
// refuses at once. Once the writer closes, the same command works.
func TestLockedFile(t *testing.T) {
	path := makeFixture(t, formatRivet)
	db, err := rivet.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	holder := fmt.Sprintf("pid %d", os.Getpid())
	start := time.Now()
	out, errOut, code := runBin(t, "--lock-timeout", "300ms", "keys", path, "users")
	wantCode(t, code, 1, out, errOut)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("gave up after %s with --lock-timeout 300ms", took)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "waiting up to 300ms") || !strings.Contains(lines[1], "is locked by another process") {
		t.Errorf("stderr should be a waiting line and one error line:\n%s", errOut)
	}
	if _, err := os.Stat("/proc/locks"); err == nil && !strings.Contains(errOut, holder) {
		t.Errorf("stderr does not name the holder (%s):\n%s", holder, errOut)
	}
	out, errOut, code = runBin(t, "compact", path)
	wantCode(t, code, 1, out, errOut)
	if !strings.Contains(errOut, "is open in another process") {
		t.Errorf("compact of a locked file: %s", errOut)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runBin(t, "--lock-timeout", "300ms", "keys", path, "users")
	wantCode(t, code, 0, out, errOut)
}

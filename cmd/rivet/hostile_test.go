package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rivetkv/rivet"
	"github.com/rivetkv/rivet/testing/hostile"
)

// TestCheckHostileShapes: `rivet check` on files whose trees share subtrees
// or form cycles, every checksum consistent (bbolt #877: bbolt's check ran
// for 30 minutes on such a file), finishes at once, exits 1 and names the
// page reachable twice. The library's tests bound the pages read
// (TestHostileShapesCheckBounded); this is the command a user runs.
func TestCheckHostileShapes(t *testing.T) {
	for _, shape := range hostile.Shapes {
		t.Run(string(shape), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hostile.db")
			db, err := rivet.Open(path, 0o600, &rivet.Options{PageSize: 1024})
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *rivet.Tx) error {
				b, err := tx.CreateBucket([]byte("b"))
				// Descending: leaves split half full, so the bucket has
				// the dozens of node pages the shape is made of.
				for i := 799; err == nil && i >= 0; i-- {
					err = b.Put(fmt.Appendf(nil, "key%04d", i), fmt.Appendf(nil, "value-%d", i))
				}
				return err
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			img, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := hostile.Build(img, "b", shape, 20, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, img, 0o600); err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, rivetBin, "check", path)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err = cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("rivet check did not finish in 60 s")
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("rivet check: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
			}
			twice := "page " + strconv.FormatUint(d.Twice, 10) + ": page reachable twice"
			if !strings.Contains(out.String(), twice) {
				t.Errorf("rivet check does not report %q:\n%s", twice, out.String())
			}
			if !strings.Contains(errOut.String(), "problem(s) found") {
				t.Errorf("rivet check's error line: %q", errOut.String())
			}
		})
	}
}

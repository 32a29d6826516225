package bench

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// cancelOnLine is a log writer that cancels a context when a line
// containing marker is logged.
type cancelOnLine struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOnLine) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

// TestRunInterruptedKeepsFinishedWorkloads: a context cancelled while the
// second workload starts ends Run with an InterruptedError and a report
// holding the first workload's results only, and a note saying so.
func TestRunInterruptedKeepsFinishedWorkloads(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Dir = t.TempDir()
	cfg.Engines = []string{RivetEngine}
	cfg.Workloads = []string{"durable-writes", "bulk-load"}
	cfg.Log = &cancelOnLine{marker: "bulk-load on", cancel: cancel}
	rep, err := Run(ctx, cfg)
	var ie *InterruptedError
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want an InterruptedError wrapping context.Canceled", err)
	}
	if ie.Finished != 1 || ie.Total != 2 || rep == nil {
		t.Fatalf("finished %d of %d, report %v", ie.Finished, ie.Total, rep != nil)
	}
	if len(rep.Results) == 0 {
		t.Fatal("the finished workload's results were dropped")
	}
	for _, r := range rep.Results {
		if r.Workload != "durable-writes" {
			t.Errorf("result of an unfinished workload kept: %+v", r)
		}
	}
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[len(rep.Notes)-1], "interrupted: 1 of 2") {
		t.Errorf("notes %q", rep.Notes)
	}
}

// TestRunRefusesMissingDir: a mistyped --dir is an error, not created.
func TestRunRefusesMissingDir(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir = t.TempDir() + "/typo"
	cfg.Workloads = []string{"durable-writes"}
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("Run with a missing dir: %v", err)
	}
}

// TestRunKeep: with Keep, the databases a workload made stay in Dir, the
// ones it discarded mid-run under numbered names.
func TestRunKeep(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.Keep = t.TempDir(), true
	cfg.Engines = []string{RivetEngine}
	cfg.Workloads = []string{"durable-writes", "space"}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := filepath.Glob(filepath.Join(rep.Host.Dir, "*", "*"))
	var durable, space int
	for _, k := range kept {
		switch {
		case strings.HasSuffix(k, "durable.db"):
			durable++
		case strings.Contains(filepath.Base(k), "space.db."):
			space++
		}
	}
	if durable != 1 || space < 2 {
		t.Fatalf("kept %d durable and %d space files: %v", durable, space, kept)
	}
}

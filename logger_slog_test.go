package rivet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlogLogger: every level lands in the slog stream with slog's level
// names and rivet's call site as the source; a level below the handler's
// is neither written nor formatted; Panic logs, then panics.
func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	l := NewSlogLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo, AddSource: true})))
	formatted := false
	l.Debugf("hidden %v", stringerFunc(func() string { formatted = true; return "x" }))
	l.Info("opened ", 3, " files")
	l.Warningf("slow flush: %d ms", 12)
	l.Errorf("latched: %s", "disk full")
	func() {
		defer func() {
			if r := recover(); r != "boom 7" {
				t.Errorf("Panicf recovered %v, want \"boom 7\"", r)
			}
		}()
		l.Panicf("boom %d", 7)
	}()
	if formatted {
		t.Error("a Debug message below the handler's level was formatted")
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec struct {
			Level  string `json:"level"`
			Msg    string `json:"msg"`
			Source struct {
				File string `json:"file"`
			} `json:"source"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if filepath.Base(rec.Source.File) != "logger_slog_test.go" {
			t.Errorf("source %q, want the caller's file", rec.Source.File)
		}
		got = append(got, rec.Level+" "+rec.Msg)
	}
	want := []string{"INFO opened 3 files", "WARN slow flush: 12 ms", "ERROR latched: disk full", "ERROR boom 7"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("records %q, want %q", got, want)
	}
}

type stringerFunc func() string

func (f stringerFunc) String() string { return f() }

// ExampleNewSlogLogger sends rivet's log messages to a program's slog
// logger.
func ExampleNewSlogLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir, _ := os.MkdirTemp("", "rivet-example")
	defer os.RemoveAll(dir)
	db, err := Open(filepath.Join(dir, "app.db"), 0o600, &Options{Logger: NewSlogLogger(logger)})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// rivet logs recoveries and latched errors at Warn and Error; a clean
	// Open logs nothing at Warn.
	fmt.Println("opened", filepath.Base(db.Path()))
	// Output: opened app.db
}

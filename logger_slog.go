package rivet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"
)

// NewSlogLogger returns a Logger that writes to l, for Options.Logger: a
// program that logs through log/slog gets rivet's messages in the same
// stream, with slog's levels (Debug, Info, Warn, Error) and the source
// position of rivet's call. Messages below l's level are not formatted at
// all. Fatal logs at Error level and exits the process with status 1, and
// Panic logs at Error level and panics, as the Logger interface (bbolt's)
// specifies.
func NewSlogLogger(l *slog.Logger) Logger {
	if l == nil {
		l = slog.Default()
	}
	return slogLogger{l}
}

type slogLogger struct{ l *slog.Logger }

// log emits msg at level, attributing it to the caller of the Logger
// method (skip frames: runtime.Callers, log, the Logger method).
func (s slogLogger) log(level slog.Level, msg func() string) string {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return ""
	}
	text := msg()
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:])
	r := slog.NewRecord(time.Now(), level, text, pcs[0])
	_ = s.l.Handler().Handle(ctx, r)
	return text
}

func (s slogLogger) Debug(v ...interface{}) {
	s.log(slog.LevelDebug, func() string { return fmt.Sprint(v...) })
}
func (s slogLogger) Debugf(format string, v ...interface{}) {
	s.log(slog.LevelDebug, func() string { return fmt.Sprintf(format, v...) })
}
func (s slogLogger) Info(v ...interface{}) {
	s.log(slog.LevelInfo, func() string { return fmt.Sprint(v...) })
}
func (s slogLogger) Infof(format string, v ...interface{}) {
	s.log(slog.LevelInfo, func() string { return fmt.Sprintf(format, v...) })
}
func (s slogLogger) Warning(v ...interface{}) {
	s.log(slog.LevelWarn, func() string { return fmt.Sprint(v...) })
}
func (s slogLogger) Warningf(format string, v ...interface{}) {
	s.log(slog.LevelWarn, func() string { return fmt.Sprintf(format, v...) })
}
func (s slogLogger) Error(v ...interface{}) {
	s.log(slog.LevelError, func() string { return fmt.Sprint(v...) })
}
func (s slogLogger) Errorf(format string, v ...interface{}) {
	s.log(slog.LevelError, func() string { return fmt.Sprintf(format, v...) })
}
func (s slogLogger) Fatal(v ...interface{}) {
	s.log(slog.LevelError, func() string { return fmt.Sprint(v...) })
	os.Exit(1)
}
func (s slogLogger) Fatalf(format string, v ...interface{}) {
	s.log(slog.LevelError, func() string { return fmt.Sprintf(format, v...) })
	os.Exit(1)
}
func (s slogLogger) Panic(v ...interface{}) {
	msg := fmt.Sprint(v...)
	s.log(slog.LevelError, func() string { return msg })
	panic(msg)
}
func (s slogLogger) Panicf(format string, v ...interface{}) {
	msg := fmt.Sprintf(format, v...)
	s.log(slog.LevelError, func() string { return msg })
	panic(msg)
}

package rivet

import (
	"fmt"
	"io"
	"log"
	"os"
)

// Logger is the logging interface bbolt defines; any bbolt logger works.
type Logger interface {
	Debug(v ...interface{})
	Debugf(format string, v ...interface{})
	Error(v ...interface{})
	Errorf(format string, v ...interface{})
	Info(v ...interface{})
	Infof(format string, v ...interface{})
	Warning(v ...interface{})
	Warningf(format string, v ...interface{})
	Fatal(v ...interface{})
	Fatalf(format string, v ...interface{})
	Panic(v ...interface{})
	Panicf(format string, v ...interface{})
}

// DefaultLogger writes to a standard library logger; debug output is off
// until EnableDebug.
type DefaultLogger struct {
	*log.Logger
	debug bool
}

// NewDefaultLogger returns a DefaultLogger writing to w (stderr if nil).
func NewDefaultLogger(w io.Writer) *DefaultLogger {
	if w == nil {
		w = os.Stderr
	}
	return &DefaultLogger{Logger: log.New(w, "rivet: ", 0)}
}

// EnableTimestamps adds date and time to every line.
func (l *DefaultLogger) EnableTimestamps() { l.SetFlags(log.LstdFlags) }

// EnableDebug turns on Debug and Debugf output.
func (l *DefaultLogger) EnableDebug() { l.debug = true }

// Debug logs at debug level.
func (l *DefaultLogger) Debug(v ...interface{}) {
	if l.debug {
		_ = l.Output(2, header("DEBUG", fmt.Sprint(v...)))
	}
}

// Debugf logs at debug level.
func (l *DefaultLogger) Debugf(format string, v ...interface{}) {
	if l.debug {
		_ = l.Output(2, header("DEBUG", fmt.Sprintf(format, v...)))
	}
}

// Info logs at info level.
func (l *DefaultLogger) Info(v ...interface{}) { _ = l.Output(2, header("INFO", fmt.Sprint(v...))) }

// Infof logs at info level.
func (l *DefaultLogger) Infof(format string, v ...interface{}) {
	_ = l.Output(2, header("INFO", fmt.Sprintf(format, v...)))
}

// Warning logs at warning level.
func (l *DefaultLogger) Warning(v ...interface{}) { _ = l.Output(2, header("WARN", fmt.Sprint(v...))) }

// Warningf logs at warning level.
func (l *DefaultLogger) Warningf(format string, v ...interface{}) {
	_ = l.Output(2, header("WARN", fmt.Sprintf(format, v...)))
}

// Error logs at error level.
func (l *DefaultLogger) Error(v ...interface{}) { _ = l.Output(2, header("ERROR", fmt.Sprint(v...))) }

// Errorf logs at error level.
func (l *DefaultLogger) Errorf(format string, v ...interface{}) {
	_ = l.Output(2, header("ERROR", fmt.Sprintf(format, v...)))
}

// Fatal logs and exits the process.
func (l *DefaultLogger) Fatal(v ...interface{}) {
	_ = l.Output(2, header("FATAL", fmt.Sprint(v...)))
	os.Exit(1)
}

// Fatalf logs and exits the process.
func (l *DefaultLogger) Fatalf(format string, v ...interface{}) {
	_ = l.Output(2, header("FATAL", fmt.Sprintf(format, v...)))
	os.Exit(1)
}

// Panic logs and panics.
func (l *DefaultLogger) Panic(v ...interface{}) { l.Logger.Panic(v...) }

// Panicf logs and panics.
func (l *DefaultLogger) Panicf(format string, v ...interface{}) { l.Logger.Panicf(format, v...) }

func header(lvl, msg string) string { return lvl + ": " + msg }

// discardLogger is used when Options.Logger is nil.
type discardLogger struct{}

func (discardLogger) Debug(...interface{})            {}
func (discardLogger) Debugf(string, ...interface{})   {}
func (discardLogger) Error(...interface{})            {}
func (discardLogger) Errorf(string, ...interface{})   {}
func (discardLogger) Info(...interface{})             {}
func (discardLogger) Infof(string, ...interface{})    {}
func (discardLogger) Warning(...interface{})          {}
func (discardLogger) Warningf(string, ...interface{}) {}
func (discardLogger) Fatal(v ...interface{})          { log.Fatal(v...) }
func (discardLogger) Fatalf(f string, v ...interface{}) {
	log.Fatalf(f, v...)
}
func (discardLogger) Panic(v ...interface{})            { log.Panic(v...) }
func (discardLogger) Panicf(f string, v ...interface{}) { log.Panicf(f, v...) }

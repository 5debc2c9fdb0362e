package main

import (
	"io"
	"log"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
)

// newLogger logs to w through stdr at verbosity v. stdr's own verbosity is
// process-wide (stdr.SetVerbosity); vSink keeps it per logger instead.
func newLogger(w io.Writer, v int) logr.Logger {
	std := stdr.NewWithOptions(log.New(w, "", log.LstdFlags|log.Lmicroseconds), stdr.Options{})
	return logr.New(vSink{LogSink: std.GetSink(), v: v})
}

type vSink struct {
	logr.LogSink
	v int
}

func (s vSink) Enabled(level int) bool { return level <= s.v }

func (s vSink) WithValues(kv ...any) logr.LogSink {
	return vSink{LogSink: s.LogSink.WithValues(kv...), v: s.v}
}

func (s vSink) WithName(name string) logr.LogSink {
	return vSink{LogSink: s.LogSink.WithName(name), v: s.v}
}

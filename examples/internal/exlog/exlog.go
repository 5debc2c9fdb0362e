package exlog

import (
	"io"
	"log"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
)

// New returns a logger that writes to w with timestamps and drops messages
// above verbosity v (V(0) is always written, errors too).
func New(w io.Writer, v int) logr.Logger {
	std := stdr.NewWithOptions(log.New(w, "", log.LstdFlags|log.Lmicroseconds), stdr.Options{})
	return logr.New(vSink{LogSink: std.GetSink(), v: v})
}

// vSink keeps the verbosity with the logger, through WithName and
// WithValues.
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

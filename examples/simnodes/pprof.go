package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-logr/logr"
)

// servePprof serves net/http/pprof's handlers on addr until ctx ends, on
// a mux of its own (nothing else registered on http.DefaultServeMux is
// exposed). It returns once the listener is open, so a bad address is
// the caller's error, and a channel closed when the server has stopped.
func servePprof(ctx context.Context, addr string, log logr.Logger) (<-chan struct{}, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("Serving pprof", "address", "http://"+ln.Addr().String()+"/debug/pprof/")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "pprof server stopped")
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return done, nil
}

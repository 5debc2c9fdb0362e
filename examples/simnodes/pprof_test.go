package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// startPprof serves pprof on a free port until ctx ends and returns the
// base URL it logged and the channel closed when it stopped.
func startPprof(t *testing.T, ctx context.Context) (string, <-chan struct{}) {
	t.Helper()
	var logged bytes.Buffer
	log := funcr.New(func(prefix, args string) { logged.WriteString(args + "\n") }, funcr.Options{})
	done, err := servePprof(ctx, "127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"address"="(http://[^"]+)"`).FindStringSubmatch(logged.String())
	if m == nil {
		t.Fatalf("no address logged: %s", logged.String())
	}
	return m[1], done
}

func TestPprofServesAHeapProfileUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, done := startPprof(t, ctx)
	resp, err := http.Get(base + "heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("heap profile:")) {
		t.Fatalf("heap profile: status %d, body %.200q", resp.StatusCode, body)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the pprof server did not stop with its context")
	}
	if _, err := http.Get(base); err == nil {
		t.Error("the pprof server still answers after its context ended")
	}
}

func TestPprofRefusesAnAddressInUse(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, done := startPprof(t, ctx)
	addr := regexp.MustCompile(`^http://([^/]+)/`).FindStringSubmatch(base)[1]
	if _, err := servePprof(ctx, addr, logr.Discard()); err == nil {
		t.Errorf("a second server on %s started", addr)
	}
	cancel()
	<-done
}

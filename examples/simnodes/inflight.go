package main

import (
	"io"
	"net/http"
	"sync"
)

// inFlight bounds the requests a process has open toward the apiserver,
// watches aside (each holds its stream for as long as it runs). Past the
// apiserver's streams per HTTP/2 connection (250 by default), Go's HTTP/2
// transport dials another TLS connection for each request that finds no
// free stream: a rollout on a loaded apiserver (requests answered in
// seconds, the client's QPS still admitting more) opened 2,000 of them at
// once in one process of 1,000 nodes, each a handshake and tens of KiB of
// buffers. Here a request over the bound waits, cheaply, for one to end;
// a kubelet has a connection of its own and its node's few requests.
type inFlight struct {
	next http.RoundTripper
	sem  chan struct{}
}

func limitInFlight(max int) func(http.RoundTripper) http.RoundTripper {
	sem := make(chan struct{}, max)
	return func(rt http.RoundTripper) http.RoundTripper { return &inFlight{next: rt, sem: sem} }
}

func (l *inFlight) RoundTrip(r *http.Request) (*http.Response, error) {
	if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
		return l.next.RoundTrip(r)
	}
	select {
	case l.sem <- struct{}{}:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		<-l.sem
		return nil, err
	}
	// The stream stays open until the body is read and closed.
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: sync.OnceFunc(func() { <-l.sem })}
	return resp, nil
}

type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

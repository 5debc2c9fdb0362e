package simclient

import (
	"io"
	"net/http"
	"sync"
)

// RoundTrip serves req from memory, as an http.RoundTripper: no socket, no
// timer; a watch's response streams through a pipe, and closing its body
// ends the watch.
func (s *Server) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	rw := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{}), gone: make(chan struct{})}
	go func() {
		defer pw.Close()
		s.ServeHTTP(rw, req)
		rw.WriteHeader(http.StatusOK)
	}()
	<-rw.ready
	return &http.Response{
		Status: http.StatusText(rw.code), StatusCode: rw.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.header, Body: &pipeBody{PipeReader: pr, rw: rw}, ContentLength: -1, Request: req,
	}, nil
}

// pipeResponse is the handler's http.ResponseWriter.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	code   int
	once   sync.Once
	ready  chan struct{} // closed once the header is written
	gone   chan struct{} // closed when the client closes the body
	goneMu sync.Once
}

func (r *pipeResponse) Header() http.Header { return r.header }

func (r *pipeResponse) WriteHeader(code int) {
	r.once.Do(func() {
		r.code = code
		close(r.ready)
	})
}

func (r *pipeResponse) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.pw.Write(b)
}

// Flush is a no-op: every Write reaches the reader.
func (r *pipeResponse) Flush() {}

type pipeBody struct {
	*io.PipeReader
	rw *pipeResponse
}

func (b *pipeBody) Close() error {
	b.rw.goneMu.Do(func() { close(b.rw.gone) })
	return b.PipeReader.Close()
}

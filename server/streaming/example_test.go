package streaming_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server/streaming"
	"github.com/nodekit/nodekit/server/streaming/streamingtest"
)

// A handler that serves exec sessions whose command upper-cases its stdin,
// and a client that runs one over SPDY.
func ExampleServer_ServeExec() {
	s := streaming.New(streaming.Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opts, err := streaming.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.ServeExec(w, r, opts, func(ctx context.Context, io runtime.AttachIO) error {
			return upper(io.Stdout, io.Stdin)
		})
	}))
	defer srv.Close()

	pr, pw := io.Pipe()
	go func() {
		fmt.Fprint(pw, "hello")
		pw.Close()
	}()
	o := streamingtest.ExecOptions{Protocols: []string{"v4.channel.k8s.io"}, Stdin: pr, Stdout: true}
	res, err := streamingtest.SPDYExec(context.Background(), srv.URL+"/?"+o.Query("upper"), o)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Protocol, res.Stdout, res.Error)
	// Output: v4.channel.k8s.io HELLO {"metadata":{},"status":"Success"}
}

func upper(w io.Writer, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	for i, c := range data {
		if 'a' <= c && c <= 'z' {
			data[i] = c - 'a' + 'A'
		}
	}
	_, err = w.Write(data)
	return err
}

// Package streamtest is the client side of the kubelet's streaming
// protocols over SPDY, for tests: remotecommand v4 (exec and attach, with
// the exit code) and port-forward v1, as client-go's tools/remotecommand and
// tools/portforward speak them, written on apimachinery's SPDY round
// tripper so that the library's tests need no client-go. It talks to a CRI
// runtime's streaming server (the URL of the CRI's Exec) as to the kubelet
// API's /exec, /attach and /portForward (which proxy there).
package streamtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/remotecommand"
)

// Dialer opens the upgraded connections. The zero value dials plain HTTP
// or HTTPS with Go's default TLS settings.
type Dialer struct {
	// TLS is the client's TLS configuration (for a kubelet API on HTTPS).
	TLS *tls.Config
	// Header is added to each request (Authorization, for one).
	Header http.Header
}

// dial upgrades a POST to u to SPDY with one of protocols.
func (d Dialer) dial(ctx context.Context, u *url.URL, protocols ...string) (httpstream.Connection, error) {
	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{TLS: d.TLS})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range d.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	for _, p := range protocols {
		req.Header.Add(httpstream.HeaderProtocolVersion, p)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	conn, err := rt.NewConnection(resp)
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	if got := resp.Header.Get(httpstream.HeaderProtocolVersion); !contains(protocols, got) {
		conn.Close()
		return nil, fmt.Errorf("streamtest: the server chose protocol %q, want one of %q", got, protocols)
	}
	return conn, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Streams are an exec or attach session's streams: a nil one is not
// opened, and they must match what the request asked for (the URL's
// query, or the CRI request). With TTY there is no stderr, and Size, if
// set, is sent as the terminal's size once the session starts.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Size           *TermSize
}

// TermSize is a terminal size as the resize stream carries it.
type TermSize struct {
	Width, Height uint16
}

// ExitError is a command's non-zero exit as the v4 protocol reports it.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("command exited with %d", e.Code) }

// Exec runs an exec or attach session at u with remotecommand v4 over SPDY
// until the server ends it, copying the streams. A non-zero exit is an
// *ExitError; a failure the server reports on the error stream, or any
// other, is an error.
func (d Dialer) Exec(ctx context.Context, u *url.URL, s Streams) error {
	conn, err := d.dial(ctx, u, remotecommand.StreamProtocolV4Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Closing the connection ends the copies when ctx ends first.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	stream := func(typ string) (httpstream.Stream, error) {
		h := http.Header{}
		h.Set(v1.StreamType, typ)
		return conn.CreateStream(h)
	}
	// The order of client-go's v4: error, stdin, stdout, stderr, resize.
	errStream, err := stream(v1.StreamTypeError)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	if s.Stdin != nil {
		in, err := stream(v1.StreamTypeStdin)
		if err != nil {
			return err
		}
		// Not waited for: a reader that never ends (a pipe) must not hold
		// the session open after the server ended it.
		go func() {
			_, _ = io.Copy(in, s.Stdin)
			in.Close() // half-close: the remote stdin sees EOF
		}()
	}
	copyOut := func(typ string, w io.Writer) error {
		out, err := stream(typ)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(w, out)
			_, _ = io.Copy(io.Discard, out)
		}()
		return nil
	}
	if s.Stdout != nil {
		if err := copyOut(v1.StreamTypeStdout, s.Stdout); err != nil {
			return err
		}
	}
	if s.Stderr != nil && !s.TTY {
		if err := copyOut(v1.StreamTypeStderr, s.Stderr); err != nil {
			return err
		}
	}
	if s.TTY {
		resize, err := stream(v1.StreamTypeResize)
		if err != nil {
			return err
		}
		if s.Size != nil {
			// Best effort, as client-go's: a session may be over already.
			_ = json.NewEncoder(resize).Encode(s.Size)
		}
	}
	msg, err := io.ReadAll(errStream)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("streamtest: reading the error stream: %w", err)
	}
	return statusError(msg)
}

// statusError decodes v4's error stream: a metav1.Status, Success or a
// NonZeroExitCode failure with the code as a cause.
func statusError(msg []byte) error {
	if len(msg) == 0 {
		return nil
	}
	var st metav1.Status
	if err := json.Unmarshal(msg, &st); err != nil {
		return fmt.Errorf("streamtest: error stream %q: %w", msg, err)
	}
	if st.Status == metav1.StatusSuccess {
		return nil
	}
	if st.Reason == remotecommand.NonZeroExitCodeReason && st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == remotecommand.ExitCodeCauseType {
				code, err := strconv.Atoi(c.Message)
				if err != nil {
					return fmt.Errorf("streamtest: exit code %q: %w", c.Message, err)
				}
				return &ExitError{Code: code}
			}
		}
	}
	return errors.New(st.Message)
}

// PortForwardProtocol is the port-forward subprotocol over SPDY.
const PortForwardProtocol = "portforward.k8s.io"

// Forward is one connection to a pod's port through a port-forward
// session: Read and Write are the pod's side, CloseWrite ends what is sent.
type Forward struct {
	conn httpstream.Connection
	data httpstream.Stream
	errc chan error
}

// Dial opens a port-forward session at u and a connection to port in it.
func (d Dialer) Dial(ctx context.Context, u *url.URL, port int32) (*Forward, error) {
	conn, err := d.dial(ctx, u, PortForwardProtocol)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(v1.StreamType, v1.StreamTypeError)
	h.Set(v1.PortHeader, strconv.Itoa(int(port)))
	h.Set(v1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, err
	}
	errStream.Close() // nothing is written to it
	h.Set(v1.StreamType, v1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, err
	}
	f := &Forward{conn: conn, data: data, errc: make(chan error, 1)}
	go func() {
		// A server that resets the streams after writing its message
		// (the kubelet's, on a failed forward) may end the read with an
		// error: the message is what matters.
		msg, err := io.ReadAll(errStream)
		switch {
		case len(msg) > 0:
			f.errc <- errors.New(string(msg))
		case err != nil:
			f.errc <- err
		default:
			f.errc <- nil
		}
	}()
	return f, nil
}

func (f *Forward) Read(p []byte) (int, error)  { return f.data.Read(p) }
func (f *Forward) Write(p []byte) (int, error) { return f.data.Write(p) }

// CloseWrite tells the pod's side nothing more comes.
func (f *Forward) CloseWrite() error { return f.data.Close() }

// Err waits for the session's error stream to end and returns what the
// server reported there (the pod's port refused the connection, ...).
func (f *Forward) Err() error { return <-f.errc }

// Close ends the session.
func (f *Forward) Close() error { return f.conn.Close() }

// RoundTrip sends req to port through a new port-forward session at u,
// closes the sending side and returns all the pod answered, and the error
// the server reported, if any.
func (d Dialer) RoundTrip(ctx context.Context, u *url.URL, port int32, req []byte) ([]byte, error) {
	f, err := d.Dial(ctx, u, port)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	// A refused connection closes the data stream early: what the error
	// stream says then matters more than the failed write.
	_, werr := f.Write(req)
	if werr == nil {
		werr = f.CloseWrite()
	}
	var resp []byte
	var rerr error
	if werr == nil {
		resp, rerr = io.ReadAll(f)
	}
	if err := f.Err(); err != nil {
		return resp, err
	}
	if werr != nil {
		return nil, werr
	}
	if ctx.Err() != nil {
		return resp, ctx.Err()
	}
	return resp, rerr
}

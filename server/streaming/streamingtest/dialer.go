package streamingtest

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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/nodekit/nodekit/runtime"
)

// Dialer opens SPDY connections. The zero value dials plain HTTP or HTTPS
// with Go's default TLS settings.
type Dialer struct {
	// TLS is the client's TLS configuration (for a kubelet API on HTTPS).
	TLS *tls.Config
	// Header is added to each request (Authorization, for one).
	Header http.Header
}

// SPDYDial upgrades a request to rawURL to SPDY offering protocols; a
// refused upgrade is an *UpgradeError. It returns the connection and the
// chosen protocol.
func (d Dialer) SPDYDial(ctx context.Context, method, rawURL string, protocols ...string) (httpstream.Connection, string, error) {
	rt, err := spdy.NewRoundTripper(d.TLS)
	if err != nil {
		return nil, "", err
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		return nil, "", err
	}
	for k, vs := range d.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	for _, p := range protocols {
		req.Header.Add(httpstream.HeaderProtocolVersion, p)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return nil, "", &UpgradeError{StatusCode: resp.StatusCode, Body: string(body)}
	}
	conn, err := rt.NewConnection(resp)
	if err != nil {
		return nil, "", err
	}
	return conn, resp.Header.Get(httpstream.HeaderProtocolVersion), nil
}

// Streams are an exec or attach session's streams: a nil one is not
// opened, and they must match what the request asked for (the URL's
// query, or the CRI request). With TTY there is no stderr, and Resize is
// sent on the resize stream once the session starts.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         []runtime.TermSize
}

// ExitError is a command's non-zero exit as the v4 protocol reports it.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("command exited with %d", e.Code) }

// Exec runs an exec or attach session at u with remotecommand v4 over SPDY
// until the server ends it, copying the streams, as client-go's executor
// does. A non-zero exit is an *ExitError; a failure the server reports on
// the error stream, or any other, is an error.
func (d Dialer) Exec(ctx context.Context, u *url.URL, s Streams) error {
	conn, _, err := d.SPDYDial(ctx, http.MethodPost, u.String(), "v4.channel.k8s.io")
	if err != nil {
		return err
	}
	defer conn.Close()
	// Closing the connection ends the copies when ctx ends first.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	msg, err := spdySession(conn, "v4.channel.k8s.io", s)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("streamingtest: %w", err)
	}
	return StatusError(msg)
}

// StatusError decodes v4's error stream: nil for none or Success, an
// *ExitError for a NonZeroExitCode failure, else the status's message.
func StatusError(msg []byte) error {
	if len(msg) == 0 {
		return nil
	}
	var st metav1.Status
	if err := json.Unmarshal(msg, &st); err != nil {
		return fmt.Errorf("streamingtest: error stream %q: %w", msg, err)
	}
	if st.Status == metav1.StatusSuccess {
		return nil
	}
	if st.Reason == "NonZeroExitCode" && st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Type == "ExitCode" {
				code, err := strconv.Atoi(c.Message)
				if err != nil {
					return fmt.Errorf("streamingtest: exit code %q: %w", c.Message, err)
				}
				return &ExitError{Code: code}
			}
		}
	}
	return errors.New(st.Message)
}

// Forward is one connection to a pod's port through a port-forward
// session: Read and Write are the pod's side, CloseWrite ends what is sent.
type Forward struct {
	conn httpstream.Connection
	data httpstream.Stream
	errc chan error
}

// Dial opens a port-forward session at u and a connection to port in it.
func (d Dialer) Dial(ctx context.Context, u *url.URL, port int32) (*Forward, error) {
	conn, _, err := d.SPDYDial(ctx, http.MethodPost, u.String(), "portforward.k8s.io")
	if err != nil {
		return nil, err
	}
	pf := &SPDYPortForward{Conn: conn}
	data, errStream, err := pf.Forward(port)
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

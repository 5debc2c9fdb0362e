// Package streamingtest is a minimal client of the kubelet's streaming
// protocols (remotecommand and port forwarding over SPDY and WebSocket) for
// tests of servers that speak them: package streaming, the kubelet API's
// /exec, /attach and /portForward, a CRI runtime's streaming server. It is
// written on the protocols' primitives (k8s.io/streaming, x/net/websocket)
// so that the library's tests need no client-go; it checks nothing a
// client should not, and is no substitute for client-go's executor in a
// program. The package functions dial plain connections and return what a
// session gave; a Dialer adds TLS and headers, streams to the caller's
// readers and writers and decodes v4's exit code (a CRI runtime's
// streaming URL, the kubelet API on HTTPS).
package streamingtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/websocket"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/nodekit/nodekit/runtime"
)

// ExecOptions describe a remotecommand session from the client's side.
type ExecOptions struct {
	// Protocols are offered in order: SPDY's X-Stream-Protocol-Version or
	// WebSocket's subprotocols.
	Protocols []string
	// Stdin, if set, opens the stdin stream and is copied to it; at its
	// EOF the stream is closed (SPDY half-close; with v5.channel.k8s.io
	// over WebSocket the CLOSE signal).
	Stdin io.Reader
	// Stdout and Stderr open those streams.
	Stdout, Stderr bool
	// TTY opens the resize stream (SPDY from v3 on; WebSocket always has
	// the channel) and sends Resize on it.
	TTY    bool
	Resize []runtime.TermSize
	// Method is the HTTP method of a SPDY request; default POST.
	Method string
}

// Query returns the exec or attach query for o and cmd, as the apiserver
// sends it to the kubelet (command=...&input=1&output=1&error=1&tty=1).
func (o ExecOptions) Query(cmd ...string) string {
	q := url.Values{}
	for _, c := range cmd {
		q.Add("command", c)
	}
	for name, on := range map[string]bool{"input": o.Stdin != nil, "output": o.Stdout, "error": o.Stderr, "tty": o.TTY} {
		if on {
			q.Set(name, "1")
		}
	}
	return q.Encode()
}

// Result is what a session gave the client.
type Result struct {
	// Protocol is the protocol the server chose.
	Protocol       string
	Stdout, Stderr string
	// Error is what the error stream carried: a message before v4, a
	// metav1.Status in JSON from v4 on.
	Error string
}

// UpgradeError is a refused upgrade: the server's status and body.
type UpgradeError struct {
	StatusCode int
	Body       string
}

func (e *UpgradeError) Error() string {
	return fmt.Sprintf("upgrade refused: %d %s", e.StatusCode, e.Body)
}

// SPDYDial upgrades a request to rawURL to SPDY offering protocols, as
// Dialer{}.SPDYDial does.
func SPDYDial(ctx context.Context, method, rawURL string, protocols ...string) (httpstream.Connection, string, error) {
	return Dialer{}.SPDYDial(ctx, method, rawURL, protocols...)
}

// SPDYExec runs a session over SPDY as client-go's executor does: it
// creates the error stream, then stdin, stdout, stderr and resize as asked,
// and returns once the server has closed the output streams.
func SPDYExec(ctx context.Context, rawURL string, o ExecOptions) (Result, error) {
	method := o.Method
	if method == "" {
		method = http.MethodPost
	}
	conn, protocol, err := SPDYDial(ctx, method, rawURL, o.Protocols...)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	res := Result{Protocol: protocol}
	var stdout, stderr bytes.Buffer
	s := Streams{Stdin: o.Stdin, TTY: o.TTY, Resize: o.Resize}
	if o.Stdout {
		s.Stdout = &stdout
	}
	if o.Stderr {
		s.Stderr = &stderr
	}
	errData, err := spdySession(conn, protocol, s)
	res.Stdout, res.Stderr, res.Error = stdout.String(), stderr.String(), string(errData)
	return res, err
}

// spdySession creates a session's streams on conn in client-go's order
// (error, stdin, stdout, stderr, resize), copies them, and returns what
// the error stream carried once the server has closed the output streams.
func spdySession(conn httpstream.Connection, protocol string, s Streams) ([]byte, error) {
	create := func(typ string) (httpstream.Stream, error) {
		h := http.Header{}
		h.Set("streamType", typ)
		return conn.CreateStream(h)
	}
	errStream, err := create("error")
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	if s.Stdin != nil {
		in, err := create("stdin")
		if err != nil {
			return nil, err
		}
		// Not waited for: a reader that never ends (a pipe) must not hold
		// the session open after the server ended it.
		go func() {
			_, _ = io.Copy(in, s.Stdin)
			_ = in.Close() // half-close: the remote stdin sees EOF
		}()
	}
	read := func(typ string, into io.Writer) error {
		st, err := create(typ)
		if err != nil {
			return err
		}
		wg.Go(func() {
			_, _ = io.Copy(into, st)
			_, _ = io.Copy(io.Discard, st)
		})
		return nil
	}
	if s.Stdout != nil {
		if err := read("stdout", s.Stdout); err != nil {
			return nil, err
		}
	}
	if s.Stderr != nil && !s.TTY {
		if err := read("stderr", s.Stderr); err != nil {
			return nil, err
		}
	}
	if s.TTY && protocol != "channel.k8s.io" && protocol != "v2.channel.k8s.io" {
		rs, err := create("resize")
		if err != nil {
			return nil, err
		}
		enc := json.NewEncoder(rs)
		for _, size := range s.Resize {
			// Best effort, as client-go's: a session may be over already.
			if enc.Encode(size) != nil {
				break
			}
		}
	}
	errData, err := io.ReadAll(errStream)
	wg.Wait()
	return errData, err
}

// WSConn is a channel.k8s.io-style WebSocket connection: each message is
// a channel number and data (in base64 text for the base64 protocols).
type WSConn struct {
	WS       *websocket.Conn
	Protocol string
	base64   bool
	mu       sync.Mutex
}

// WebSocketDial opens a WebSocket to rawURL (http or https) offering
// protocols; a refused upgrade is an error.
func WebSocketDial(ctx context.Context, rawURL string, protocols ...string) (*WSConn, error) {
	u := strings.Replace(strings.Replace(rawURL, "https://", "wss://", 1), "http://", "ws://", 1)
	cfg, err := websocket.NewConfig(u, "http://localhost/")
	if err != nil {
		return nil, err
	}
	cfg.Protocol = protocols
	ws, err := cfg.DialContext(ctx)
	if err != nil {
		return nil, err
	}
	c := &WSConn{WS: ws}
	if p := ws.Config().Protocol; len(p) == 1 {
		c.Protocol = p[0]
	}
	c.base64 = strings.Contains(c.Protocol, "base64.")
	return c, nil
}

// Send writes data on channel.
func (c *WSConn) Send(channel byte, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base64 {
		return websocket.Message.Send(c.WS, strconv.Itoa(int(channel))+base64.StdEncoding.EncodeToString(data))
	}
	return websocket.Message.Send(c.WS, append([]byte{channel}, data...))
}

// CloseChannel sends v5.channel.k8s.io's CLOSE signal for channel.
func (c *WSConn) CloseChannel(channel byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return websocket.Message.Send(c.WS, []byte{255, channel})
}

// Recv reads the next message: its channel and data; io.EOF once the
// server closed the connection.
func (c *WSConn) Recv() (byte, []byte, error) {
	for {
		var msg []byte
		if err := websocket.Message.Receive(c.WS, &msg); err != nil {
			return 0, nil, err
		}
		if len(msg) == 0 {
			continue
		}
		if !c.base64 {
			return msg[0], msg[1:], nil
		}
		data, err := base64.StdEncoding.DecodeString(string(msg[1:]))
		if err != nil {
			return 0, nil, err
		}
		return msg[0] - '0', data, nil
	}
}

// Close closes the connection.
func (c *WSConn) Close() error { return c.WS.Close() }

// WebSocketExec runs a session over a WebSocket: channels 0-4 are stdin,
// stdout, stderr, error and resize. It returns once the server closed the
// connection.
func WebSocketExec(ctx context.Context, rawURL string, o ExecOptions) (Result, error) {
	c, err := WebSocketDial(ctx, rawURL, o.Protocols...)
	if err != nil {
		return Result{}, err
	}
	defer c.Close()
	res := Result{Protocol: c.Protocol}
	for _, size := range o.Resize {
		data, _ := json.Marshal(size)
		if err := c.Send(4, data); err != nil {
			return res, err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if o.Stdin != nil {
		wg.Go(func() {
			buf := make([]byte, 32*1024)
			for {
				n, err := o.Stdin.Read(buf)
				if n > 0 && c.Send(0, buf[:n]) != nil {
					return
				}
				if err != nil {
					if c.Protocol == "v5.channel.k8s.io" {
						_ = c.CloseChannel(0)
					}
					return
				}
			}
		})
	}
	var out [5]bytes.Buffer
	for {
		ch, data, err := c.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return res, err
			}
			break
		}
		if int(ch) < len(out) {
			out[ch].Write(data)
		}
	}
	res.Stdout, res.Stderr, res.Error = out[1].String(), out[2].String(), out[3].String()
	return res, nil
}

// SPDYPortForward is a port-forward connection over SPDY
// (portforward.k8s.io).
type SPDYPortForward struct {
	Conn httpstream.Connection
	mu   sync.Mutex
	next int
}

// DialSPDYPortForward upgrades a port-forward request to rawURL.
func DialSPDYPortForward(ctx context.Context, rawURL string) (*SPDYPortForward, error) {
	conn, _, err := SPDYDial(ctx, http.MethodPost, rawURL, "portforward.k8s.io")
	if err != nil {
		return nil, err
	}
	return &SPDYPortForward{Conn: conn}, nil
}

// Forward opens one forwarded connection to port, as client-go's port
// forwarder does for each local connection: the error stream (its write
// side closed at once), then the data stream, with a new requestID.
func (f *SPDYPortForward) Forward(port int32) (data, errStream httpstream.Stream, err error) {
	f.mu.Lock()
	id := f.next
	f.next++
	f.mu.Unlock()
	h := http.Header{}
	h.Set("port", strconv.Itoa(int(port)))
	h.Set("requestID", strconv.Itoa(id))
	h.Set("streamType", "error")
	errStream, err = f.Conn.CreateStream(h)
	if err != nil {
		return nil, nil, err
	}
	_ = errStream.Close()
	h = h.Clone()
	h.Set("streamType", "data")
	data, err = f.Conn.CreateStream(h)
	if err != nil {
		return nil, nil, err
	}
	return data, errStream, nil
}

// Close closes the connection.
func (f *SPDYPortForward) Close() error { return f.Conn.Close() }

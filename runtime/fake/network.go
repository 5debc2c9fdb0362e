package fake

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/nodekit/nodekit/runtime"
)

// DialPod connects to one of the runtime's pods, as the agent's network
// probes (httpGet, tcpSocket, grpc) reach it (runtime.PodDialer). The pod
// with address's IP, in its ready sandbox, listens on a port while a
// container of it runs that declares the port in its spec (or, when none
// declares it, any of its running containers) and that container's
// Behavior.ReadyAfter has passed since it started; otherwise, and for an
// unknown IP or a host-network pod, the connection is refused, as a
// process not listening yet. The connection is in memory (net.Pipe) and
// answers as a healthy server does: an HTTP request gets 200, a gRPC
// health check SERVING for any service, and a TCP probe connects. So a pod
// whose readiness probe is an httpGet becomes Ready once its container
// runs, and a liveness probe fails once it exited.
func (r *Runtime) DialPod(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("fake: dial %s %s: only tcp is served", network, address)
	}
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("fake: dial %s %s: %w", network, address, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("fake: dial %s %s: bad port %q", network, address, p)
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	r.mu.Lock()
	listening := r.listens(host, int32(port))
	r.mu.Unlock()
	if !listening {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: &net.TCPAddr{IP: net.ParseIP(host), Port: port},
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	client, server := net.Pipe()
	go serveProbe(server)
	return client, nil
}

// listens reports whether the pod with ip listens on port now; r.mu must
// be held.
func (r *Runtime) listens(ip string, port int32) bool {
	now := r.clock.Now()
	for _, p := range r.pods {
		s := p.newestSandbox()
		if p.removed || s == nil || s.hostNetwork || !slices.Contains(s.ips, ip) {
			continue
		}
		if s.state != runtime.SandboxStateReady {
			return false
		}
		r.settle(p, now)
		declared, any := false, false
		for _, c := range p.containers {
			if c.sandboxID != s.id || (c.kind != kindRegular && c.kind != kindSidecar) {
				continue
			}
			up := c.running() && !now.Before(c.readyAt)
			if slices.Contains(c.ports, port) {
				if up {
					return true
				}
				declared = true
			}
			any = any || up
		}
		return !declared && any
	}
	return false
}

// serveProbe answers one probe's connection: a TCP probe closes it at once;
// an HTTP/1 request gets 200 OK; the HTTP/2 preface starts a gRPC health
// server; a TLS handshake is answered in plain HTTP, as a server without
// TLS does (an https hook then falls back to http, as the kubelet's).
func serveProbe(conn net.Conn) {
	br := bufio.NewReader(conn)
	if first, err := br.Peek(1); err == nil && first[0] == tlsHandshake {
		// Drain the hello meanwhile: a pipe's writer waits for its reader.
		go func() { _, _ = io.Copy(io.Discard, br) }()
		_, _ = io.WriteString(conn, okResponse)
		_ = conn.Close()
		return
	}
	head, err := br.Peek(len(http2Preface))
	if err != nil {
		_ = conn.Close()
		return
	}
	if string(head) == http2Preface {
		serveGRPCHealth(&bufferedConn{Conn: conn, r: br})
		return
	}
	defer conn.Close()
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	_, _ = io.WriteString(conn, okResponse)
}

const (
	http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	okResponse   = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
	// tlsHandshake is the first byte of a TLS client hello's record.
	tlsHandshake = 0x16
)

// bufferedConn reads what was peeked first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// serveGRPCHealth serves grpc.health.v1.Health on conn until the client
// closes it.
func serveGRPCHealth(conn net.Conn) {
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, servingHealth{})
	l := &oneConnListener{conn: conn, closed: make(chan struct{})}
	c := &closeNotifyConn{Conn: conn, closed: make(chan struct{})}
	l.conn = c
	go func() {
		<-c.closed
		s.Stop()
	}()
	_ = s.Serve(l)
	_ = c.Close() // if Serve returned on its own
}

// servingHealth answers SERVING for every service.
type servingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (servingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// oneConnListener hands out one connection, then blocks until closed.
type oneConnListener struct {
	conn   net.Conn
	taken  bool
	once   sync.Once
	closed chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if !l.taken {
		l.taken = true
		return l.conn, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

// closeNotifyConn closes closed when it is closed.
type closeNotifyConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeNotifyConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

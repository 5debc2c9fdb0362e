package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/httpget"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
)

// maxOutput caps what a probe keeps of a response body or command output,
// as the kubelet (10 KiB).
const maxOutput = 10 << 10

// newTransport is the kubelet's probe transport: a fresh connection per
// probe (closed with a short linger by the default dial, so probes leave no
// TIME_WAIT behind), no proxy, no compression, certificates not verified.
func newTransport(dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true},
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		MaxIdleConnsPerHost: -1,
	}
}

// newHTTPRequest builds the request of an httpGet probe as the kubelet's
// NewRequestForHTTPGetAction: host defaults to the pod IP, scheme to http,
// the port by number or name, the probe's headers, the kubelet's
// User-Agent and Accept unless the probe sets them, Host from the headers.
func (m *Manager) newHTTPRequest(ctx context.Context, g *v1.HTTPGetAction, c *v1.Container, podIP string) (*http.Request, error) {
	host := g.Host
	if host == "" {
		host = podIP
	}
	if host == "" {
		return nil, errors.New("no host to probe: the pod has no IP yet and the probe sets no host")
	}
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return nil, err
	}
	return httpget.NewRequest(ctx, g, host, port, m.userAgent)
}

// httpProbe sends req: 2xx succeeds, 3xx (a redirect not followed)
// succeeds with a warning, anything else fails; connection errors and
// timeouts fail. Redirects are followed only to the same host, at most 10.
func (m *Manager) httpProbe(req *http.Request, timeout time.Duration) (outcome, string, error) {
	client := &http.Client{Timeout: timeout, Transport: m.transport(), CheckRedirect: httpget.SameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		// net/http dials apart from the request: a dial the probe gave up
		// on (timeout, ctx end) would go on for as long as the OS tries
		// (minutes to a pod IP that does not answer), outliving the probe
		// and Run. Closing idle connections cancels such orphaned dials;
		// the default transport keeps no idle connection to lose.
		client.CloseIdleConnections()
		return outcomeFailure, err.Error(), nil
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		return outcomeFailure, "", err
	}
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return outcomeWarning, "Probe terminated redirects, Response body: " + string(body), nil
		}
		return outcomeSuccess, "", nil
	}
	// As the kubelet, the message leaves the body out (it may hold secrets).
	return outcomeFailure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// tcpProbe succeeds if a connection opens within timeout.
func (m *Manager) tcpProbe(ctx context.Context, host string, port int, timeout time.Duration) (outcome, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	var conn net.Conn
	var err error
	if m.dial == nil {
		conn, err = probeDialer(timeout).DialContext(ctx, "tcp", addr)
	} else {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err = m.dial(ctx, "tcp", addr)
		cancel()
	}
	if err != nil {
		return outcomeFailure, err.Error(), nil
	}
	_ = conn.Close()
	return outcomeSuccess, "", nil
}

// grpcProbe calls grpc.health.v1.Health/Check for service and succeeds if
// it answers SERVING within timeout.
func (m *Manager) grpcProbe(ctx context.Context, host, service string, port int, timeout time.Duration) (outcome, string, error) {
	if host == "" {
		return outcomeUnknown, "", errors.New("no host to probe: the pod has no IP yet")
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(m.userAgent),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			if m.dial != nil {
				return m.dial(ctx, "tcp", a)
			}
			return probeDialer(0).DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		return outcomeFailure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.Unimplemented:
			return outcomeFailure, "this server does not implement the grpc health protocol (grpc.health.v1.Health): " + st.Message(), nil
		case codes.DeadlineExceeded:
			return outcomeFailure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return outcomeFailure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return outcomeFailure, fmt.Sprintf("service unhealthy (responded with %q)", s.String()), nil
	}
	return outcomeSuccess, "service healthy", nil
}

// execProbe runs the probe's command in the container: exit 0 succeeds,
// another code or a timeout fails.
func (m *Manager) execProbe(ctx context.Context, w *worker, timeout time.Duration) (outcome, string, error) {
	if m.runner == nil {
		return outcomeUnknown, "", errors.New("exec probes need a runtime that runs commands in containers (runtime.CommandRunner); this one does not")
	}
	cmd := w.command()
	// The runtime enforces timeout; this bounds a runtime that does not,
	// and its end is a timeout too (as the kubelet's CRI client makes of a
	// call past its deadline), not an error to retry.
	bounded, cancel := context.WithTimeout(ctx, timeout+2*time.Minute)
	defer cancel()
	stdout, stderr, code, err := m.runner.ExecSync(bounded, w.cid, cmd, timeout)
	if err != nil {
		if errors.Is(err, runtime.ErrExecTimeout) || (bounded.Err() != nil && ctx.Err() == nil) {
			return outcomeFailure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
		}
		return outcomeUnknown, "", err
	}
	var out string
	if len(stdout)+len(stderr) > 0 {
		b := append(stdout[:len(stdout):len(stdout)], stderr...)
		if len(b) > maxOutput {
			b = b[:maxOutput]
		}
		out = string(b)
	}
	if code != 0 {
		return outcomeFailure, out, nil
	}
	return outcomeSuccess, out, nil
}

// command is the exec probe's command with $(VAR) references to the
// container's env expanded, as the kubelet's
// ExpandContainerCommandOnlyStatic: each name has its last entry's Value,
// which is empty for a valueFrom variable (not resolved here); computed
// once per worker.
func (w *worker) command() []string {
	if w.cmd == nil {
		w.cmd = expandCommand(w.probe.Exec.Command, w.container.Env)
	}
	return w.cmd
}

func expandCommand(cmd []string, env []v1.EnvVar) []string {
	lookup := func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i].Name == name {
				return env[i].Value, true
			}
		}
		return "", false
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = podenv.Expand(s, lookup)
	}
	return out
}

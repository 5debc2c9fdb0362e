package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
)

// runOnce runs p once against podIP, as a worker would.
func runOnce(t *testing.T, p *v1.Probe, c v1.Container, podIP string, runner runtime.CommandRunner) (outcome, string, error) {
	t.Helper()
	m, err := New(Config{Status: &fakeStatus{}, Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	c.ReadinessProbe = p
	pod := podWith("u1", c)
	w := newWorker(m, pod, &pod.Spec.Containers[0], false, Readiness, p)
	w.cid = runtime.ContainerID{Type: "fake", ID: "c1"}
	return m.runProbe(context.Background(), w, podIP)
}

func hostPort(t *testing.T, raw string) (string, int) {
	u, _ := url.Parse(raw)
	h, p, _ := net.SplitHostPort(u.Host)
	n, _ := strconv.Atoi(p)
	return h, n
}

func httpGet(path string, port int, headers ...v1.HTTPHeader) *v1.Probe {
	return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Path: path, Port: intstr.FromInt32(int32(port)), HTTPHeaders: headers}}}
}

func TestHTTPProbe(t *testing.T) {
	var gotUA, gotAccept, gotCustom, gotHost string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotAccept, gotCustom, gotHost = r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("X-Custom"), r.Host
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
		_, _ = w.Write([]byte("secret body"))
	})
	mux.HandleFunc("/local-redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/local-redirect-bad", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status/500", http.StatusFound)
	})
	mux.HandleFunc("/remote-redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow-headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host, port := hostPort(t, srv.URL)

	cases := []struct {
		name    string
		path    string
		want    outcome
		wantOut string
		wantErr bool
	}{
		{"200 succeeds", "/ok", outcomeSuccess, "", false},
		{"399 succeeds with a warning", "/status/399", outcomeWarning, "Probe terminated redirects, Response body: secret body", false},
		{"400 fails without the body", "/status/400", outcomeFailure, "HTTP probe failed with statuscode: 400", false},
		{"500 fails", "/status/500", outcomeFailure, "HTTP probe failed with statuscode: 500", false},
		{"a redirect to the same host is followed", "/local-redirect", outcomeSuccess, "", false},
		{"a followed redirect to a failing page fails", "/local-redirect-bad", outcomeFailure, "HTTP probe failed with statuscode: 500", false},
		{"a redirect to another host is not followed and warns", "/remote-redirect", outcomeWarning, "Probe terminated redirects", false},
		{"more than 10 redirects fail", "/loop", outcomeFailure, "stopped after 10 redirects", false},
		{"headers later than the timeout fail", "/slow-headers", outcomeFailure, "Client.Timeout exceeded", false},
		{"a body slower than the timeout is an error", "/slow-body", outcomeFailure, "", true},
		{"a big body is read up to the cap", "/big", outcomeSuccess, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, out, err := runOnce(t, httpGet(tc.path, port), v1.Container{Name: "app"}, host, nil)
			if (err != nil) != tc.wantErr || o != tc.want || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("got %v %q %v, want %v %q error=%v", o, out, err, tc.want, tc.wantOut, tc.wantErr)
			}
		})
	}

	t.Run("the kubelet's User-Agent and Accept, the probe's headers and Host", func(t *testing.T) {
		o, _, err := runOnce(t, httpGet("/ok", port, v1.HTTPHeader{Name: "X-Custom", Value: "v"}, v1.HTTPHeader{Name: "Host", Value: "svc.local"}),
			v1.Container{Name: "app"}, host, nil)
		if err != nil || o != outcomeSuccess {
			t.Fatal(o, err)
		}
		if gotUA != "kube-probe/1.37" || gotAccept != "*/*" || gotCustom != "v" || gotHost != "svc.local" {
			t.Fatalf("UA %q Accept %q X-Custom %q Host %q", gotUA, gotAccept, gotCustom, gotHost)
		}
	})
	t.Run("a User-Agent header of the probe wins", func(t *testing.T) {
		_, _, _ = runOnce(t, httpGet("/ok", port, v1.HTTPHeader{Name: "User-Agent", Value: "mine"}), v1.Container{Name: "app"}, host, nil)
		if gotUA != "mine" {
			t.Fatalf("UA %q", gotUA)
		}
	})
	t.Run("a named port resolves to the container port", func(t *testing.T) {
		p := httpGet("/ok", 0)
		p.HTTPGet.Port = intstr.FromString("web")
		o, _, err := runOnce(t, p, v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}, host, nil)
		if err != nil || o != outcomeSuccess {
			t.Fatal(o, err)
		}
	})
	t.Run("no pod IP and no host is an error", func(t *testing.T) {
		if _, _, err := runOnce(t, httpGet("/ok", port), v1.Container{Name: "app"}, "", nil); err == nil || !strings.Contains(err.Error(), "no host to probe") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the probe's host wins over the pod IP", func(t *testing.T) {
		p := httpGet("/ok", port)
		p.HTTPGet.Host = host
		if o, _, err := runOnce(t, p, v1.Container{Name: "app"}, "192.0.2.1", nil); err != nil || o != outcomeSuccess {
			t.Fatal(o, err)
		}
	})
	t.Run("a refused connection fails", func(t *testing.T) {
		o, out, err := runOnce(t, httpGet("/", closedPort(t)), v1.Container{Name: "app"}, "127.0.0.1", nil)
		if err != nil || o != outcomeFailure || !strings.Contains(out, "refused") {
			t.Fatal(o, out, err)
		}
	})
}

// closedPort returns a local port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tcp := func(port int) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}
	}
	if o, out, err := runOnce(t, tcp(l.Addr().(*net.TCPAddr).Port), v1.Container{Name: "app"}, "127.0.0.1", nil); err != nil || o != outcomeSuccess {
		t.Fatalf("open port: %v %q %v", o, out, err)
	}
	if o, out, err := runOnce(t, tcp(closedPort(t)), v1.Container{Name: "app"}, "127.0.0.1", nil); err != nil || o != outcomeFailure || !strings.Contains(out, "refused") {
		t.Fatalf("closed port: %v %q %v", o, out, err)
	}
	if _, _, err := runOnce(t, tcp(80), v1.Container{Name: "app"}, "", nil); err == nil || !strings.Contains(err.Error(), "no host to probe") {
		t.Fatalf("no pod IP: %v, want an error, not a probe of the node's localhost", err)
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	bare := grpc.NewServer() // no health service
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = bare.Serve(lb) }()
	defer bare.Stop()

	probe := func(port int, service string) *v1.Probe {
		p := &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port)}}}
		if service != "" {
			p.GRPC.Service = &service
		}
		return p
	}
	port := l.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name    string
		probe   *v1.Probe
		want    outcome
		wantOut string
	}{
		{"a serving server succeeds", probe(port, ""), outcomeSuccess, "service healthy"},
		{"a service not serving fails", probe(port, "db"), outcomeFailure, `service unhealthy (responded with "NOT_SERVING")`},
		{"an unknown service fails", probe(port, "nope"), outcomeFailure, "error: health rpc probe failed"},
		{"a server without the health service fails", probe(lb.Addr().(*net.TCPAddr).Port, ""), outcomeFailure,
			"this server does not implement the grpc health protocol"},
		{"a refused connection fails within the timeout", probe(closedPort(t), ""), outcomeFailure, "timeout: health rpc did not complete within 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, out, err := runOnce(t, tc.probe, v1.Container{Name: "app"}, "127.0.0.1", nil)
			if err != nil || o != tc.want || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("got %v %q %v, want %v %q", o, out, err, tc.want, tc.wantOut)
			}
		})
	}
}

func TestExecProbe(t *testing.T) {
	r := newFakeRunner()
	r.setCode("bad", 2)
	exec := func(cmd string) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd, "$(X)"}}}}
	}
	c := v1.Container{Name: "app", Env: []v1.EnvVar{{Name: "X", Value: "y"}}}
	if o, out, err := runOnce(t, exec("good"), c, "", r); err != nil || o != outcomeSuccess || out != "out" {
		t.Fatalf("exit 0: %v %q %v", o, out, err)
	}
	if o, _, err := runOnce(t, exec("bad"), c, "", r); err != nil || o != outcomeFailure {
		t.Fatalf("exit 2: %v %v", o, err)
	}
	r.hang["slow"] = true
	if o, out, err := runOnce(t, exec("slow"), c, "", r); err != nil || o != outcomeFailure || out != `command "slow y" timed out` {
		t.Fatalf("timeout: %v %q %v", o, out, err)
	}
	if _, _, err := runOnce(t, exec("good"), c, "", nil); err == nil || !strings.Contains(err.Error(), "runtime.CommandRunner") {
		t.Fatalf("no runner: %v", err)
	}
}

func TestAnHTTPProbeThatGivesUpLeavesNoDialBehind(t *testing.T) {
	dialEnded := make(chan struct{})
	tr := newTransport(probeDialer(0).DialContext)
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // a pod IP that never answers
		close(dialEnded)
		return nil, ctx.Err()
	}
	m, err := New(Config{Status: &fakeStatus{}, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, "http://192.0.2.1:80/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, _, err := m.httpProbe(req, 10*time.Millisecond); o != outcomeFailure || err != nil {
		t.Fatalf("probe = %v, %v; want a failure", o, err)
	}
	select {
	case <-dialEnded:
	case <-time.After(time.Minute): // only keeps a broken test from hanging
		t.Fatal("the dial outlived the probe")
	}
}

// TestNetworkProbesDialThroughConfigDial: httpGet, tcpSocket and grpc probes
// reach the pod through Config.Dial when it is set (a runtime whose pods
// are not on the host's network), with the pod's address.
func TestNetworkProbesDialThroughConfigDial(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer web.Close()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(gl) }()
	defer gs.Stop()
	const podIP = "10.123.0.7" // reachable only through Dial
	for _, tc := range []struct {
		name   string
		probe  *v1.Probe
		target string // where Dial connects
	}{
		{"httpGet", httpGet("/healthz", 8080), web.Listener.Addr().String()},
		{"tcpSocket", &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}, web.Listener.Addr().String()},
		{"grpc", &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 8080}}}, gl.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var dialed []string
			m, err := New(Config{Status: &fakeStatus{}, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
				mu.Lock()
				dialed = append(dialed, address)
				mu.Unlock()
				var d net.Dialer
				return d.DialContext(ctx, network, tc.target)
			}})
			if err != nil {
				t.Fatal(err)
			}
			c := v1.Container{Name: "app", ReadinessProbe: tc.probe}
			pod := podWith("u1", c)
			w := newWorker(m, pod, &pod.Spec.Containers[0], false, Readiness, tc.probe)
			o, out, err := m.runProbe(context.Background(), w, podIP)
			if err != nil || o != outcomeSuccess {
				t.Fatalf("probe: %v %q %v", o, out, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(dialed) == 0 || dialed[0] != net.JoinHostPort(podIP, "8080") {
				t.Fatalf("dialed %v, want the pod's address %s:8080", dialed, podIP)
			}
		})
	}
}

// TestANetworkProbesTimeoutRunsOnTheInjectedClock: with a clock that is not
// the real one (a simulation's), a probe of a pod that never answers ends
// when its timeout passes on that clock.
func TestANetworkProbesTimeoutRunsOnTheInjectedClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1, 0))
	m, err := New(Config{Status: &fakeStatus{}, Clock: clk, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // a pod that never answers
		return nil, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	probe := &v1.Probe{TimeoutSeconds: 30, ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
	c := v1.Container{Name: "app", ReadinessProbe: probe}
	pod := podWith("u1", c)
	w := newWorker(m, pod, &pod.Spec.Containers[0], false, Readiness, probe)
	done := make(chan outcome, 1)
	go func() {
		o, _, _ := m.runProbe(context.Background(), w, "10.1.2.3")
		done <- o
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(29 * time.Second)
	select {
	case o := <-done:
		t.Fatalf("the probe ended (%v) before its timeout on the clock", o)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Second)
	select {
	case o := <-done:
		if o != outcomeFailure {
			t.Fatalf("got %v, want a failure", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not end when its timeout passed on the clock")
	}
}

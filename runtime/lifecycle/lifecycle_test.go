package lifecycle

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
)

// execStub answers ExecSync with a fixed result and records commands.
type execStub struct {
	mu     sync.Mutex
	cmds   [][]string
	stdout string
	stderr string
	code   int
	err    error
	block  bool // wait for ctx
}

func (e *execStub) ExecSync(ctx context.Context, _ runtime.ContainerID, cmd []string, timeout time.Duration) ([]byte, []byte, int, error) {
	e.mu.Lock()
	e.cmds = append(e.cmds, cmd)
	e.mu.Unlock()
	if timeout != 0 {
		return nil, nil, 0, errors.New("hooks must not set a timeout")
	}
	if e.block {
		<-ctx.Done()
		return nil, nil, 0, ctx.Err()
	}
	return []byte(e.stdout), []byte(e.stderr), e.code, e.err
}

type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Eventf(_ apiruntime.Object, typ, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, typ+" "+reason)
}

var testPod = &v1.Pod{}

func init() {
	testPod.Name, testPod.Namespace, testPod.UID = "p", "ns", "uid1"
}

func TestExecHandler(t *testing.T) {
	c := &v1.Container{Name: "c"}
	h := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "x"}}}
	for _, tc := range []struct {
		name    string
		stub    *execStub
		wantErr string
		wantMsg string
	}{
		{name: "exit 0 passes", stub: &execStub{stdout: "hi"}},
		{name: "non-zero exit fails with stderr", stub: &execStub{stdout: "o", stderr: "bad", code: 3},
			wantErr: "command 'sh -c x' exited with 3: bad",
			wantMsg: `Exec lifecycle hook ([sh -c x]) for Container "c" in Pod "p_ns(uid1)" failed - error: command 'sh -c x' exited with 3: bad, message: "obad"`},
		{name: "runtime error fails", stub: &execStub{err: runtime.ErrNotFound}, wantErr: "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{Exec: tc.stub})
			msg, err := r.Run(context.Background(), runtime.ContainerID{ID: "1"}, testPod, c, h)
			if tc.wantErr == "" {
				if err != nil || msg != "" {
					t.Fatalf("Run = %q, %v; want success", msg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.wantMsg != "" && msg != tc.wantMsg {
				t.Fatalf("msg = %q\nwant  %q", msg, tc.wantMsg)
			}
		})
	}
	if _, err := New(Config{}).Run(context.Background(), runtime.ContainerID{}, testPod, c, h); !errors.Is(err, runtime.ErrNotSupported) {
		t.Fatalf("exec without a CommandRunner: %v, want ErrNotSupported", err)
	}
}

func TestHTTPHandler(t *testing.T) {
	type seen struct {
		path, ua, custom, auth, host string
	}
	var mu sync.Mutex
	var got []seen
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.RequestURI(), r.UserAgent(), r.Header.Get("X-Custom"), r.Header.Get("Authorization"), r.Host})
		mu.Unlock()
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/away":
			http.Redirect(w, r, "http://elsewhere.invalid/x", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/landed", http.StatusFound)
		}
	})
	plain := httptest.NewServer(mux)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(mux)
	defer tlsSrv.Close()
	hostPort := func(s *httptest.Server) (string, intstr.IntOrString) {
		u, _ := url.Parse(s.URL)
		return u.Hostname(), intstr.Parse(u.Port())
	}
	ip, port := hostPort(plain)
	tip, tport := hostPort(tlsSrv)
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: port.IntVal}}}
	for _, tc := range []struct {
		name      string
		get       v1.HTTPGetAction
		podIP     string
		wantErr   bool
		wantPaths []string
		wantEvent string
	}{
		{name: "host defaults to the pod IP, named port", get: v1.HTTPGetAction{Path: "/hook?a=1", Port: intstr.FromString("web")},
			podIP: ip, wantPaths: []string{"/hook?a=1"}},
		{name: "a 500 answer passes, as with the kubelet", get: v1.HTTPGetAction{Host: ip, Path: "/fail", Port: port},
			wantPaths: []string{"/fail"}},
		{name: "redirect to the same host is followed", get: v1.HTTPGetAction{Host: ip, Path: "/here", Port: port},
			wantPaths: []string{"/here", "/landed"}},
		{name: "redirect to another host is not followed", get: v1.HTTPGetAction{Host: ip, Path: "/away", Port: port},
			wantPaths: []string{"/away"}},
		{name: "https with an unverified certificate", get: v1.HTTPGetAction{Host: tip, Path: "/s", Port: tport, Scheme: v1.URISchemeHTTPS},
			wantPaths: []string{"/s"}},
		{name: "https answered in plain HTTP falls back to http without Authorization",
			get: v1.HTTPGetAction{Host: ip, Path: "/fb", Port: port, Scheme: v1.URISchemeHTTPS,
				HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "secret"}, {Name: "X-Custom", Value: "v"}}},
			wantPaths: []string{"/fb"}, wantEvent: "Warning LifecycleHTTPFallback"},
		{name: "unknown named port fails", get: v1.HTTPGetAction{Host: ip, Path: "/", Port: intstr.FromString("nope")}, wantErr: true},
		{name: "no pod IP fails", get: v1.HTTPGetAction{Path: "/", Port: port}, wantErr: true},
		{name: "refused connection fails", get: v1.HTTPGetAction{Host: "127.0.0.1", Path: "/", Port: intstr.FromInt32(1)}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			rec := &events{}
			r := New(Config{Recorder: rec, PodIP: func(context.Context, *v1.Pod) (string, error) { return tc.podIP, nil }})
			msg, err := r.Run(context.Background(), runtime.ContainerID{}, testPod, c, &v1.LifecycleHandler{HTTPGet: &tc.get})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Run = %q, %v; wantErr %v", msg, err, tc.wantErr)
			}
			if tc.wantErr && !strings.HasPrefix(msg, "HTTP lifecycle hook ("+tc.get.Path+`) for Container "c" in Pod "p_ns(uid1)" failed - error: `) {
				t.Fatalf("msg = %q", msg)
			}
			mu.Lock()
			defer mu.Unlock()
			var paths []string
			for _, s := range got {
				paths = append(paths, s.path)
				if !strings.HasPrefix(s.ua, "kube-lifecycle/") {
					t.Errorf("User-Agent %q", s.ua)
				}
				if s.auth != "" {
					t.Errorf("Authorization %q reached the server after the fallback", s.auth)
				}
			}
			if strings.Join(paths, ",") != strings.Join(tc.wantPaths, ",") {
				t.Fatalf("server saw %v, want %v", paths, tc.wantPaths)
			}
			if len(tc.get.HTTPHeaders) > 0 && got[0].custom != "v" {
				t.Fatalf("header X-Custom = %q", got[0].custom)
			}
			if strings.Join(rec.got, ",") != tc.wantEvent {
				t.Fatalf("events %v, want %q", rec.got, tc.wantEvent)
			}
		})
	}
}

func TestSleepHandler(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	r := New(Config{Clock: clk})
	h := &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), runtime.ContainerID{}, testPod, &v1.Container{Name: "c"}, h)
		done <- err
	}()
	waitWaiters(t, clk)
	clk.Step(4 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("sleep of 5s returned after 4s: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("sleep: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg, err := r.Run(ctx, runtime.ContainerID{}, testPod, &v1.Container{Name: "c"}, h)
	if err == nil || msg != `Sleep lifecycle hook (5) for Container "c" in Pod "p_ns(uid1)" failed - error: container terminated before sleep hook finished` {
		t.Fatalf("cut-short sleep = %q, %v", msg, err)
	}
}

func waitWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	for i := 0; !clk.HasWaiters(); i++ {
		if i > 5000 {
			t.Fatal("nothing waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// gate is a hook that runs until released (or its ctx ends), so a test
// moves the clock while it runs.
type gate struct {
	started, release chan struct{}
	fail             bool
}

func (g *gate) ExecSync(ctx context.Context, _ runtime.ContainerID, _ []string, _ time.Duration) ([]byte, []byte, int, error) {
	close(g.started)
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	}
	if g.fail {
		return nil, nil, 1, nil
	}
	return nil, nil, 0, nil
}

func TestPreStopGraceAccounting(t *testing.T) {
	hooked := &v1.Container{Name: "c", Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}}}
	for _, tc := range []struct {
		name       string
		c          *v1.Container
		grace      int64
		takes      time.Duration // how long the hook runs; past grace: until abandoned
		fail       bool
		wantLeft   int64
		wantFailed bool
	}{
		{name: "no hook keeps the grace period", c: &v1.Container{Name: "c"}, grace: 30, wantLeft: 30},
		{name: "hook time is taken out of the grace period", c: hooked, grace: 30, takes: 10 * time.Second, wantLeft: 20},
		{name: "partial seconds are not taken", c: hooked, grace: 30, takes: 10900 * time.Millisecond, wantLeft: 20},
		{name: "at least the minimum is left", c: hooked, grace: 30, takes: 29 * time.Second, wantLeft: MinGracePeriod},
		{name: "a hook past the grace period is abandoned, not failed", c: hooked, grace: 30, takes: time.Hour, wantLeft: MinGracePeriod},
		{name: "no grace period runs no hook", c: hooked, grace: 0, wantLeft: 0},
		{name: "a failing hook is reported", c: hooked, grace: 30, takes: time.Second, fail: true, wantLeft: 29, wantFailed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			g := &gate{started: make(chan struct{}), release: make(chan struct{}), fail: tc.fail}
			r := New(Config{Clock: clk, Exec: g})
			type res struct {
				left   int64
				failed bool
			}
			done := make(chan res, 1)
			go func() {
				left, failed, _ := r.PreStop(context.Background(), runtime.ContainerID{}, testPod, tc.c, tc.grace)
				done <- res{left, failed}
			}()
			if tc.takes > 0 {
				<-g.started
				waitWaiters(t, clk) // the grace period's timer
				if tc.takes < time.Duration(tc.grace)*time.Second {
					clk.Step(tc.takes)
					close(g.release)
				} else {
					clk.Step(time.Duration(tc.grace) * time.Second)
				}
			}
			got := <-done
			if got.left != tc.wantLeft || got.failed != tc.wantFailed {
				t.Fatalf("PreStop = %d, failed %v; want %d, %v", got.left, got.failed, tc.wantLeft, tc.wantFailed)
			}
		})
	}
}

package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/httpget"
	"github.com/nodekit/nodekit/runtime"
)

// maxBody is how much of a hook's HTTP response is read, so the connection
// ends cleanly; the rest is dropped.
const maxBody = 10 << 10

// MinGracePeriod is the least a container gets between TERM and KILL once
// its preStop hook ran, as the kubelet's minimumGracePeriodInSeconds.
const MinGracePeriod = 2

// Config configures a Runner.
type Config struct {
	// Exec runs exec handlers, the runtime's ExecSync. Nil: exec handlers
	// fail.
	Exec runtime.CommandRunner
	// Dial opens the connections of httpGet handlers. Default: the host's
	// network (net.Dialer).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// PodIP returns the IP of pod, where an httpGet handler without a host
	// goes. Nil: such handlers fail.
	PodIP func(ctx context.Context, pod *v1.Pod) (string, error)
	// Clock times sleep handlers and PreStop. Default: the real clock.
	Clock clock.Clock
	// Recorder receives the LifecycleHTTPFallback warning. Optional.
	Recorder runtime.EventRecorder
	// Log receives a line per failed hook. Default: logr.Discard().
	Log logr.Logger
}

// Runner runs lifecycle handlers. It is safe for concurrent use.
type Runner struct {
	cfg    Config
	client func() *http.Client
}

// New returns a Runner over c.
func New(c Config) *Runner {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	// Built at the first HTTP hook: most pods have none, and an
	// http.Transport is ~1 KiB on each of a simulator's thousand agents.
	client := sync.OnceValue(func() *http.Client {
		tr := &http.Transport{
			DialContext: dial,
			// The kubelet's lifecycle client does not verify certificates.
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's
			DisableKeepAlives: true,
		}
		return &http.Client{Transport: tr, CheckRedirect: httpget.SameHostRedirects}
	})
	return &Runner{cfg: c, client: client}
}

// Run runs handler h for container c (instance id) of pod and returns, on
// failure, the kubelet's message and an error.
func (r *Runner) Run(ctx context.Context, id runtime.ContainerID, pod *v1.Pod, c *v1.Container, h *v1.LifecycleHandler) (string, error) {
	switch {
	case h == nil:
		err := errors.New("invalid handler: none")
		return "Cannot run handler: " + err.Error(), err
	case h.Exec != nil:
		out, err := r.runExec(ctx, id, h.Exec.Command)
		if err != nil {
			r.cfg.Log.V(1).Info("Exec lifecycle hook failed", "pod", podName(pod), "container", c.Name, "command", h.Exec.Command, "err", err)
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, podName(pod), err, out), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := r.runHTTP(ctx, pod, c, h.HTTPGet); err != nil {
			r.cfg.Log.V(1).Info("HTTP lifecycle hook failed", "pod", podName(pod), "container", c.Name, "path", h.HTTPGet.Path, "err", err)
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, c.Name, podName(pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		if err := r.sleep(ctx, h.Sleep.Seconds); err != nil {
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				h.Sleep.Seconds, c.Name, podName(pod), err), err
		}
		return "", nil
	}
	err := fmt.Errorf("invalid handler: %v", h)
	return "Cannot run handler: " + err.Error(), err
}

// PreStop runs c's preStop hook, if any, within grace seconds on the
// clock, and returns the grace period left for TERM: grace less the
// whole seconds the hook took, never below MinGracePeriod once a hook
// ran. A hook still running when grace ends is abandoned (its ctx ends)
// and counts as done, as the kubelet stops waiting then; failed reports a
// hook that failed before. grace <= 0 runs no hook.
func (r *Runner) PreStop(ctx context.Context, id runtime.ContainerID, pod *v1.Pod, c *v1.Container, grace int64) (left int64, failed bool, msg string) {
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || grace <= 0 {
		return grace, false, ""
	}
	start := r.cfg.Clock.Now()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		msg string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			if p := recover(); p != nil {
				res = result{err: fmt.Errorf("preStop hook panicked: %v", p)}
				res.msg = res.err.Error()
			}
			done <- res
		}()
		res.msg, res.err = r.Run(hctx, id, pod, c, c.Lifecycle.PreStop)
	}()
	t := r.cfg.Clock.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	select {
	case res := <-done:
		failed, msg = res.err != nil, res.msg
	case <-t.C():
		r.cfg.Log.V(2).Info("PreStop hook not completed in grace period", "pod", podName(pod), "container", c.Name, "gracePeriod", grace)
		cancel()
		<-done // so no goroutine outlives the call
	case <-ctx.Done():
		cancel()
		<-done
	}
	left = grace - int64(r.cfg.Clock.Since(start)/time.Second)
	return max(left, MinGracePeriod), failed, msg
}

// runExec runs cmd with no timeout but ctx's and returns stdout and stderr
// together.
func (r *Runner) runExec(ctx context.Context, id runtime.ContainerID, cmd []string) ([]byte, error) {
	if r.cfg.Exec == nil {
		return nil, fmt.Errorf("exec handlers: %w", runtime.ErrNotSupported)
	}
	stdout, stderr, code, err := r.cfg.Exec.ExecSync(ctx, id, cmd, 0)
	out := append(append([]byte{}, stdout...), stderr...)
	if err != nil {
		return out, err
	}
	if code != 0 {
		return out, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr)
	}
	return out, nil
}

func (r *Runner) sleep(ctx context.Context, seconds int64) error {
	t := r.cfg.Clock.NewTimer(time.Duration(seconds) * time.Second)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return errors.New("container terminated before sleep hook finished")
	}
}

func (r *Runner) runHTTP(ctx context.Context, pod *v1.Pod, c *v1.Container, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		if r.cfg.PodIP == nil {
			return errors.New("failed to find networking container: the runtime reports no pod IP")
		}
		ip, err := r.cfg.PodIP(ctx, pod)
		if err != nil {
			return err
		}
		if ip == "" {
			return fmt.Errorf("failed to find networking container: pod %s has no IP", podName(pod))
		}
		host = ip
	}
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return err
	}
	req, err := httpget.NewRequest(ctx, g, host, port, "kube-lifecycle/nodekit")
	if err != nil {
		return err
	}
	resp, err := r.client().Do(req)
	discard(resp)
	if !plainHTTPAnswer(err) {
		return err
	}
	// An https hook answered in plain HTTP: the kubelet retries over http.
	retry := req.Clone(ctx)
	retry.URL.Scheme = "http"
	retry.Header.Del("Authorization")
	resp, rerr := r.client().Do(retry)
	discard(resp)
	if rerr != nil {
		return err
	}
	if rerr := runtime.RecordEvent(r.cfg.Recorder, pod, v1.EventTypeWarning, "LifecycleHTTPFallback",
		"request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host); rerr != nil {
		r.cfg.Log.Error(rerr, "Cannot record event", "pod", podName(pod))
	}
	return nil
}

// resolvePort is the port number of p: a number, a number in a string, or
// the name of one of c's ports.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	if c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("couldn't find port: %v in container %q", p.StrVal, containerName(c))
}

// plainHTTPAnswer reports whether err is net/http's for a server that
// answered a TLS handshake in plain HTTP.
func plainHTTPAnswer(err error) bool {
	var ue *url.Error
	return err != nil && errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "server gave HTTP response to HTTPS client")
}

func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close()
}

// podName is the kubelet's format.Pod: name_namespace(uid).
func podName(pod *v1.Pod) string {
	if pod == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

func containerName(c *v1.Container) string {
	if c == nil {
		return ""
	}
	return c.Name
}

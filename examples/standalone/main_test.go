package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lastFrame returns the last table the live view printed.
func lastFrame(out string) string {
	i := strings.LastIndex(out, "--- ")
	if i < 0 {
		return ""
	}
	return out[i:]
}

// row finds the line of pod's container in frame and returns its phase,
// state and restarts.
func row(frame, pod, container string) (phase, state, restarts string, ok bool) {
	re := regexp.MustCompile(`^(\S+)\s+(\S+(?: \(\S+\))?)\s+(\S+)\s+(.+?)\s+(\S+)$`)
	for _, line := range strings.Split(frame, "\n") {
		m := re.FindStringSubmatch(line)
		if m != nil && m[1] == pod && m[3] == container {
			return m[2], m[4], m[5], true
		}
	}
	return "", "", "", false
}

// frameAt returns the frame that starts at offset i of out and the offset
// where the next one starts. The view writes each frame in one Write.
func frameAt(out string, i int) (string, int) {
	end := strings.Index(out[i+1:], "\n--- ")
	if end < 0 {
		return out[i:], len(out)
	}
	end += i + 2
	return out[i:end], end
}

// started is run in the background.
type started struct {
	stdout, stderr testenv.Buffer
	cancel         context.CancelFunc
	done           chan error
	// seen is the offset in stdout of the frame the last waitFrame matched;
	// the next one looks at it and every frame after it.
	seen int
}

func start(t *testing.T, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{cancel: cancel, done: make(chan error, 1)}
	args = noDefaultPorts(args)
	go func() { s.done <- run(ctx, args, &s.stdout, &s.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(2 * time.Minute):
			t.Error("run did not return after cancel")
		}
	})
	return s
}

// noDefaultPorts turns the API and healthz ports off unless args set them
// (a later flag wins): another process, or another test package running
// at the same time, may hold the kubelet's default ports, and a port in
// use stops the agent at start.
func noDefaultPorts(args []string) []string {
	return append([]string{"-port", "0", "-healthz-port", "0"}, args...)
}

// stop cancels run and returns its error.
func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("run did not return after cancel")
		return nil
	}
}

// waitFrame returns the first frame, from the one the last waitFrame
// matched on, that satisfies cond. It looks at every frame printed, in
// order, so a frame that a later one replaced before this poll is seen all
// the same; the deadline only keeps a broken test from hanging.
func (s *started) waitFrame(t *testing.T, what string, cond func(frame string) bool) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("run returned %v while waiting for %s\nstdout:\n%s\nstderr:\n%s", err, what, s.stdout.String(), s.stderr.String())
		default:
		}
		out := s.stdout.String()
		for i := s.seen; i < len(out); {
			f, next := frameAt(out, i)
			if cond(f) {
				s.seen = i
				return f
			}
			i = next
		}
		if i := strings.LastIndex(out, "--- "); i > s.seen {
			s.seen = i // the frames before the last one did not match
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\nstdout:\n%s\nstderr:\n%s", what, s.stdout.String(), s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type want struct{ pod, container, phase, state string }

func matches(frame string, wants []want) bool {
	for _, w := range wants {
		phase, state, _, ok := row(frame, w.pod, w.container)
		if !ok || phase != w.phase || !strings.HasPrefix(state, w.state) {
			return false
		}
	}
	return true
}

func TestShippedManifestsReachTheirPhasesOnTheInMemoryRuntime(t *testing.T) {
	s := start(t, "-pod-manifest-path", "manifests", "-node-name", "test-node", "-file-check-frequency", "1s")
	wants := []want{
		{"web-test-node", "web", "Running", "running"},
		{"job-test-node", "job", "Succeeded", "exited 0 (Completed)"},
		{"with-init-test-node", "init:setup", "Running", "exited 0 (Completed)"},
		{"with-init-test-node", "app", "Running", "running"},
	}
	s.waitFrame(t, "expected phases", func(f string) bool { return matches(f, wants) })
	if !strings.Contains(s.stdout.String(), "with-init-test-node  Pending") {
		t.Errorf("the init container pod was never shown Pending before Running:\n%s", s.stdout.String())
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	final := lastFrame(s.stdout.String())
	if strings.Contains(final, "running") {
		t.Fatalf("a container still runs after shutdown:\n%s", final)
	}
	for _, w := range []want{{"web-test-node", "web", "", ""}, {"with-init-test-node", "app", "", ""}} {
		if _, state, _, _ := row(final, w.pod, w.container); !strings.HasPrefix(state, "exited") {
			t.Errorf("%s/%s after shutdown: %q, want exited", w.pod, w.container, state)
		}
	}
}

// controlPlaneManifest is shaped like kubeadm's static control-plane pods:
// host network and a privileged container.
const controlPlaneManifest = `apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system}
spec:
  hostNetwork: true
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.21-0
    securityContext: {privileged: true}
`

func TestHostNetworkPrivilegedStaticPodRunsByDefaultAndIsRejectedWhenDisallowed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(controlPlaneManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  want
	}{
		{"admitted by default, as by the kubelet", nil, want{"kube-system/etcd-test-node", "etcd", "Running", "running"}},
		{"admitted and run with the evented PLEG", []string{"-evented-pleg"}, want{"kube-system/etcd-test-node", "etcd", "Running", "running"}},
		{"host namespaces disallowed", []string{"-allow-host-namespaces=false"},
			want{"kube-system/etcd-test-node", "-", "Failed (HostNamespacesNotAllowed)", ""}},
		{"privileged disallowed", []string{"-allow-privileged=false"},
			want{"kube-system/etcd-test-node", "-", "Failed (PrivilegedNotAllowed)", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, append([]string{"-pod-manifest-path", dir, "-node-name", "test-node"}, tc.flags...)...)
			s.waitFrame(t, tc.want.phase, func(f string) bool { return matches(f, []want{tc.want}) })
			if err := s.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPodsFromManifestURLWithHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "secret" {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		fmt.Fprint(w, "apiVersion: v1\nkind: Pod\nmetadata: {name: remote}\nspec:\n  containers: [{name: app, image: busybox}]\n")
	}))
	defer srv.Close()
	s := start(t, "-pod-manifest-path", "", "-manifest-url", srv.URL, "-manifest-url-header", "X-Token:secret",
		"-http-check-frequency", "1s", "-node-name", "test-node")
	s.waitFrame(t, "the served pod running", func(f string) bool {
		return matches(f, []want{{"remote-test-node", "app", "Running", "running"}})
	})
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
}

func TestDurationStopsTheProgram(t *testing.T) {
	var stdout, stderr testenv.Buffer
	err := run(context.Background(), noDefaultPorts([]string{"-pod-manifest-path", "manifests/web.yaml", "-node-name", "n", "-duration", "100ms"}), &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "POD") {
		t.Fatalf("no view printed:\n%s", stdout.String())
	}
}

func TestBadFlagsGiveAClearError(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-nope"}, "flag provided but not defined: -nope"},
		{"extra argument", []string{"manifests"}, `unexpected arguments ["manifests"]`},
		{"zero max pods", []string{"-max-pods", "0"}, "-max-pods must be positive"},
		{"negative sync frequency", []string{"-sync-frequency", "-1s"}, "-sync-frequency must be positive"},
		{"negative duration", []string{"-duration", "-1s"}, "-duration must not be negative"},
		{"missing manifest directory", []string{"-pod-manifest-path", "no/such/dir"}, "-pod-manifest-path: stat no/such/dir"},
		{"default manifests outside the repository root", []string{"-pod-manifest-path", defaultManifests}, "run from the repository root"},
		{"no source at all", []string{"-pod-manifest-path", ""}, "nothing to run"},
		{"header without a colon", []string{"-manifest-url", "http://x", "-manifest-url-header", "nocolon"}, `"nocolon": want key:value`},
		{"header without URL", []string{"-manifest-url-header", "a:b"}, "-manifest-url-header needs -manifest-url"},
		{"pause image without CRI", []string{"-pause-image", "p:1"}, "-pause-image needs -cri"},
		{"QoS cgroups without CRI", []string{"-cgroups-per-qos"}, "-cgroups-per-qos needs -cri"},
		{"enforcing more than pods", []string{"-enforce-node-allocatable", "system-reserved"}, `only "pods" is supported`},
		{"a reservation that is no quantity", []string{"-kube-reserved", "memory=lots"}, `"memory=lots"`},
		{"invalid node name", []string{"-node-name", "Not_A_Name"}, `-node-name "Not_A_Name"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := tt.args
			if tt.name != "default manifests outside the repository root" && tt.name != "no source at all" && tt.name != "missing manifest directory" {
				args = append([]string{"-pod-manifest-path", "manifests"}, args...)
			}
			err := run(context.Background(), args, &stdout, &stderr)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a usage error containing %q", err, tt.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("printed a view despite the error:\n%s", stdout.String())
			}
		})
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"pod-manifest-path", "manifest-url", "manifest-url-header", "node-name", "sync-frequency",
		"file-check-frequency", "http-check-frequency", "allow-privileged", "allow-host-namespaces", "max-pods", "evented-pleg", "v", "duration", "cri",
		"pause-image", "pod-logs-root", "pods-root", "cluster-dns", "cluster-domain", "resolv-conf", "cgroups-per-qos",
		"cgroup-driver", "cgroup-root", "system-reserved", "kube-reserved", "enforce-node-allocatable"} {
		if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(f) + `\b`).MatchString(stderr.String()) {
			t.Errorf("-h does not document -%s:\n%s", f, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), exitAnnotation) {
		t.Errorf("-h does not explain %s", exitAnnotation)
	}
}

func TestManifestURLHeaderIsRepeatable(t *testing.T) {
	o, err := parseFlags([]string{"-pod-manifest-path", "manifests", "-manifest-url", "http://x",
		"-manifest-url-header", "a:1,b:2", "-manifest-url-header", "a:3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.pods.Header["A"]; len(got) != 2 || got[0] != "1" || got[1] != "3" {
		t.Errorf("header A = %v, want [1 3]", got)
	}
	if got := o.pods.Header["B"]; len(got) != 1 || got[0] != "2" {
		t.Errorf("header B = %v, want [2]", got)
	}
}

// TestProbesManifestOnTheInMemoryRuntime runs the shipped probes.yaml: the
// container turns ready after its readiness probe's initial delay, unready
// when its (scripted) health check starts failing, and the failed liveness
// probe restarts it; /metrics/probes counts the probes.
func TestProbesManifestOnTheInMemoryRuntime(t *testing.T) {
	ap := freePort(t)
	s := start(t, "-pod-manifest-path", "manifests/probes.yaml", "-node-name", "test-node", "-port", ap)
	notReady := func(f string) bool {
		return matches(f, []want{{"probed-test-node", "app", "Running", "running; not ready"}})
	}
	s.waitFrame(t, "the probed container ready", func(f string) bool {
		return matches(f, []want{{"probed-test-node", "app", "Running", "running; ready"}})
	})
	s.waitFrame(t, "the container restarted after failing its liveness probe", func(f string) bool {
		_, _, restarts, ok := row(f, "probed-test-node", "app")
		n, _ := strconv.Atoi(restarts)
		return ok && n >= 1
	})
	// Each container runs unready for the readiness probe's initial delay
	// (2s); the view polls every 500ms, so the frames of both containers
	// show it unless the view was starved for seconds twice over.
	s.seen = 0
	s.waitFrame(t, "the probed container running but not ready", notReady)
	_, probes := httpGet(t, "http://127.0.0.1:"+ap+"/metrics/probes")
	for _, want := range []string{
		`prober_probe_total{container="app",namespace="default",pod="probed-test-node",pod_uid=`,
		`probe_type="Liveness",result="failed"}`, `probe_type="Readiness",result="successful"}`,
		"# TYPE prober_probe_duration_seconds histogram",
	} {
		if !strings.Contains(probes, want) {
			t.Errorf("/metrics/probes lacks %s:\n%s", want, probes)
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
}

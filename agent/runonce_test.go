package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/syncloop"
)

const manifestFmt = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  restartPolicy: %s
  containers:
  - name: %s
    image: busybox
%s`

func manifest(name string, policy v1.RestartPolicy, container, extra string) string {
	return fmt.Sprintf(manifestFmt, name, policy, container, extra)
}

func writeManifests(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// onceOptions retry on a fake clock that a helper steps while RunOnce
// waits, so a retry costs no real time.
func onceOptions(t *testing.T) (syncloop.RunOnceConfig, func()) {
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
				if clk.HasWaiters() {
					clk.Step(time.Second)
				}
			}
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	// ManifestWait is on the same clock: generous, so that stepping the clock
	// for retries does not give up on a slow file read.
	return syncloop.RunOnceConfig{Clock: clk, ManifestWait: time.Hour, RetryDelay: time.Second, MaxRetries: 5}, stop
}

func resultsByName(t *testing.T, res []syncloop.PodResult) map[string]syncloop.PodResult {
	t.Helper()
	out := map[string]syncloop.PodResult{}
	for _, r := range res {
		out[r.Pod.Name] = r
	}
	return out
}

func TestRunOnce(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		setup   func(*fake.Runtime)
		maxPods int
		deny    bool // DenyPrivileged
		// want maps pod name to the phase it reports, and whether it ran.
		want map[string]struct {
			phase v1.PodPhase
			ok    bool
		}
	}{
		{
			name: "long-running and completing pods both run",
			files: map[string]string{
				"web.yaml": manifest("web", v1.RestartPolicyAlways, "web", ""),
				"job.yaml": manifest("job", v1.RestartPolicyNever, "job", ""),
			},
			setup: func(rt *fake.Runtime) { rt.SetContainerBehavior("job", fake.Behavior{Exit: true}) },
			want: map[string]struct {
				phase v1.PodPhase
				ok    bool
			}{"web-n1": {v1.PodRunning, true}, "job-n1": {v1.PodSucceeded, true}},
		},
		{
			name: "privileged pod is rejected when denied and never reaches the runtime",
			deny: true,
			files: map[string]string{
				"web.yaml":  manifest("web", v1.RestartPolicyAlways, "web", ""),
				"priv.yaml": manifest("priv", v1.RestartPolicyAlways, "priv", "    securityContext:\n      privileged: true\n"),
			},
			want: map[string]struct {
				phase v1.PodPhase
				ok    bool
			}{"web-n1": {v1.PodRunning, true}, "priv-n1": {v1.PodFailed, false}},
		},
		{
			name: "container that cannot start fails its pod only",
			files: map[string]string{
				"web.yaml":  manifest("web", v1.RestartPolicyAlways, "web", ""),
				"fail.yaml": manifest("fail", v1.RestartPolicyAlways, "broken", ""),
			},
			setup: func(rt *fake.Runtime) {
				rt.SetContainerBehavior("broken", fake.Behavior{StartError: errors.New("no such binary")})
			},
			want: map[string]struct {
				phase v1.PodPhase
				ok    bool
			}{"web-n1": {v1.PodRunning, true}, "fail-n1": {v1.PodPending, false}},
		},
		{
			name: "pods beyond MaxPods are rejected, the oldest admitted",
			files: map[string]string{
				"a.yaml": strings.Replace(manifest("young", v1.RestartPolicyAlways, "yc", ""), "namespace: default", "namespace: default\n  creationTimestamp: \"2021-01-01T00:00:00Z\"", 1),
				"b.yaml": strings.Replace(manifest("old", v1.RestartPolicyAlways, "oc", ""), "namespace: default", "namespace: default\n  creationTimestamp: \"2020-01-01T00:00:00Z\"", 1),
			},
			maxPods: 1,
			want: map[string]struct {
				phase v1.PodPhase
				ok    bool
			}{"old-n1": {v1.PodRunning, true}, "young-n1": {v1.PodFailed, false}},
		},
		{
			name:  "empty manifest directory runs nothing",
			files: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := fake.New(fake.Config{})
			if tt.setup != nil {
				tt.setup(rt)
			}
			c := fastConfig(rt)
			c.Sources, c.StaticPodPath = nil, writeManifests(t, tt.files)
			if tt.maxPods != 0 {
				c.MaxPods = tt.maxPods
			}
			c.DenyPrivileged = tt.deny
			a, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			opts, stop := onceOptions(t)
			res, err := a.RunOnce(context.Background(), opts)
			stop()
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(res); i++ {
				if podmanager.Older(res[i].Pod, res[i-1].Pod) {
					t.Errorf("results not oldest first: %s before %s", res[i-1].Pod.Name, res[i].Pod.Name)
				}
			}
			got := resultsByName(t, res)
			if len(got) != len(tt.want) {
				t.Fatalf("results for %v, want %v", got, tt.want)
			}
			for name, w := range tt.want {
				r, ok := got[name]
				if !ok {
					t.Fatalf("no result for %s", name)
				}
				if (r.Err == nil) != w.ok {
					t.Errorf("%s: err = %v, want ran = %v", name, r.Err, w.ok)
				}
				if r.Pod.Status.Phase != w.phase {
					t.Errorf("%s: phase %s, want %s", name, r.Pod.Status.Phase, w.phase)
				}
				st, err := rt.GetPodStatus(context.Background(), r.Pod.UID, "", "")
				if err != nil {
					t.Fatal(err)
				}
				if reached := len(st.SandboxStatuses) > 0; reached != (w.phase != v1.PodFailed) {
					t.Errorf("%s: on the runtime = %v, want %v", name, reached, w.phase != v1.PodFailed)
				}
			}
		})
	}
}

func TestRunOnceLeavesPodsRunning(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Sources, c.StaticPodPath = nil, writeManifests(t, map[string]string{"web.yaml": manifest("web", v1.RestartPolicyAlways, "web", "")})
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := onceOptions(t)
	res, err := a.RunOnce(context.Background(), opts)
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("RunOnce = %v, %v", res, err)
	}
	if n := runningContainers(t, rt, res[0].Pod.UID); n != 1 {
		t.Fatalf("%d containers running after RunOnce, want 1", n)
	}
	cs := res[0].Pod.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || cs[0].ContainerID == "" {
		t.Fatalf("reported container statuses %+v, want one running", cs)
	}
	if err := a.Run(context.Background()); err == nil {
		t.Fatal("Run after RunOnce succeeded")
	}
}

func TestRunOnceReadsManifestURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, manifest("remote", v1.RestartPolicyAlways, "app", ""))
	}))
	defer srv.Close()
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Sources, c.ManifestURL = nil, srv.URL
	c.StaticPodPath = writeManifests(t, map[string]string{"web.yaml": manifest("web", v1.RestartPolicyAlways, "web", "")})
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := onceOptions(t)
	res, err := a.RunOnce(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	got := resultsByName(t, res)
	for _, name := range []string{"web-n1", "remote-n1"} {
		if r, ok := got[name]; !ok || r.Err != nil || r.Pod.Status.Phase != v1.PodRunning {
			t.Errorf("%s: %+v, want running from both sources", name, r)
		}
	}
}

func TestRunOnceFailures(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config, *fake.Runtime)
		want   error
	}{
		{"no static source", func(c *Config, _ *fake.Runtime) { c.StaticPodPath = "" }, ErrNoStaticSource},
		{"runtime not answering", func(_ *Config, rt *fake.Runtime) { _ = rt.SetFailureRate("Status", 1) }, fake.ErrInjected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := fake.New(fake.Config{})
			c := fastConfig(rt)
			c.Sources, c.StaticPodPath = nil, writeManifests(t, nil)
			tt.mutate(&c, rt)
			a, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.RunOnce(context.Background(), syncloop.RunOnceConfig{}); !errors.Is(err, tt.want) {
				t.Fatalf("RunOnce = %v, want %v", err, tt.want)
			}
			if rt.CallCount("SyncPod") != 0 {
				t.Fatal("a pod was synced")
			}
		})
	}
}

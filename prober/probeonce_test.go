package prober

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/runtime"
)

func TestProbeOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/away":
			w.Header().Set("Location", "http://elsewhere.invalid/")
			w.WriteHeader(http.StatusFound)
			_, _ = w.Write([]byte("moved"))
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	exec := func(cmd ...string) *v1.Probe {
		return &v1.Probe{TimeoutSeconds: 1, ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
	}
	for _, tc := range []struct {
		name    string
		probe   *v1.Probe
		want    Result
		wantOut string
		wantErr bool
	}{
		{"an exec that exits 0 succeeds with its output", exec("true"), Success, "out", false},
		{"an exec that exits 1 fails with its output", exec("false"), Failure, "out", false},
		{"an exec's $(VAR) is the container's env", exec("$(CMD)"), Success, "out", false},
		{"an http 200 succeeds", httpGet("/ok", port), Success, "", false},
		{"a redirect elsewhere succeeds with the warning's text", httpGet("/away", port), Success, "Probe terminated redirects, Response body: moved", false},
		{"an http 500 fails with the kubelet's message", httpGet("/boom", port), Failure, "HTTP probe failed with statuscode: 500", false},
		{"a probe without a handler is no verdict", &v1.Probe{}, Failure, "", true},
		{"a named port the container lacks is no verdict", &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("web")}}}, Failure, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runner := newFakeRunner()
			runner.setCode("false", 1)
			rec := &recorder{}
			m, err := New(Config{Status: &fakeStatus{}, Runner: runner, Recorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			c := v1.Container{Name: "app", Env: []v1.EnvVar{{Name: "CMD", Value: "true"}}}
			pod := podWith("u1", c)
			got, out, err := m.ProbeOnce(context.Background(), Liveness, pod, &pod.Spec.Containers[0], runtime.ContainerID{Type: "fake", ID: "c1"}, tc.probe, host)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want || out != tc.wantOut {
				t.Fatalf("got %v %q, want %v %q", got, out, tc.want, tc.wantOut)
			}
			if tc.name == "an exec's $(VAR) is the container's env" && runner.called("true") != 1 {
				t.Fatalf("the expanded command was not run: %v", runner.calls)
			}
			if n := len(rec.list()); n != 0 {
				t.Fatalf("recorded %d events, want none", n)
			}
			if m.Workers() != 0 {
				t.Fatalf("a one-shot probe left %d workers", m.Workers())
			}
		})
	}
	m, _ := New(Config{Status: &fakeStatus{}})
	if _, _, err := m.ProbeOnce(context.Background(), Liveness, nil, nil, runtime.ContainerID{}, nil, ""); err == nil {
		t.Fatal("ProbeOnce without a pod gave no error")
	}
}

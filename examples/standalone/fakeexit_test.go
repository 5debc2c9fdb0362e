package main

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestParseExits(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]exit
		bad      bool
	}{
		{name: "empty means none", in: "", want: map[string]exit{}},
		{name: "code defaults to 0", in: "job=3s", want: map[string]exit{"job": {after: 3 * time.Second}}},
		{name: "several with codes", in: "a=1s:2, b=500ms:0", want: map[string]exit{"a": {time.Second, 2}, "b": {500 * time.Millisecond, 0}}},
		{name: "missing duration", in: "job", bad: true},
		{name: "bad duration", in: "job=soon", bad: true},
		{name: "negative duration", in: "job=-1s", bad: true},
		{name: "code out of range", in: "job=1s:256", bad: true},
		{name: "no name", in: "=1s", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseExits(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("parseExits(%q) = %v, want an error", tt.in, got)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("parseExits(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: %+v, want %+v", k, got[k], v)
				}
			}
		})
	}
}

func scriptedPod(name, annotation string, init ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "job", Image: "busybox"}}},
	}
	if annotation != "" {
		p.Annotations = map[string]string{exitAnnotation: annotation}
	}
	for _, c := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: c, Image: "busybox"})
	}
	return p
}

func containerState(t *testing.T, rt runtime.Runtime, pod *v1.Pod, name string) (runtime.ContainerState, int) {
	t.Helper()
	st, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	c := st.FindContainerStatusByName(name)
	if c == nil {
		return "", 0
	}
	return c.State, c.ExitCode
}

func TestAnnotatedContainersExitPerPod(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	f, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rt := newScripted(f, clk)
	exits, stays := scriptedPod("exits", "job=2s:3"), scriptedPod("stays", "")
	for _, p := range []*v1.Pod{exits, stays} {
		if err := rt.SyncPod(ctx, p, nil, nil, nil).Error(); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Second)
	if s, _ := containerState(t, rt, exits, "job"); s != runtime.ContainerStateRunning {
		t.Fatalf("exits/job before its time: %s, want running", s)
	}
	clk.Step(time.Second)
	if s, code := containerState(t, rt, exits, "job"); s != runtime.ContainerStateExited || code != 3 {
		t.Fatalf("exits/job after 2s: %s %d, want exited 3", s, code)
	}
	if _, err := rt.GetPods(ctx, true); err != nil {
		t.Fatal(err)
	}
	if s, _ := containerState(t, rt, stays, "job"); s != runtime.ContainerStateRunning {
		t.Fatalf("a container of the same name in a pod without the annotation: %s, want running", s)
	}
}

func TestGetPodsMakesDueContainersExit(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	f, _ := fake.New(fake.Config{Clock: clk})
	rt := newScripted(f, clk)
	pod := scriptedPod("exits", "job=1s")
	if err := rt.SyncPod(ctx, pod, nil, nil, nil).Error(); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	pods, err := rt.GetPods(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || len(pods[0].Containers) != 0 {
		t.Fatalf("relist after the exit lists %+v, want the pod's sandbox and no running container", pods)
	}
}

func TestInitContainersExitByDefault(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now())
	f, _ := fake.New(fake.Config{Clock: clk})
	rt := newScripted(f, clk)
	pod := scriptedPod("init", "", "setup")
	if err := rt.SyncPod(ctx, pod, nil, nil, nil).Error(); err != nil {
		t.Fatal(err)
	}
	clk.Step(defaultInitExit)
	if s, code := containerState(t, rt, pod, "setup"); s != runtime.ContainerStateExited || code != 0 {
		t.Fatalf("init container after %s: %s %d, want exited 0", defaultInitExit, s, code)
	}
}

func TestBadAnnotationStartsNothing(t *testing.T) {
	ctx := context.Background()
	f, _ := fake.New(fake.Config{})
	rt := newScripted(f, clocktesting.NewFakeClock(time.Now()))
	pod := scriptedPod("bad", "job=soon")
	err := rt.SyncPod(ctx, pod, nil, nil, nil).Error()
	if !errors.Is(err, runtime.ErrCreateContainerConfig) {
		t.Fatalf("SyncPod error %v, want CreateContainerConfigError", err)
	}
	if n := f.CallCount("SyncPod"); n != 0 {
		t.Fatalf("the fake was synced %d times, want 0", n)
	}
}

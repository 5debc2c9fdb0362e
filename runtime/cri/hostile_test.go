package cri_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/reltable"
	"github.com/nodekit/nodekit/runtime"
)

// A runtime answering with malformed responses — entries without
// metadata, IDs or statuses, statuses without their parts — makes the
// manager's calls fail with an error or skip the entry, never panic; a
// healthy pod's status stays readable once the runtime behaves again.
func TestMalformedCRIResponsesAreSurvived(t *testing.T) {
	e := newFakeEnv(t)
	good := newPod("good", "busybox:1")
	res := e.sync(t, good, runtime.NewBackoff(time.Second, time.Minute, time.Hour, e.clock))
	require.NoError(t, res.Error())

	cases := []struct {
		method  string
		rewrite func(any) any
	}{
		{"ListPodSandbox", func(r any) any {
			resp := r.(*runtimeapi.ListPodSandboxResponse)
			resp.Items = append(resp.Items, nil, &runtimeapi.PodSandbox{}, &runtimeapi.PodSandbox{Id: "x", Labels: map[string]string{"io.kubernetes.pod.uid": "uid-good"}})
			return resp
		}},
		{"ListContainers", func(r any) any {
			resp := r.(*runtimeapi.ListContainersResponse)
			resp.Containers = append(resp.Containers, nil, &runtimeapi.Container{}, &runtimeapi.Container{Id: "y", PodSandboxId: "nope", Labels: map[string]string{"io.kubernetes.pod.uid": "uid-good"}})
			return resp
		}},
		{"PodSandboxStatus", func(any) any { return &runtimeapi.PodSandboxStatusResponse{} }},
		{"PodSandboxStatus", func(any) any {
			return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: "z"}}
		}},
		{"ContainerStatus", func(any) any { return &runtimeapi.ContainerStatusResponse{} }},
		{"ContainerStatus", func(any) any {
			return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "w", State: 42}}
		}},
		{"Status", func(any) any { return &runtimeapi.StatusResponse{} }},
		{"Version", func(any) any { return &runtimeapi.VersionResponse{} }},
		{"ListImages", func(r any) any {
			resp := r.(*runtimeapi.ListImagesResponse)
			resp.Images = append(resp.Images, nil, &runtimeapi.Image{})
			return resp
		}},
		{"ImageStatus", func(any) any { return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{}} }},
	}
	outcomes := map[string]int{}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d %s", i, c.method), func(t *testing.T) {
			e.srv.SetResponseRewrite(c.method, c.rewrite)
			defer e.srv.SetResponseRewrite(c.method, nil)
			var errs []error
			_, err := e.m.GetPods(e.ctx, true)
			errs = append(errs, err)
			_, err = e.m.GetPodStatus(e.ctx, good.UID, good.Name, good.Namespace)
			errs = append(errs, err)
			_, err = e.m.Status(e.ctx)
			errs = append(errs, err)
			_, err = e.m.Version(e.ctx)
			errs = append(errs, err)
			_, err = e.m.ListImages(e.ctx)
			errs = append(errs, err)
			st, err := e.m.GetPodStatus(e.ctx, good.UID, good.Name, good.Namespace)
			errs = append(errs, err)
			if err == nil {
				res := e.m.SyncPod(e.ctx, good, st, nil, runtime.NewBackoff(time.Second, time.Minute, time.Hour, e.clock))
				errs = append(errs, res.Error())
			}
			for _, err := range errs {
				if err != nil {
					outcomes["error"]++
					t.Logf("%s: %v", c.method, err)
				} else {
					outcomes["ok"]++
				}
			}
		})
	}
	st := e.status(t, good)
	assert.Len(t, st.RunningContainerStatuses(), 1, "the good pod still runs its one container")
	reltable.Print(t, reltable.Row{
		Test: "runtime/cri: TestMalformedCRIResponsesAreSurvived",
		Done: fmt.Sprintf("fakecri rewrites %d responses: nil and empty sandboxes, containers and images, statuses without status, unknown states", len(cases)),
		Held: fmt.Sprintf("no panic; %d calls failed with an error, %d skipped the bad entries; the running pod untouched", outcomes["error"], outcomes["ok"]),
		Run:  "go test -run MalformedCRI -v ./runtime/cri",
	})
}

// A response over the manager's MaxMsgSize (16 MiB) fails the call with
// ResourceExhausted, not the manager; the next normal answer is used.
func TestEnormousCRIResponseIsRefused(t *testing.T) {
	e := newFakeEnv(t)
	big := strings.Repeat("x", 1<<20)
	e.srv.SetResponseRewrite("ListContainers", func(r any) any {
		resp := r.(*runtimeapi.ListContainersResponse)
		for i := range 20 {
			resp.Containers = append(resp.Containers, &runtimeapi.Container{Id: fmt.Sprint("big", i),
				Metadata: &runtimeapi.ContainerMetadata{Name: "big"}, Labels: map[string]string{"junk": big}})
		}
		return resp
	})
	_, err := e.m.GetPods(e.ctx, true)
	require.Error(t, err)
	assert.Equal(t, codes.ResourceExhausted, status.Code(errorsCause(err)), "got %v", err)
	e.srv.SetResponseRewrite("ListContainers", nil)
	_, err = e.m.GetPods(e.ctx, true)
	require.NoError(t, err)
	reltable.Print(t, reltable.Row{
		Test: "runtime/cri: TestEnormousCRIResponseIsRefused",
		Done: "fakecri answers ListContainers with 20 MiB",
		Held: "GetPods fails with ResourceExhausted (limit 16 MiB); the next call works",
		Run:  "go test -run EnormousCRI -v ./runtime/cri",
	})
}

// errorsCause unwraps to the innermost error carrying a gRPC status.
func errorsCause(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

// A pod with 10,000 environment variables starts; one whose
// CreateContainer request would exceed MaxMsgSize fails that pod with a
// clear error and leaves another pod running.
func TestHugePodSpecs(t *testing.T) {
	e := newFakeEnv(t)
	many := newPod("many-env", "busybox:1", func(p *v1.Pod) {
		for i := range 10000 {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: fmt.Sprintf("VAR_%05d", i), Value: "value"})
		}
	})
	res := e.sync(t, many, runtime.NewBackoff(time.Second, time.Minute, time.Hour, e.clock))
	require.NoError(t, res.Error())
	assert.Len(t, e.status(t, many).RunningContainerStatuses(), 1)

	other := newPod("other", "busybox:1")
	require.NoError(t, e.sync(t, other, runtime.NewBackoff(time.Second, time.Minute, time.Hour, e.clock)).Error())
	huge := newPod("huge-env", "busybox:1", func(p *v1.Pod) {
		v := strings.Repeat("x", 1<<20)
		for i := range 20 {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, v1.EnvVar{Name: fmt.Sprintf("BIG_%d", i), Value: v})
		}
	})
	res = e.sync(t, huge, runtime.NewBackoff(time.Second, time.Minute, time.Hour, e.clock))
	err := res.Error()
	require.Error(t, err)
	t.Logf("%.300v", err)
	assert.Contains(t, err.Error(), "larger than max")
	assert.Len(t, e.status(t, other).RunningContainerStatuses(), 1, "the other pod runs on")
	reltable.Print(t, reltable.Row{
		Test: "runtime/cri: TestHugePodSpecs",
		Done: "through fakecri: a pod with 10,000 env vars; a pod whose CreateContainer would be 20 MiB",
		Held: "the first runs; the second fails its sync with gRPC's \"larger than max\" (16 MiB) error; another pod keeps running",
		Run:  "go test -run HugePodSpecs -v ./runtime/cri",
	})
}

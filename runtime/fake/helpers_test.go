package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRuntime(t testing.TB, c fake.Config) (*fake.Runtime, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	if c.Clock == nil {
		c.Clock = clk
	}
	rt, err := fake.New(c)
	require.NoError(t, err)
	return rt, clk
}

func ctr(name string) v1.Container {
	return v1.Container{Name: name, Image: name + ":1"}
}

func sidecar(name string) v1.Container {
	c := ctr(name)
	c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return c
}

func newPod(name string, policy v1.RestartPolicy, cs ...v1.Container) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = name, "default", types.UID("uid-"+name)
	p.Spec.RestartPolicy = policy
	p.Spec.Containers = cs
	return p
}

// sync syncs pod against the runtime's current status, as a pod worker does.
func sync(t testing.TB, rt *fake.Runtime, pod *v1.Pod, b *runtime.Backoff) runtime.PodSyncResult {
	t.Helper()
	st, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	return rt.SyncPod(context.Background(), pod, st, nil, b)
}

func status(t testing.TB, rt *fake.Runtime, pod *v1.Pod) *runtime.PodStatus {
	t.Helper()
	st, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	return st
}

// newest returns the newest instance of the named container, or nil.
func newest(t testing.TB, rt *fake.Runtime, pod *v1.Pod, name string) *runtime.ContainerStatus {
	t.Helper()
	return status(t, rt, pod).FindContainerStatusByName(name)
}

// steps lists a result's steps as "Action target" or "Action target: Reason".
func steps(r runtime.PodSyncResult) []string {
	var out []string
	for _, s := range r.SyncResults {
		x := string(s.Action) + " " + s.Target
		if s.Error != nil {
			x += ": " + runtime.Reason(s.Error)
		}
		out = append(out, x)
	}
	return out
}

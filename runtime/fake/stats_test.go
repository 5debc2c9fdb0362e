package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

func TestScriptedUsage(t *testing.T) {
	ctx := context.Background()
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{CPUMilli: 2000, MemoryBytes: 1000, MemoryGrowth: 10, DiskBytes: 500, DiskGrowth: 1}})
	pod := newPod("web", v1.RestartPolicyAlways, ctr("app"), ctr("idle"))
	sync(t, rt, pod, runtime.NewBackoff(time.Second, time.Minute, 0, clk))

	clk.Step(10 * time.Second)
	list, err := rt.ListPodStats(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	ps := list[0]
	assert.Equal(t, pod.UID, ps.UID)
	assert.Nil(t, ps.CPU, "no pod-level figures")
	require.Len(t, ps.Containers, 2)
	app := ps.Containers[0]
	assert.Equal(t, "app", app.Name)
	assert.Equal(t, uint64(20e9), *app.CPU.UsageCoreNanoSeconds, "two cores for 10s")
	assert.Nil(t, app.CPU.UsageNanoCores, "the rate is the consumer's")
	assert.Equal(t, uint64(1100), *app.Memory.WorkingSetBytes)
	assert.Equal(t, uint64(510), *app.WritableLayer.UsedBytes)
	assert.Equal(t, uint64(0), *ps.Containers[1].CPU.UsageCoreNanoSeconds, "an unscripted container uses nothing")

	require.NoError(t, rt.SetUsage(pod.UID, "app", fake.Usage{CPUMilli: 0, MemoryBytes: 7}))
	clk.Step(10 * time.Second)
	list, err = rt.ListPodStats(ctx)
	require.NoError(t, err)
	app = list[0].Containers[0]
	assert.Equal(t, uint64(20e9), *app.CPU.UsageCoreNanoSeconds, "CPU time so far is kept")
	assert.Equal(t, uint64(7), *app.Memory.WorkingSetBytes)

	n, err := rt.NodeStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), *n.Memory.WorkingSetBytes)
	assert.Equal(t, uint64(16<<30-7), *n.Memory.AvailableBytes, "default 16Gi")
	assert.Equal(t, int64(2), *n.Processes)
	assert.Equal(t, t0, n.StartTime)

	pods, err := rt.GetPods(ctx, false)
	require.NoError(t, err)
	require.NoError(t, rt.KillPod(ctx, pod, *pods[0], nil))
	list, err = rt.ListPodStats(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "a killed pod has no ready sandbox")
	assert.Error(t, rt.SetUsage(pod.UID, "app", fake.Usage{}), "no running container")
}

func TestDedicatedImageFs(t *testing.T) {
	ctx := context.Background()
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{DiskBytes: 3 << 20}})
	rt.SetNodeOverhead(fake.Usage{DiskBytes: 5 << 20})
	sync(t, rt, newPod("web", v1.RestartPolicyAlways, ctr("app")), runtime.NewBackoff(time.Second, time.Minute, 0, clk))

	n, err := rt.NodeStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5<<20+3<<20+1<<20), *n.Fs.UsedBytes, "one filesystem: overhead, layer, image")
	st, err := rt.ImageFsInfo(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.CapacityBytes, "unknown size until set")

	rt.SetImageFsCapacity(100 << 20)
	n, err = rt.NodeStats(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5<<20), *n.Fs.UsedBytes, "nodefs keeps only the overhead")
	st, err = rt.ImageFsInfo(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(100<<20-4<<20), st.AvailableBytes, "image and writable layer on the image fs")
}

func TestCPUTimeOverAYearDoesNotOverflow(t *testing.T) {
	rt, clk := newRuntime(t, fake.Config{})
	rt.SetContainerBehavior("app", fake.Behavior{Usage: fake.Usage{CPUMilli: 64000}})
	sync(t, rt, newPod("web", v1.RestartPolicyAlways, ctr("app")), runtime.NewBackoff(time.Second, time.Minute, 0, clk))
	clk.Step(365 * 24 * time.Hour)
	list, err := rt.ListPodStats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(64*365*24*3600)*uint64(time.Second), *list[0].Containers[0].CPU.UsageCoreNanoSeconds, "64 cores for a year")
}

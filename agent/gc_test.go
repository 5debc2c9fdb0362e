package agent

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

func TestImageGC(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		capacity uint64 // bytes; 10 images of 1 MiB are present, "in-use" runs
		pinned   string
		age      time.Duration // since the images were first seen
		removed  int
		short    bool // the low threshold is out of reach: an error says so
	}{
		{"below the high threshold nothing is removed", 12 * mib, "", time.Hour, 0, false},
		{"at the high threshold unused images go down to the low one", 10 * mib * 100 / 85, "", time.Hour, 1, false},
		{"a full filesystem frees down to the low threshold", 10 * mib, "", time.Hour, 2, false},
		{"images younger than the minimum age stay", 10 * mib, "", time.Minute, 0, true},
		{"unknown capacity collects nothing", 0, "", time.Hour, 0, false},
		{"pinned and used images stay even when the threshold is out of reach", 2 * mib, "img-old0", time.Hour, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rt, _ := fake.New(fake.Config{})
			rt.SetImageFsCapacity(tc.capacity)
			pod := newPod("in-use", v1.RestartPolicyAlways, "run")
			require.NoError(t, rt.SyncPod(ctx, pod, nil, nil, nil).Error())
			for _, ref := range []string{"img-old0", "img-old1", "img-old2", "img-old3", "img-old4", "img-old5", "img-old6", "img-old7", "img-old8"} {
				_, err := rt.PullImage(ctx, ref, nil)
				require.NoError(t, err)
			}
			if tc.pinned != "" {
				rt.SetImagePinned(tc.pinned, true)
			}
			g := newImageGC(rt, Config{ImageGCHighThresholdPercent: 85, ImageGCLowThresholdPercent: 80, ImageMinimumGCAge: 2 * time.Minute})
			_, _ = g.collect(ctx, t0) // images first seen; too young to go
			_, err := g.collect(ctx, t0.Add(tc.age))
			assert.Equal(t, tc.short, err != nil, "error: %v", err)
			images, err := rt.ListImages(ctx)
			require.NoError(t, err)
			assert.Len(t, images, 10-tc.removed)
			refs := map[string]bool{}
			for _, img := range images {
				refs[img.RepoTags[0]] = true
			}
			assert.True(t, refs["img-run"], "the image of a running container stays")
			if tc.pinned != "" {
				assert.True(t, refs[tc.pinned], "a pinned image stays")
			}
		})
	}
}

func TestContainerGCKeepsDeadContainersBounded(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	rt.SetContainerBehavior("crash", fake.Behavior{Exit: true, ExitCode: 1})
	c := fastConfig(rt)
	c.ContainerGCPeriod = 50 * time.Millisecond
	r := start(t, c)
	pod := newPod("gc-crash", v1.RestartPolicyAlways, "crash")
	r.set(pod)
	waitFor(t, "several restarts", func() bool {
		p := r.pod(pod.UID)
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 4
	})
	waitFor(t, "dead containers bounded by the policy", func() bool {
		st, err := rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
		require.NoError(t, err)
		dead := 0
		for _, cs := range st.ContainerStatuses {
			if cs.State != runtime.ContainerStateRunning {
				dead++
			}
		}
		return dead <= 2 // the newest dead instance, and one that died since the last round
	})
	p := r.pod(pod.UID)
	assert.GreaterOrEqual(t, p.Status.ContainerStatuses[0].RestartCount, int32(4), "the restart count survives collection")
}

func TestContainerGCKeepsAFinishedPodUntilItIsDeleted(t *testing.T) {
	ctx := context.Background()
	rt, _ := fake.New(fake.Config{})
	rt.SetContainerBehavior("done", fake.Behavior{Exit: true, ExitCode: 0})
	c := fastConfig(rt)
	c.ContainerGCPeriod = 20 * time.Millisecond
	r := start(t, c)
	pod := newPod("gc-done", v1.RestartPolicyNever, "done")
	r.set(pod)
	waitFor(t, "the pod succeeded and its sandbox stopped", func() bool {
		return r.phase(pod.UID) == v1.PodSucceeded && rt.CallCount("KillPod") >= 1
	})
	rounds := rt.CallCount("GarbageCollect")
	waitFor(t, "three collections since", func() bool { return rt.CallCount("GarbageCollect") >= rounds+3 })
	st, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	assert.Len(t, st.ContainerStatuses, 1, "a finished pod keeps its container, and so its logs, while it exists")

	r.set() // deleted
	waitFor(t, "the deleted pod collected", func() bool {
		st, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		return err == nil && len(st.ContainerStatuses) == 0 && len(st.SandboxStatuses) == 0
	})
}

func TestContainerGCOffSwitch(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.ContainerGCPeriod, c.ImageGCPeriod = -1, -1
	r := start(t, c)
	r.set(newPod("gc-off", v1.RestartPolicyAlways, "a"))
	waitFor(t, "pod running", func() bool { return r.phase("uid-gc-off") == v1.PodRunning })
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, rt.CallCount("GarbageCollect"))
}

func TestUnsetContainerGCPolicyIsTheKubelets(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	require.NoError(t, err)
	c := Config{NodeName: "gc-defaults", Runtime: rt}
	require.NoError(t, c.setDefaults())
	want := runtime.GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}
	assert.Equal(t, want, *c.ContainerGCPolicy, "any age, one dead instance per container, no overall limit")
}

// TestImageGCDeleteUnused: the eviction manager's reclaim removes every
// unused image past the minimum age, below the high threshold too; used,
// pinned and young images stay.
func TestImageGCDeleteUnused(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rt, _ := fake.New(fake.Config{})
	rt.SetImageFsCapacity(1 << 40) // far below any threshold
	pod := newPod("in-use", v1.RestartPolicyAlways, "run")
	require.NoError(t, rt.SyncPod(ctx, pod, nil, nil, nil).Error())
	for _, ref := range []string{"img-a", "img-b", "img-pinned"} {
		_, err := rt.PullImage(ctx, ref, nil)
		require.NoError(t, err)
	}
	rt.SetImagePinned("img-pinned", true)
	g := newImageGC(rt, Config{ImageGCHighThresholdPercent: 85, ImageGCLowThresholdPercent: 80, ImageMinimumGCAge: 2 * time.Minute})
	require.NoError(t, g.deleteUnused(ctx, t0))
	images, err := rt.ListImages(ctx)
	require.NoError(t, err)
	assert.Len(t, images, 4, "images first seen now are too young")

	require.NoError(t, g.deleteUnused(ctx, t0.Add(3*time.Minute)))
	images, err = rt.ListImages(ctx)
	require.NoError(t, err)
	var refs []string
	for _, img := range images {
		refs = append(refs, img.RepoTags[0])
	}
	assert.ElementsMatch(t, []string{"img-run", "img-pinned"}, refs)
}

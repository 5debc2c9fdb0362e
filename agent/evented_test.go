package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
	"github.com/nodekit/nodekit/runtime/fake"
)

// eventedConfig is fastConfig with relists and resyncs an hour apart, so
// only the event stream can tell the agent of an exit.
func eventedConfig(rt *fake.Runtime) Config {
	c := fastConfig(rt)
	c.RelistPeriod, c.StreamingRelistPeriod, c.SyncFrequency = time.Hour, time.Hour, time.Hour
	c.EventedPLEG = true
	return c
}

// As in the kubelet, the evented PLEG is opt-in: a streaming runtime is
// relisted unless Config.EventedPLEG.
func TestEventedPLEGIsOptIn(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := eventedConfig(rt)
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if a.evented == nil {
		t.Fatal("no evented PLEG on a streaming runtime with EventedPLEG")
	}
	c.EventedPLEG = false
	if a, _ = New(c); a == nil {
		t.Fatal("New failed")
	}
	if a.evented != nil {
		t.Fatal("an evented PLEG without EventedPLEG")
	}
}

func TestExitReachesStatusThroughTheEventStream(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	rt.SetContainerBehavior("job", fake.Behavior{Exit: true, ExitAfter: 3 * time.Second})
	r := start(t, eventedConfig(rt))
	pod := newPod("evented-job", v1.RestartPolicyNever, "job")
	r.set(pod)
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	// From now on every listing fails: the PLEG's relists (every 2s while
	// streaming, to check the stream) cannot see the exit; only the
	// stream can tell of it.
	if err := rt.SetFailureRate("GetPods", 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod succeeded from the stream", func() bool { return r.phase(pod.UID) == v1.PodSucceeded })
}

func TestBrokenEventStreamFallsBackToRelisting(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := eventedConfig(rt)
	c.RelistPeriod = 20 * time.Millisecond // the fallback pace
	r := start(t, c)
	pod := newPod("evented-fallback", v1.RestartPolicyNever, "app")
	r.set(pod)
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	waitFor(t, "streaming", r.a.evented.Streaming)

	rt.BreakContainerEvents() // reopened only after 10s
	waitFor(t, "stream down", func() bool { return !r.a.evented.Streaming() })
	if err := rt.ExitContainer(pod.UID, "app", 3, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the exit seen by a relist", func() bool { return r.phase(pod.UID) == v1.PodFailed })
}

// On a CRI runtime (the in-process fakecri server, which streams
// GetContainerEvents) an exit reaches the pod's status from the stream.
func TestExitReachesStatusThroughCRIEvents(t *testing.T) {
	srv, err := fakecri.NewServer(fakecri.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	rt, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	c := fastConfig(rt)
	c.RelistPeriod, c.StreamingRelistPeriod, c.SyncFrequency = time.Hour, time.Hour, time.Hour
	c.EventedPLEG = true
	r := start(t, c)
	pod := newPod("cri-evented", v1.RestartPolicyNever, "app")
	r.set(pod)
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	require.True(t, r.a.evented.Streaming())
	id := r.pod(pod.UID).Status.ContainerStatuses[0].ContainerID
	cid, err := runtime.ParseContainerID(id)
	require.NoError(t, err)
	require.NoError(t, srv.Exit(cid.ID, 0))
	waitFor(t, "pod succeeded from the event", func() bool { return r.phase(pod.UID) == v1.PodSucceeded })
}

// TestEventedPLEGStartsEachContainerOnce: 1,000 pods started at once
// through runtime/cri with the evented PLEG. fakecri's stream, as
// containerd's, drops or delays events for a subscriber that lags, and its
// events carry status stamped with their own time: a pod worker must never
// act on status from before its own sync (kubernetes/kubernetes#123087),
// which started a container a second time. Before the cache was declared
// current only by relists, and before a relist that lost a write to a
// newer event looked at the pod again, some runs made up to 2,137
// containers, or left pods not Running after a minute.
func TestEventedPLEGStartsEachContainerOnce(t *testing.T) {
	const n = 1000
	srv, err := fakecri.NewServer(fakecri.Config{})
	require.NoError(t, err)
	defer srv.Close()
	srv.Images.SetFakeImages([]string{benchImage})
	m, err := cri.New(context.Background(), cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: t.TempDir(), PodsRoot: t.TempDir()})
	require.NoError(t, err)
	defer m.Close()
	cfg := benchConfig(m, n)
	cfg.EventedPLEG = true
	a, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	pods := benchPods(0, n)
	a.Channel(src) <- podconfig.PodUpdate{Op: podconfig.SET, Pods: pods}
	deadline := time.Now().Add(time.Minute)
	for _, p := range pods {
		for {
			st, ok := a.status.SharedPodStatus(p.UID)
			if ok && st.Phase == v1.PodRunning && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil {
				break
			}
			require.False(t, time.Now().After(deadline), "pod %s not Running after a minute", p.Name)
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Syncs that act on stale status would start more containers now.
	time.Sleep(time.Second)
	if got := srv.CallCounts()["CreateContainer"]; got != n {
		t.Fatalf("%d containers created for %d pods; pods with more than one: %s", got, n, duplicateContainers(srv))
	}
}

// duplicateContainers lists the sandboxes of srv holding more than one
// container, with each container's attempt, state and times.
func duplicateContainers(srv *fakecri.Server) string {
	srv.Runtime.Lock()
	defer srv.Runtime.Unlock()
	bySandbox := map[string][]string{}
	for _, c := range srv.Runtime.Containers {
		bySandbox[c.SandboxID] = append(bySandbox[c.SandboxID], fmt.Sprintf("%s attempt %d %v created %d started %d",
			c.Id, c.Metadata.GetAttempt(), c.State, c.CreatedAt, c.StartedAt))
	}
	var out []string
	for sb, cs := range bySandbox {
		if len(cs) > 1 {
			name := sb
			if s, ok := srv.Runtime.Sandboxes[sb]; ok {
				name = s.Metadata.GetName()
			}
			out = append(out, fmt.Sprintf("%s: %v", name, cs))
		}
	}
	return strings.Join(out, "; ")
}

// Without an event stream, the start of a pod's containers reaches its
// status through the relist the agent asks for, not the next periodic one
// (an hour away here; the kubelet's, up to 1s).
func TestStartedContainersAreRelistedAtOnce(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.RelistPeriod, c.SyncFrequency = time.Hour, time.Hour
	c.RelistOnRequest = true
	r := start(t, c)
	pod := newPod("relisted-at-once", v1.RestartPolicyAlways, "app")
	r.set(pod)
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
}

// A pod deleted soon after its last sync is killed after the relist its
// waiting worker asks for, not the next periodic one (an hour away here).
func TestDeletedPodIsKilledWithoutWaitingForThePeriodicRelist(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.RelistPeriod, c.SyncFrequency = time.Hour, time.Hour
	c.RelistOnRequest = true
	r := start(t, c)
	pod := newPod("deleted-at-once", v1.RestartPolicyAlways, "app")
	r.set(pod)
	waitFor(t, "pod running", func() bool { return r.phase(pod.UID) == v1.PodRunning })
	deleting := pod.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, ptr.To[int64](1)
	r.set(deleting)
	waitFor(t, "containers stopped", func() bool { return runningContainers(t, rt, pod.UID) == 0 })
}

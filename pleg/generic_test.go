package pleg

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// relistStep is one relist of a scripted sequence: what the runtime lists and
// which events must come out.
type relistStep struct {
	name string
	pods []*runtime.Pod
	want []PodLifecycleEvent
}

func runSteps(t *testing.T, tp *testPLEG, steps []relistStep) {
	t.Helper()
	for _, s := range steps {
		tp.lister.setPods(s.pods...)
		tp.relist(t)
		assert.Equal(t, events(s.want...), drain(tp.Watch()), s.name)
	}
}

// Ported from upstream's TestRelisting.
func TestRelisting(t *testing.T) {
	runSteps(t, newTestPLEG(t, nil), []relistStep{{
		name: "first relist reports every running and exited container, not unknown ones",
		pods: []*runtime.Pod{
			pod("1234", ctr("c1", cExited), ctr("c2", cRunning), ctr("c3", cUnknown)),
			pod("4567", ctr("c1", cExited)),
		},
		want: []PodLifecycleEvent{
			ev("1234", ContainerStarted, "c2"),
			ev("4567", ContainerDied, "c1"),
			ev("1234", ContainerDied, "c1"),
		},
	}, {
		name: "unchanged relist sends nothing",
		pods: []*runtime.Pod{
			pod("1234", ctr("c1", cExited), ctr("c2", cRunning), ctr("c3", cUnknown)),
			pod("4567", ctr("c1", cExited)),
		},
	}, {
		name: "only transitions to running, exited and gone are reported",
		pods: []*runtime.Pod{
			pod("1234", ctr("c2", cExited), ctr("c3", cRunning)),
			pod("4567", ctr("c4", cRunning)),
		},
		want: []PodLifecycleEvent{
			ev("1234", ContainerRemoved, "c1"),
			ev("1234", ContainerDied, "c2"),
			ev("1234", ContainerStarted, "c3"),
			ev("4567", ContainerRemoved, "c1"),
			ev("4567", ContainerStarted, "c4"),
		},
	}, {
		name: "running to created is not reported",
		pods: []*runtime.Pod{
			pod("1234", ctr("c2", cExited), ctr("c3", cCreated)),
			pod("4567", ctr("c4", cRunning)),
		},
	}})
}

// A relist finds a pod's record where the last listing had it, or by UID
// when the listing moved: reorders, insertions, removals and duplicates
// give the same events as a listing in a stable order.
func TestRelistFollowsPodsThroughReorderedListings(t *testing.T) {
	runSteps(t, newTestPLEG(t, nil), []relistStep{{
		name: "first relist",
		pods: []*runtime.Pod{pod("a", ctr("a1", cRunning)), pod("b", ctr("b1", cRunning)), pod("c", ctr("c1", cRunning))},
		want: []PodLifecycleEvent{ev("a", ContainerStarted, "a1"), ev("b", ContainerStarted, "b1"), ev("c", ContainerStarted, "c1")},
	}, {
		name: "the same pods in another order send nothing",
		pods: []*runtime.Pod{pod("c", ctr("c1", cRunning)), pod("a", ctr("a1", cRunning)), pod("b", ctr("b1", cRunning))},
	}, {
		name: "a pod inserted first and one removed shift the rest",
		pods: []*runtime.Pod{pod("x", ctr("x1", cRunning)), pod("c", ctr("c1", cRunning)), pod("b", ctr("b1", cExited))},
		want: []PodLifecycleEvent{
			ev("x", ContainerStarted, "x1"), ev("b", ContainerDied, "b1"),
			ev("a", ContainerDied, "a1"), ev("a", ContainerRemoved, "a1"),
		},
	}, {
		name: "a pod listed twice counts once, and a nil entry is skipped",
		pods: []*runtime.Pod{pod("x", ctr("x1", cRunning)), nil, pod("x", ctr("x1", cExited)), pod("c", ctr("c1", cExited)), pod("b", ctr("b1", cExited))},
		want: []PodLifecycleEvent{ev("c", ContainerDied, "c1")},
	}, {
		name: "back to the first order, with a change in each pod",
		pods: []*runtime.Pod{pod("b"), pod("c", ctr("c1", cExited), ctr("c2", cRunning)), pod("x", ctr("x1", cExited))},
		want: []PodLifecycleEvent{
			ev("b", ContainerRemoved, "b1"), ev("c", ContainerStarted, "c2"), ev("x", ContainerDied, "x1"),
		},
	}})
}

// Ported from upstream's TestRelistingWithSandboxes: sandboxes are diffed
// like containers.
func TestRelistingWithSandboxes(t *testing.T) {
	runSteps(t, newTestPLEG(t, nil), []relistStep{{
		name: "first relist reports running and exited sandboxes",
		pods: []*runtime.Pod{
			sandboxPod("1234", ctr("c1", cExited), ctr("c2", cRunning), ctr("c3", cUnknown)),
			sandboxPod("4567", ctr("c1", cExited)),
		},
		want: []PodLifecycleEvent{
			ev("1234", ContainerStarted, "c2"),
			ev("4567", ContainerDied, "c1"),
			ev("1234", ContainerDied, "c1"),
		},
	}, {
		name: "unchanged sandboxes send nothing",
		pods: []*runtime.Pod{
			sandboxPod("1234", ctr("c1", cExited), ctr("c2", cRunning), ctr("c3", cUnknown)),
			sandboxPod("4567", ctr("c1", cExited)),
		},
	}, {
		name: "sandbox transitions are reported",
		pods: []*runtime.Pod{
			sandboxPod("1234", ctr("c2", cExited), ctr("c3", cRunning)),
			sandboxPod("4567", ctr("c4", cRunning)),
		},
		want: []PodLifecycleEvent{
			ev("1234", ContainerRemoved, "c1"),
			ev("1234", ContainerDied, "c2"),
			ev("1234", ContainerStarted, "c3"),
			ev("4567", ContainerRemoved, "c1"),
			ev("4567", ContainerStarted, "c4"),
		},
	}})
}

// Ported from upstream's TestEventChannelFull.
func TestEventChannelFull(t *testing.T) {
	tp := newTestPLEG(t, func(c *Config) { c.EventChannelCapacity = 4 })
	runSteps(t, tp, []relistStep{{
		name: "three events fit",
		pods: []*runtime.Pod{
			pod("1234", ctr("c1", cExited), ctr("c2", cRunning), ctr("c3", cUnknown)),
			pod("4567", ctr("c1", cExited)),
		},
		want: []PodLifecycleEvent{
			ev("1234", ContainerStarted, "c2"),
			ev("4567", ContainerDied, "c1"),
			ev("1234", ContainerDied, "c1"),
		},
	}})
	assert.Zero(t, tp.lastStats().Dropped)

	tp.lister.setPods(
		pod("1234", ctr("c2", cExited), ctr("c3", cRunning)),
		pod("4567", ctr("c4", cRunning)),
	)
	tp.relist(t) // five events, room for four: the relist must not block
	all := []PodLifecycleEvent{
		ev("1234", ContainerRemoved, "c1"),
		ev("1234", ContainerDied, "c2"),
		ev("1234", ContainerStarted, "c3"),
		ev("4567", ContainerRemoved, "c1"),
		ev("4567", ContainerStarted, "c4"),
	}
	got := drain(tp.Watch())
	assert.Len(t, got, 4)
	assert.Subset(t, all, got)
	st := tp.lastStats()
	assert.Equal(t, 1, st.Dropped, "the event that did not fit is counted")
	assert.Equal(t, 4, st.Events.Started+st.Events.Died+st.Events.Removed, "only sent events are counted as sent")
}

// Ported from upstream's TestDetectingContainerDeaths: a container that
// vanishes between relists without being seen exited gets ContainerDied and
// ContainerRemoved, whatever the number of relists before.
func TestDetectingContainerDeaths(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("container vanishes after %d relists", n), func(t *testing.T) {
			tp := newTestPLEG(t, nil)
			tp.lister.setPods(pod("1234", ctr("c1", cRunning), ctr("c2", cRunning), ctr("c3", cExited)))
			for range n {
				tp.relist(t)
				drain(tp.Watch())
			}
			// c2 stopped and was removed between relists: reported as died and
			// removed. c3 had exited and was collected: removed only.
			runSteps(t, tp, []relistStep{{
				name: "missing containers",
				pods: []*runtime.Pod{pod("1234", ctr("c1", cRunning))},
				want: []PodLifecycleEvent{
					ev("1234", ContainerDied, "c2"),
					ev("1234", ContainerRemoved, "c2"),
					ev("1234", ContainerRemoved, "c3"),
				},
			}})
		})
		t.Run(fmt.Sprintf("pod vanishes after %d relists", n), func(t *testing.T) {
			tp := newTestPLEG(t, nil)
			tp.lister.setPods(pod("1234", ctr("c2", cRunning)))
			for range n {
				tp.relist(t)
				drain(tp.Watch())
			}
			runSteps(t, tp, []relistStep{{
				name: "missing pod",
				want: []PodLifecycleEvent{
					ev("1234", ContainerDied, "c2"),
					ev("1234", ContainerRemoved, "c2"),
				},
			}})
		})
	}
}

// Ported from upstream's TestRelistWithCache: a pod whose inspection fails
// gets its error in the cache and no events until it is inspected.
func TestRelistWithCache(t *testing.T) {
	tp := newTestPLEG(t, nil)
	p0, p1 := pod("test-pod-0", ctr("c0", cRunning)), pod("test-pod-1", ctr("c1", cRunning))
	s0, s1 := statusOf(p0.ID, p0), statusOf(p1.ID, p1)
	tp.lister.setPods(p0, p1)
	tp.lister.setStatus(p0.ID, s0, nil)
	statusErr := errors.New("unable to get status")
	failed := &runtime.PodStatus{ID: p1.ID}
	tp.lister.setStatus(p1.ID, failed, statusErr)

	tp.relist(t)
	assert.Equal(t, []types.UID{p0.ID, p1.ID}, tp.lister.takeCalls(), "both pods inspected once")
	assert.Equal(t, events(ev(p0.ID, ContainerStarted, "c0")), drain(tp.Watch()), "no event for the pod that failed")
	got, err := tp.cache.Get(p0.ID)
	assert.Same(t, s0, got)
	assert.NoError(t, err)
	got, err = tp.cache.Get(p1.ID)
	assert.Same(t, failed, got)
	assert.Equal(t, statusErr, err, "the inspection error is cached for the pod workers")
	assert.Equal(t, 1, tp.lastStats().InspectErrors)

	tp.lister.setStatus(p1.ID, s1, nil)
	tp.relist(t)
	assert.Equal(t, []types.UID{p1.ID}, tp.lister.takeCalls(), "only the failed pod is inspected again")
	assert.Equal(t, events(ev(p1.ID, ContainerStarted, "c1")), drain(tp.Watch()), "its events come now")
	got, err = tp.cache.Get(p1.ID)
	assert.Same(t, s1, got)
	assert.NoError(t, err)
}

// Ported from upstream's TestRemoveCacheEntry.
func TestRemoveCacheEntry(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inspectErr error
	}{
		{name: "vanished pod is deleted from the cache"},
		{name: "vanished pod whose inspection failed is deleted from the cache", inspectErr: errors.New("boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPLEG(t, nil)
			p := pod("test-pod-0", ctr("c0", cRunning))
			tp.lister.setPods(p)
			tp.lister.setStatus(p.ID, statusOf(p.ID, p), tc.inspectErr)
			tp.relist(t)
			_, err := tp.cache.Get(p.ID)
			require.Equal(t, tc.inspectErr, err)

			tp.lister.setPods()
			tp.relist(t)
			got, err := tp.cache.Get(p.ID)
			assert.Equal(t, &runtime.PodStatus{ID: p.ID}, got, "the cache no longer knows the pod")
			assert.NoError(t, err)
			assert.Empty(t, tp.records, "the PLEG forgot the pod")
			assert.Empty(t, tp.reinspect)
		})
	}
}

// A pod that ended up with no containers and then vanished was acted on once,
// so its cache entry must go too, although the last step has no events.
func TestEmptyPodThatVanishesIsDeletedFromCache(t *testing.T) {
	tp := newTestPLEG(t, nil)
	tp.lister.setPods(pod("p", ctr("c0", cExited)))
	tp.relist(t)
	assert.Equal(t, events(ev("p", ContainerDied, "c0")), drain(tp.Watch()))
	tp.lister.setPods(pod("p"))
	tp.relist(t)
	assert.Equal(t, events(ev("p", ContainerRemoved, "c0")), drain(tp.Watch()))
	_, err := tp.cache.Get("p")
	require.NoError(t, err)
	tp.lister.setPods()
	tp.relist(t)
	assert.Empty(t, drain(tp.Watch()))
	assert.Empty(t, tp.records)
	got, _ := tp.cache.Get("p")
	assert.Equal(t, &runtime.PodStatus{ID: "p"}, got)
}

// Ported from upstream's TestHealthy, plus the failed-listing and run-time
// threshold behaviour.
func TestHealthy(t *testing.T) {
	tp := newTestPLEG(t, func(c *Config) { c.RelistThreshold = 3 * time.Minute })
	assert.Error(t, tp.Healthy(), "unhealthy before the first relist")

	tp.clock.Step(10 * time.Minute)
	assert.Error(t, tp.Healthy(), "still unhealthy without a relist")

	tp.relist(t)
	tp.clock.Step(time.Minute)
	assert.NoError(t, tp.Healthy(), "healthy within the threshold")

	tp.clock.Step(3 * time.Minute)
	assert.Error(t, tp.Healthy(), "unhealthy once the last relist is older than the threshold")

	tp.lister.mu.Lock()
	tp.lister.listErr = errors.New("runtime down")
	tp.lister.mu.Unlock()
	require.Error(t, tp.Relist(context.Background()))
	assert.Error(t, tp.Healthy(), "a failed listing does not count as a relist")
	assert.Error(t, tp.lastStats().Err)

	require.NoError(t, tp.SetRelistDuration(time.Hour, 10*time.Minute))
	assert.NoError(t, tp.Healthy(), "a longer threshold applies at once")
}

// Ported from upstream's TestRelistWithReinspection: after a failed
// inspection the pod is inspected again even if its listing went back to
// what was last acted on, and no events come from the transient state.
func TestRelistWithReinspection(t *testing.T) {
	tp := newTestPLEG(t, nil)
	infra := ctr("infra", cRunning)
	good := &runtime.PodStatus{ID: "test-pod", ContainerStatuses: []*runtime.ContainerStatus{{ID: infra.ID, State: cRunning}}}

	tp.lister.setPods(pod("test-pod", infra))
	tp.lister.setStatus("test-pod", good, nil)
	tp.relist(t)
	assert.Equal(t, events(ev("test-pod", ContainerStarted, "infra")), drain(tp.Watch()))
	assert.Len(t, tp.lister.takeCalls(), 1)

	// The runtime is creating a container and inspection fails.
	bad := &runtime.PodStatus{ID: "test-pod"}
	inspectErr := errors.New("inspection error")
	tp.lister.setPods(pod("test-pod", infra, ctr("transient", cUnknown)))
	tp.lister.setStatus("test-pod", bad, inspectErr)
	tp.relist(t)
	assert.Empty(t, drain(tp.Watch()))
	assert.Len(t, tp.lister.takeCalls(), 1)
	got, err := tp.cache.Get("test-pod")
	assert.Same(t, bad, got)
	assert.Equal(t, inspectErr, err)

	// The transient container is gone: the listing equals the first one, but
	// the pod is inspected again and the cache repaired.
	tp.lister.setPods(pod("test-pod", infra))
	tp.lister.setStatus("test-pod", good, nil)
	tp.relist(t)
	assert.Empty(t, drain(tp.Watch()))
	assert.Len(t, tp.lister.takeCalls(), 1, "the pod is reinspected")
	got, err = tp.cache.Get("test-pod")
	assert.Same(t, good, got)
	assert.NoError(t, err)

	tp.relist(t)
	assert.Empty(t, tp.lister.takeCalls(), "and then no more")
}

// Ported from upstream's TestRelistIPChange, plus the case where a ready
// sandbox means the IPs really are gone.
func TestRelistIPChange(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ips        []string
		readyAfter bool
		wantAfter  []string
	}{
		{name: "IPv4 kept when the pod dies without a ready sandbox", ips: []string{"192.168.1.5"}, wantAfter: []string{"192.168.1.5"}},
		{name: "dual-stack kept when the pod dies without a ready sandbox", ips: []string{"192.168.1.5/24", "2000::"}, wantAfter: []string{"192.168.1.5/24", "2000::"}},
		{name: "IPs not kept while a sandbox is ready", ips: []string{"192.168.1.5"}, readyAfter: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestPLEG(t, nil)
			c := ctr("c0", cRunning)
			before := &runtime.PodStatus{
				ID: "p", IPs: tc.ips,
				ContainerStatuses: []*runtime.ContainerStatus{{ID: c.ID, State: cRunning}},
				SandboxStatuses:   []*runtime.SandboxStatus{{ID: "s", State: runtime.SandboxStateReady}},
			}
			tp.lister.setPods(pod("p", c))
			tp.lister.setStatus("p", before, nil)
			tp.relist(t)
			assert.Equal(t, events(ev("p", ContainerStarted, "c0")), drain(tp.Watch()))
			got, _ := tp.cache.Get("p")
			assert.Equal(t, tc.ips, got.IPs)

			sb := runtime.SandboxStateNotReady
			if tc.readyAfter {
				sb = runtime.SandboxStateReady
			}
			after := &runtime.PodStatus{
				ID:                "p",
				ContainerStatuses: []*runtime.ContainerStatus{{ID: c.ID, State: cExited}},
				SandboxStatuses:   []*runtime.SandboxStatus{{ID: "s", State: sb}},
			}
			tp.lister.setPods(pod("p", ctr("c0", cExited)))
			tp.lister.setStatus("p", after, nil)
			tp.relist(t)
			assert.Equal(t, events(ev("p", ContainerDied, "c0")), drain(tp.Watch()))
			got, err := tp.cache.Get("p")
			require.NoError(t, err)
			assert.Equal(t, tc.wantAfter, got.IPs)
			assert.Equal(t, after.ContainerStatuses, got.ContainerStatuses)
			assert.Nil(t, after.IPs, "the runtime's status object is not modified")
		})
	}
}

// Ported from upstream's TestRunningPodAndContainerCount, through the
// OnRelist hook instead of Prometheus gauges.
func TestRunningPodAndContainerCount(t *testing.T) {
	tp := newTestPLEG(t, nil)
	p1 := pod("1234", ctr("c1", cRunning), ctr("c2", cUnknown), ctr("c3", cUnknown))
	p1.Sandboxes = []*runtime.Container{ctr("s1", cRunning), ctr("s2", cRunning), ctr("s3", cUnknown)}
	p2 := pod("4567", ctr("c1", cExited), ctr("c4", cCreated))
	p2.Sandboxes = []*runtime.Container{ctr("s1", cRunning), ctr("s2", cExited)}
	p3 := sandboxPod("7890", ctr("s9", cExited))
	tp.lister.setPods(p1, p2, p3)
	tp.relist(t)
	st := tp.lastStats()
	assert.Equal(t, 3, st.Pods)
	assert.Equal(t, 2, st.RunningPods, "pods with a running sandbox, counted once each")
	assert.Equal(t, ContainerCounts{Running: 1, Exited: 1, Created: 1, Unknown: 2}, st.Containers)
	assert.Equal(t, EventCounts{Started: 4, Died: 3}, st.Events)
	assert.Equal(t, 3, st.Inspected)
	assert.Equal(t, tp.clock.Now(), st.Timestamp)

	// A later relist counts as it goes (a first one before it starts): the
	// same listing gives the same counts, with nothing to inspect.
	tp.relist(t)
	st = tp.lastStats()
	assert.Equal(t, 3, st.Pods)
	assert.Equal(t, 2, st.RunningPods)
	assert.Equal(t, ContainerCounts{Running: 1, Exited: 1, Created: 1, Unknown: 2}, st.Containers)
	assert.Equal(t, EventCounts{}, st.Events)
	assert.Equal(t, 0, st.Inspected)
}

// TestARelistWhoseStatusTheCacheRefusedInspectsAgain: the cache keeps an
// entry newer (by timestamp) than a relist's status, as an evented PLEG's
// stream writes with the event's time while a relist that started earlier
// inspects. The listing must not be remembered: the next relist, finding
// the listing unchanged, would inspect nothing and declare the cache
// current with the older content the event carried.
func TestARelistWhoseStatusTheCacheRefusedInspectsAgain(t *testing.T) {
	tp := newTestPLEG(t, nil)
	tp.lister.setPods(pod("p", ctr("c", cRunning)))
	// An event's status, stamped later than the relist starts, shows the
	// container still created.
	eventStatus := statusOf("p", pod("p", ctr("c", cCreated)))
	tp.cache.Set("p", eventStatus, nil, tp.clock.Now().Add(time.Millisecond))
	tp.relist(t)
	require.Equal(t, []types.UID{"p"}, tp.lister.takeCalls())
	got, _ := tp.cache.Get("p")
	require.Same(t, eventStatus, got, "the cache keeps the newer entry")

	tp.clock.Step(time.Second)
	tp.relist(t)
	assert.Equal(t, []types.UID{"p"}, tp.lister.takeCalls(), "the pod is inspected again")
	got, _ = tp.cache.Get("p")
	require.Equal(t, cRunning, got.FindContainerStatusByName("c").State)
	assert.Zero(t, tp.lastStats().InspectErrors, "a refused write is not an inspection error")

	tp.clock.Step(time.Second)
	tp.relist(t)
	assert.Empty(t, tp.lister.takeCalls(), "once written, the pod is at rest")
}

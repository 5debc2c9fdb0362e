package provider_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": name}},
		Spec: v1.PodSpec{NodeName: "vk", RestartPolicy: v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers:                    []v1.Container{{Name: "app", Image: "app:1"}}},
	}
}

// recorder keeps events as "type reason".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ kruntime.Object, typ, reason, _ string, _ ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+reason)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

type env struct {
	clk *clocktesting.FakeClock
	p   *providertest.Provider
	rt  *provider.Runtime
	rec *recorder
	b   *runtime.Backoff
}

func newEnv(t *testing.T, notify bool) *env {
	t.Helper()
	e := &env{clk: clocktesting.NewFakeClock(t0), rec: &recorder{}}
	e.p = providertest.New(e.clk)
	var h provider.PodLifecycleHandler = e.p
	if notify {
		n := &providertest.Notifier{Provider: e.p}
		h = n
	}
	var err error
	e.rt, err = provider.New(provider.Config{Provider: h, Recorder: e.rec, Clock: e.clk})
	require.NoError(t, err)
	e.b = runtime.NewBackoff(10*time.Second, 80*time.Second, 0, e.clk)
	if notify {
		// As the agent does first: a notifier's NotifyPods is registered
		// when a stream opens, and SyncPod waits for it.
		e.watch(t)
	}
	return e
}

// watch opens the runtime's event stream until the test ends.
func (e *env) watch(t *testing.T) <-chan runtime.ContainerEvent {
	t.Helper()
	return openStream(t, e.rt)
}

// openStream opens rt's event stream until the test ends.
func openStream(t *testing.T, rt *provider.Runtime) <-chan runtime.ContainerEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := rt.WatchContainerEvents(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		for range ch { // closed once the stream's goroutine ended
		}
	})
	return ch
}

func (e *env) status(t *testing.T, pod *v1.Pod) *runtime.PodStatus {
	t.Helper()
	rs, err := e.rt.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	require.NoError(t, err)
	return rs
}

func TestNewRejectsAMissingProvider(t *testing.T) {
	_, err := provider.New(provider.Config{})
	assert.ErrorIs(t, err, runtime.ErrInvalidConfig)
	_, err = provider.New(provider.Config{Provider: providertest.New(nil), PollPeriod: -time.Second})
	assert.ErrorIs(t, err, runtime.ErrInvalidConfig)
}

func TestCreate(t *testing.T) {
	for _, notify := range []bool{false, true} {
		t.Run(fmt.Sprintf("notify=%v", notify), func(t *testing.T) {
			e := newEnv(t, notify)
			pod := testPod("web")
			res := e.rt.SyncPod(context.Background(), pod, nil, nil, e.b)
			require.NoError(t, res.Error())
			assert.Equal(t, 1, e.p.Calls("CreatePod"), "a pod the provider does not have is created")

			rs := e.status(t, pod)
			require.NotNil(t, rs.APIStatus, "the provider's status is the pod's")
			assert.Equal(t, e.p.Pod("default", "web").Status, *rs.APIStatus, "unchanged")
			require.Len(t, rs.ContainerStatuses, 1)
			assert.Equal(t, runtime.ContainerStateRunning, rs.ContainerStatuses[0].State)
			assert.Equal(t, []string{"5.6.7.8"}, rs.IPs)
			assert.Equal(t, []string{"Normal " + provider.ReasonCreateSuccess}, e.rec.list())

			pods, err := e.rt.GetPods(context.Background(), false)
			require.NoError(t, err)
			require.Len(t, pods, 1)
			assert.Equal(t, pod.UID, pods[0].ID)
			assert.Len(t, pods[0].Containers, 1)

			require.NoError(t, e.rt.SyncPod(context.Background(), pod, rs, nil, e.b).Error())
			assert.Equal(t, 1, e.p.Calls("CreatePod"), "an unchanged pod is not handed over again")
			assert.Zero(t, e.p.Calls("UpdatePod"))
		})
	}
}

func TestUpdateOnlyWhatVirtualKubeletPassesOn(t *testing.T) {
	tests := []struct {
		name       string
		change     func(*v1.Pod)
		wantUpdate bool
	}{
		{"a new label is passed on", func(p *v1.Pod) { p.Labels["tier"] = "front" }, true},
		{"a new annotation is passed on", func(p *v1.Pod) { p.Annotations = map[string]string{"a": "b"} }, true},
		{"a new image is passed on", func(p *v1.Pod) { p.Spec.Containers[0].Image = "app:2" }, true},
		{"a new active deadline is passed on", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) }, true},
		{"a new toleration is passed on", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}} }, true},
		{"a status change is not", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }, false},
		{"a changed grace period is not", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5) }, false},
		{"a new owner reference is not", func(p *v1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Name: "rs"}} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, true)
			pod := testPod("web")
			require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
			changed := pod.DeepCopy()
			tt.change(changed)
			require.NoError(t, e.rt.SyncPod(context.Background(), changed, nil, nil, e.b).Error())
			assert.Equal(t, tt.wantUpdate, e.p.Calls("UpdatePod") == 1, "UpdatePod calls: %d", e.p.Calls("UpdatePod"))
			assert.Equal(t, 1, e.p.Calls("CreatePod"))
			if tt.wantUpdate {
				assert.Equal(t, changed.Labels, e.p.Pod("default", "web").Labels)
				assert.Contains(t, e.rec.list(), "Normal "+provider.ReasonUpdateSuccess)
			}
		})
	}
}

func TestProviderErrors(t *testing.T) {
	boom := errors.New("quota exceeded")
	t.Run("a failed create is reported, backs off and is retried", func(t *testing.T) {
		e := newEnv(t, true)
		events := e.watch(t)
		e.p.SetError("CreatePod", boom)
		pod := testPod("web")

		res := e.rt.SyncPod(context.Background(), pod, nil, nil, e.b)
		require.ErrorIs(t, res.Error(), boom)
		assert.ErrorIs(t, res.Error(), runtime.ErrCreatePodSandbox)
		assert.Equal(t, []string{"Warning " + provider.ReasonCreateFailed}, e.rec.list())
		rs := e.status(t, pod)
		require.NotNil(t, rs.APIStatus)
		assert.Equal(t, v1.PodPending, rs.APIStatus.Phase, "as virtual-kubelet: Pending")
		assert.Equal(t, provider.ReasonProviderFailed, rs.APIStatus.Reason)
		assert.Equal(t, "quota exceeded", rs.APIStatus.Message)
		ev := <-events
		assert.Equal(t, provider.ReasonProviderFailed, ev.PodStatus.APIStatus.Reason, "the failure reaches the pipeline at once")

		e.p.SetError("CreatePod", nil)
		res = e.rt.SyncPod(context.Background(), pod, nil, nil, e.b)
		assert.Error(t, res.Error(), "within the back-off the provider is not asked")
		assert.Equal(t, 1, e.p.Calls("CreatePod"))

		e.clk.Step(10 * time.Second)
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		assert.Equal(t, 2, e.p.Calls("CreatePod"), "retried once the back-off passed")
		assert.Equal(t, v1.PodRunning, e.status(t, pod).APIStatus.Phase)
	})
	t.Run("a failure from before the stream opened reaches the stream", func(t *testing.T) {
		// The agent's PLEG may subscribe after the first sync failed; a
		// relist does not list a pod the provider never took.
		e := newEnv(t, true)
		e.p.SetError("CreatePod", boom)
		pod := testPod("web")
		require.ErrorIs(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error(), boom)
		var ev runtime.ContainerEvent
		select {
		case ev = <-e.watch(t):
		case <-time.After(30 * time.Second): // only keeps a broken test from hanging
			t.Fatal("the stream told nothing of the failure")
		}
		require.NotNil(t, ev.PodStatus)
		assert.Equal(t, pod.UID, ev.PodUID)
		assert.Equal(t, provider.ReasonProviderFailed, ev.PodStatus.APIStatus.Reason)
	})
	t.Run("a failed create fails a pod that must not restart, as virtual-kubelet", func(t *testing.T) {
		e := newEnv(t, true)
		e.p.SetError("CreatePod", boom)
		pod := testPod("job")
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		require.Error(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		assert.Equal(t, v1.PodFailed, e.status(t, pod).APIStatus.Phase)
	})
	t.Run("a failed update is reported", func(t *testing.T) {
		e := newEnv(t, true)
		pod := testPod("web")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		e.p.SetError("UpdatePod", boom)
		changed := pod.DeepCopy()
		changed.Labels["v"] = "2"
		require.ErrorIs(t, e.rt.SyncPod(context.Background(), changed, nil, nil, e.b).Error(), boom)
		assert.Contains(t, e.rec.list(), "Warning "+provider.ReasonUpdateFailed)
	})
	t.Run("a failed delete is reported and can be asked again", func(t *testing.T) {
		e := newEnv(t, true)
		pod := testPod("web")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		e.p.SetError("DeletePod", boom)
		err := e.rt.KillPod(context.Background(), pod, runtime.Pod{ID: pod.UID}, ptr.To[int64](1))
		require.ErrorIs(t, err, boom)
		assert.ErrorIs(t, err, runtime.ErrKillContainer)
		assert.Contains(t, e.rec.list(), "Warning "+provider.ReasonDeleteFailed)
		e.p.SetError("DeletePod", nil)
		require.NoError(t, e.rt.KillPod(context.Background(), pod, runtime.Pod{ID: pod.UID}, ptr.To[int64](1)))
		assert.Empty(t, e.status(t, pod).RunningContainerStatuses())
	})
}

func TestDeleteWithGrace(t *testing.T) {
	deleting := func(grace int64) *v1.Pod {
		pod := testPod("web")
		pod.DeletionTimestamp = &metav1.Time{Time: t0}
		pod.DeletionGracePeriodSeconds = &grace
		return pod
	}
	for _, notify := range []bool{false, true} {
		t.Run(fmt.Sprintf("the provider gets the grace period and is waited for, notify=%v", notify), func(t *testing.T) {
			e := newEnv(t, notify)
			e.watch(t) // registers NotifyPods, or polls
			pod := testPod("web")
			require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
			e.p.HoldDeletes(true)

			done := make(chan error, 1)
			go func() { done <- e.rt.KillPod(context.Background(), deleting(20), runtime.Pod{ID: pod.UID}, nil) }()
			require.Eventually(t, func() bool { return e.p.Held("default", "web") && e.clk.HasWaiters() }, 10*time.Second, time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("KillPod returned %v before the provider stopped the pod", err)
			default:
			}
			e.clk.Step(5 * time.Second)
			require.NoError(t, e.p.FinishDelete("default", "web"))
			if !notify {
				// Polled: seen at the next check.
				require.Eventually(t, e.clk.HasWaiters, 10*time.Second, time.Millisecond)
				e.clk.Step(time.Second)
			}
			require.NoError(t, <-done)
			rs := e.status(t, pod)
			assert.Empty(t, rs.RunningContainerStatuses())
			assert.Equal(t, v1.PodSucceeded, rs.APIStatus.Phase)
			pods, err := e.rt.GetPods(context.Background(), true)
			require.NoError(t, err)
			assert.Empty(t, pods, "a deleted pod is not listed")
		})
	}
	t.Run("the grace period passing without the provider stopping the pod fails the kill", func(t *testing.T) {
		e := newEnv(t, true)
		pod := testPod("web")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		e.p.HoldDeletes(true)
		done := make(chan error, 1)
		go func() { done <- e.rt.KillPod(context.Background(), deleting(3), runtime.Pod{ID: pod.UID}, nil) }()
		for range 3 {
			require.Eventually(t, e.clk.HasWaiters, 10*time.Second, time.Millisecond)
			e.clk.Step(time.Second)
		}
		err := <-done
		require.ErrorIs(t, err, runtime.ErrKillContainer)
		assert.Contains(t, err.Error(), "grace period of 3s")
		assert.Len(t, e.status(t, pod).RunningContainerStatuses(), 1, "still running as the provider says")
	})
	t.Run("DeletePod gets the grace period", func(t *testing.T) {
		e := newEnv(t, true)
		spy := &deleteSpy{Notifier: &providertest.Notifier{Provider: e.p}}
		rt, err := provider.New(provider.Config{Provider: spy, Clock: e.clk})
		require.NoError(t, err)
		openStream(t, rt)
		pod := testPod("web")
		require.NoError(t, rt.SyncPod(context.Background(), pod, nil, nil, nil).Error())
		require.NoError(t, rt.KillPod(context.Background(), pod, runtime.Pod{ID: pod.UID}, ptr.To[int64](7)))
		require.NotNil(t, spy.got)
		assert.Equal(t, int64(7), *spy.got.DeletionGracePeriodSeconds, "the override")
		assert.NotNil(t, spy.got.DeletionTimestamp, "a deletion, as virtual-kubelet hands it over")
	})
	t.Run("a finished pod that is not deleted is left to the provider", func(t *testing.T) {
		e := newEnv(t, true)
		events := e.watch(t)
		pod := testPod("job")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		<-events
		e.p.SetPodStatus("default", "job", func(st *v1.PodStatus) { st.Phase = v1.PodSucceeded })
		<-events
		require.NoError(t, e.rt.KillPod(context.Background(), pod, runtime.Pod{ID: pod.UID}, nil))
		assert.Zero(t, e.p.Calls("DeletePod"))
		// Once no one wants it, it is an orphan that housekeeping kills.
		require.NoError(t, e.rt.KillPod(context.Background(), nil, runtime.Pod{ID: pod.UID, Name: "job", Namespace: "default"}, ptr.To[int64](1)))
		assert.Equal(t, 1, e.p.Calls("DeletePod"))
		assert.Zero(t, e.p.Len())
	})
}

type deleteSpy struct {
	*providertest.Notifier
	got *v1.Pod
}

func (s *deleteSpy) DeletePod(ctx context.Context, pod *v1.Pod) error {
	s.got = pod.DeepCopy()
	return s.Notifier.DeletePod(ctx, pod)
}

func TestStatusChanges(t *testing.T) {
	ready := func(ready bool) func(*v1.PodStatus) {
		return func(st *v1.PodStatus) {
			c := v1.ConditionFalse
			if ready {
				c = v1.ConditionTrue
			}
			st.Conditions[1].Status = c
			st.ContainerStatuses[0].Ready = ready
		}
	}
	t.Run("NotifyPods reaches the stream at once", func(t *testing.T) {
		e := newEnv(t, true)
		events := e.watch(t)
		pod := testPod("web")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		ev := <-events
		assert.Equal(t, pod.UID, ev.PodUID)
		assert.Equal(t, runtime.ContainerStartedEvent, ev.Type)
		assert.Equal(t, v1.PodRunning, ev.PodStatus.APIStatus.Phase)

		e.p.SetPodStatus("default", "web", ready(false))
		ev = <-events
		assert.Equal(t, v1.ConditionFalse, ev.PodStatus.APIStatus.Conditions[1].Status, "no clock step needed")
		assert.Zero(t, e.p.Calls("GetPodStatus"), "nothing polled")
		assert.Equal(t, 2, e.p.Calls("NotifyPods"), "once per stream opened (newEnv's and this one)")
	})
	t.Run("without NotifyPods the status is polled every PollPeriod", func(t *testing.T) {
		e := newEnv(t, false)
		events := e.watch(t)
		pod := testPod("web")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		ev := <-events
		assert.Equal(t, v1.PodRunning, ev.PodStatus.APIStatus.Phase, "read right after the create")

		e.p.SetPodStatus("default", "web", ready(false))
		select {
		case ev := <-events:
			t.Fatalf("event before the poll: %+v", ev)
		default:
		}
		require.Eventually(t, e.clk.HasWaiters, 10*time.Second, time.Millisecond)
		e.clk.Step(5 * time.Second)
		ev = <-events
		assert.Equal(t, v1.ConditionFalse, ev.PodStatus.APIStatus.Conditions[1].Status)
		n := e.p.Calls("GetPodStatus")
		e.clk.Step(5 * time.Second)
		require.Eventually(t, func() bool { return e.p.Calls("GetPodStatus") > n }, 10*time.Second, time.Millisecond)
		select {
		case ev := <-events:
			t.Fatalf("event without a change: %+v", ev)
		default:
		}
	})
	t.Run("a pod the provider lost is failed as virtual-kubelet fails it", func(t *testing.T) {
		e := newEnv(t, false)
		events := e.watch(t)
		pod := testPod("web")
		require.NoError(t, e.rt.SyncPod(context.Background(), pod, nil, nil, e.b).Error())
		<-events
		require.NoError(t, e.p.FinishDelete("default", "web")) // behind the agent's back
		require.Eventually(t, e.clk.HasWaiters, 10*time.Second, time.Millisecond)
		e.clk.Step(5 * time.Second)
		ev := <-events
		assert.Equal(t, v1.PodFailed, ev.PodStatus.APIStatus.Phase)
		assert.Equal(t, "NotFound", ev.PodStatus.APIStatus.Reason)
		assert.Equal(t, runtime.ContainerStoppedEvent, ev.Type)
	})
	t.Run("a consumer that falls behind loses its stream", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		p := providertest.NewNotifier(clk)
		rt, err := provider.New(provider.Config{Provider: p, Clock: clk, EventBuffer: 1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, err := rt.WatchContainerEvents(ctx)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, rt.SyncPod(ctx, testPod(fmt.Sprint("p", i)), nil, nil, nil).Error())
		}
		n := 0
		for range ch {
			n++
		}
		assert.Equal(t, 1, n, "the buffered event, then the stream is closed")
	})
}

func TestPodsFromBeforeAreFound(t *testing.T) {
	e := newEnv(t, true)
	pod := testPod("old")
	require.NoError(t, e.p.CreatePod(context.Background(), pod))
	pods, err := e.rt.GetPods(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, pods, 1, "GetPods of the provider, once")
	assert.Equal(t, pod.UID, pods[0].ID)
	rs := e.status(t, pod)
	assert.Equal(t, v1.PodRunning, rs.APIStatus.Phase)
	_, err = e.rt.GetPods(context.Background(), true)
	require.NoError(t, err)
	assert.Equal(t, 1, e.p.Calls("GetPods"))
	assert.Zero(t, e.p.Calls("GetPodStatus"), "the listing carried the status")
}

// vkNotFound is an error as virtual-kubelet's errdefs.NotFound makes it:
// a NotFound method, the cause behind Cause.
type vkNotFound struct{ cause error }

func (e vkNotFound) Error() string  { return e.cause.Error() }
func (e vkNotFound) NotFound() bool { return true }
func (e vkNotFound) Cause() error   { return e.cause }

type vkStyle struct{ *providertest.Provider }

func (p vkStyle) DeletePod(context.Context, *v1.Pod) error {
	return fmt.Errorf("wrapped: %w", vkNotFound{errors.New("gone")})
}

func TestNotFoundAsVirtualKubeletSaysIt(t *testing.T) {
	p := providertest.New(nil)
	rt, err := provider.New(provider.Config{Provider: vkStyle{p}})
	require.NoError(t, err)
	pod := testPod("web")
	require.NoError(t, rt.SyncPod(context.Background(), pod, nil, nil, nil).Error())
	require.NoError(t, rt.KillPod(context.Background(), pod, runtime.Pod{ID: pod.UID}, nil), "NotFound on delete: already gone")
	rs, err := rt.GetPodStatus(context.Background(), pod.UID, "web", "default")
	require.NoError(t, err)
	assert.Empty(t, rs.RunningContainerStatuses())
}

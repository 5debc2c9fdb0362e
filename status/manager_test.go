package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "c1", Image: "img"}},
		},
	}
}

func staticPod(name, hash string) *v1.Pod {
	p := testPod(name, types.UID("static-"+hash))
	p.Annotations = map[string]string{
		podutil.ConfigSourceAnnotationKey: podutil.FileSource,
		podutil.ConfigHashAnnotationKey:   hash,
	}
	p.Spec.NodeName = "node1"
	return p
}

// runningWithMessage is runningStatus("cri://a") with message msg: a
// status that differs from another by its message alone.
func runningWithMessage(msg string) v1.PodStatus {
	st := runningStatus("cri://a")
	st.Message = msg
	return st
}

func runningStatus(cid string) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue},
		},
		ContainerStatuses: []v1.ContainerStatus{{
			Name: "c1", Image: "img", ContainerID: cid, Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
		}},
	}
}

type fakeSafety struct{ couldRun bool }

func (f *fakeSafety) PodCouldHaveRunningContainers(*v1.Pod) bool { return f.couldRun }

type fakeNodes struct{ uid types.UID }

func (f fakeNodes) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Node, error) {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: f.uid}}, nil
}

func newManager(t testing.TB, f *statustest.Fake, mod func(*status.Config)) (*status.Manager, *testclock.FakeClock) {
	t.Helper()
	clk := testclock.NewFakeClock(t0)
	c := status.Config{Clock: clk, NodeName: "node1"}
	if f != nil {
		c.PodClient = func(ns string) status.PodClient { return f.Pods(ns) }
	}
	if mod != nil {
		mod(&c)
	}
	m, err := status.NewManager(c)
	require.NoError(t, err)
	return m, clk
}

func verbs(f *statustest.Fake) []string {
	var out []string
	for _, a := range f.Actions() {
		out = append(out, a.Verb)
	}
	return out
}

func patchOf(t *testing.T, a statustest.Action) map[string]any {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal(a.Patch, &p))
	return p
}

func TestNewManagerRejectsBadConfig(t *testing.T) {
	_, err := status.NewManager(status.Config{SyncPeriod: -time.Second})
	require.ErrorIs(t, err, status.ErrInvalidConfig)
	_, err = status.NewManager(status.Config{SyncWorkers: -1})
	require.ErrorIs(t, err, status.ErrInvalidConfig)
}

// A pod as the apiserver delivered it (with a resourceVersion) is the base
// of its first patch; one from elsewhere is read first.
func TestFirstPatchOfAnAPIServerPodNeedsNoRead(t *testing.T) {
	for _, tc := range []struct {
		name, resourceVersion string
		verbs                 []string
	}{
		{"from the apiserver", "7", []string{"patch"}},
		{"without a resourceVersion", "", []string{"get", "patch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "uid1")
			f := statustest.New(pod)
			pod.ResourceVersion = tc.resourceVersion
			m, _ := newManager(t, f, nil)
			m.SetPodStatus(pod, runningStatus("cri://a"))
			m.Sync(context.Background())
			assert.Equal(t, tc.verbs, verbs(f))
			stored, _ := f.Pod("ns", "p")
			assert.Equal(t, v1.PodRunning, stored.Status.Phase)
		})
	}
}

// barrierClient holds every Get until n are in flight at once.
type barrierClient struct {
	*statustest.PodClient
	n       int
	mu      *sync.Mutex
	waiting *int
	all     chan struct{}
}

func (c barrierClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Pod, error) {
	c.mu.Lock()
	if *c.waiting++; *c.waiting == c.n {
		close(c.all)
	}
	c.mu.Unlock()
	select {
	case <-c.all:
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("%s: fewer than %d reads at once", name, c.n)
	}
	return c.PodClient.Get(ctx, name, opts)
}

// SyncWorkers pods are synced at once: each Get waits until all are in
// flight, which one-at-a-time syncing never reaches.
func TestSyncWorkersSyncPodsAtOnce(t *testing.T) {
	const n = 4
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, testPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid%d", i))))
	}
	f := statustest.New(pods...)
	var mu sync.Mutex
	waiting := 0
	all := make(chan struct{})
	m, _ := newManager(t, f, func(c *status.Config) {
		c.SyncWorkers = n
		c.PodClient = func(ns string) status.PodClient { return barrierClient{f.Pods(ns), n, &mu, &waiting, all} }
	})
	for _, p := range pods {
		m.SetPodStatus(p, runningStatus("cri://"+p.Name))
	}
	m.Sync(context.Background())
	for _, p := range pods {
		stored, _ := f.Pod("ns", p.Name)
		assert.Equal(t, v1.PodRunning, stored.Status.Phase, p.Name)
	}
}

func TestStatusIsPatchedOncePerChange(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, _ := newManager(t, f, nil)

	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	require.Equal(t, []string{"get", "patch"}, verbs(f), "new status")
	a := f.Actions()[1]
	assert.Equal(t, "status", a.Subresource)
	assert.Equal(t, types.StrategicMergePatchType, a.PatchType)
	assert.Equal(t, "uid1", patchOf(t, a)["metadata"].(map[string]any)["uid"], "UID precondition")
	stored, _ := f.Pod("ns", "p")
	assert.Equal(t, v1.PodRunning, stored.Status.Phase)
	assert.Equal(t, "cri://a", stored.Status.ContainerStatuses[0].ContainerID)
	assert.NotNil(t, stored.Status.StartTime, "start time set")

	f.ClearActions()
	m.Sync(ctx)
	assert.Empty(t, verbs(f), "nothing new: nothing sent")

	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	assert.Empty(t, verbs(f), "same status again: nothing sent")

	st := runningStatus("cri://a")
	st.Message = "changed"
	m.SetPodStatus(pod, st)
	m.Sync(ctx)
	assert.Equal(t, []string{"patch"}, verbs(f), "changed status: patched on the last patch's answer, without a read")
	stored, _ = f.Pod("ns", "p")
	assert.Equal(t, "changed", stored.Status.Message)
}

// A running pod's later patches build on the apiserver's answer to the
// previous one; a patch that finds the pod recreated, deleted or finished
// reads the pod first, and a condition another writer set stays.
func TestLaterPatchesNeedNoRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// between changes the apiserver's pod after the first sync.
		between func(f *statustest.Fake, pod *v1.Pod)
		next    v1.PodStatus
		verbs   []string
		check   func(t *testing.T, f *statustest.Fake)
	}{
		{"running pod: patch only", func(*statustest.Fake, *v1.Pod) {}, runningWithMessage("two"), []string{"patch"},
			func(t *testing.T, f *statustest.Fake) {
				p, _ := f.Pod("ns", "p")
				assert.Equal(t, "two", p.Status.Message)
			}},
		{"another writer's condition stays", func(f *statustest.Fake, _ *v1.Pod) {
			p, _ := f.Pod("ns", "p")
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue})
			f.Add(p)
		}, runningWithMessage("two"), []string{"patch"},
			func(t *testing.T, f *statustest.Fake) {
				p, _ := f.Pod("ns", "p")
				assert.Equal(t, "two", p.Status.Message)
				var types []v1.PodConditionType
				for _, c := range p.Status.Conditions {
					types = append(types, c.Type)
				}
				assert.Contains(t, types, v1.PodConditionType("example.com/gate"))
			}},
		{"recreated pod: the UID precondition fails, the read finds it is another pod", func(f *statustest.Fake, pod *v1.Pod) {
			p := pod.DeepCopy()
			p.UID = "uid2"
			f.Add(p)
		}, runningWithMessage("two"), []string{"patch", "get"},
			func(t *testing.T, f *statustest.Fake) {
				p, _ := f.Pod("ns", "p")
				assert.Empty(t, p.Status.Message, "the new pod's status is not ours")
			}},
		{"deleted pod: nothing more", func(f *statustest.Fake, pod *v1.Pod) { f.Remove("ns", "p") }, runningWithMessage("two"),
			[]string{"patch", "get"}, func(*testing.T, *statustest.Fake) {}},
		{"terminal status: read first", func(*statustest.Fake, *v1.Pod) {}, v1.PodStatus{Phase: v1.PodSucceeded},
			[]string{"get", "patch"}, func(t *testing.T, f *statustest.Fake) {
				p, _ := f.Pod("ns", "p")
				assert.Equal(t, v1.PodSucceeded, p.Status.Phase)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "uid1")
			f := statustest.New(pod)
			m, _ := newManager(t, f, nil)
			m.SetPodStatus(pod, runningWithMessage("one"))
			m.Sync(ctx)
			require.Equal(t, []string{"get", "patch"}, verbs(f), "first write reads the pod")
			tc.between(f, pod)
			f.ClearActions()
			m.SetPodStatus(pod, tc.next)
			m.Sync(ctx)
			assert.Equal(t, tc.verbs, verbs(f))
			tc.check(t, f)
		})
	}
}

func TestStaleUpdates(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, _ := newManager(t, f, nil)

	for _, msg := range []string{"one", "two", "three"} {
		m.SetPodStatus(pod, runningWithMessage(msg))
	}
	m.Sync(ctx)
	assert.Equal(t, 1, f.Count(statustest.VerbPatch), "only the latest of several updates is sent")
	stored, _ := f.Pod("ns", "p")
	assert.Equal(t, "three", stored.Status.Message)

	st, ok := m.GetPodStatus(pod.UID)
	require.True(t, ok)
	m.SetPodStatus(pod, st)
	f.ClearActions()
	m.Sync(ctx)
	assert.Empty(t, verbs(f), "the cached status set again is no change")
}

func TestSyncPodChecksMismatchedUID(t *testing.T) {
	pod := testPod("p", "old-uid")
	api := testPod("p", "new-uid")
	f := statustest.New(api)
	m, _ := newManager(t, f, nil)

	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	assert.Equal(t, []string{"get"}, verbs(f), "no patch for a recreated pod")
	_, ok := m.GetPodStatus(pod.UID)
	assert.False(t, ok, "status of the replaced pod is forgotten")
}

func TestSyncDropsUpdateOfMissingPod(t *testing.T) {
	pod := testPod("p", "uid1")
	f := statustest.New()
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	assert.Equal(t, []string{"get"}, verbs(f))
	_, ok := m.GetPodStatus(pod.UID)
	assert.True(t, ok, "status still served until RemoveOrphanedStatuses")
}

// syncStepping runs Sync and advances the fake clock whenever the sync waits
// on it (the conflict back-off).
func syncStepping(m *status.Manager, clk *testclock.FakeClock) (steps int) {
	done := make(chan struct{})
	go func() {
		m.Sync(context.Background())
		close(done)
	}()
	for {
		select {
		case <-done:
			return steps
		default:
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
			steps++
		} else {
			goruntime.Gosched()
		}
	}
}

func TestConflictIsRetriedWithBackoff(t *testing.T) {
	conflict := apierrors.NewConflict(v1.Resource("pods"), "p", nil)
	cases := []struct {
		name      string
		conflicts int
		patches   int
		retries   int
		stored    bool
	}{
		{name: "one conflict then success", conflicts: 1, patches: 2, retries: 1, stored: true},
		{name: "conflicts beyond the retries give up until the next sync", conflicts: 4, patches: 4, retries: 3, stored: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "uid1")
			f := statustest.New(pod)
			m, clk := newManager(t, f, nil)
			for range tc.conflicts {
				f.InjectError(statustest.VerbPatch, conflict)
			}
			m.SetPodStatus(pod, runningStatus("cri://a"))
			steps := syncStepping(m, clk)
			assert.Equal(t, tc.patches, f.Count(statustest.VerbPatch))
			assert.Equal(t, tc.patches, f.Count(statustest.VerbGet), "each retry reads the pod again")
			assert.Equal(t, tc.retries, steps, "each retry waits its back-off")
			stored, _ := f.Pod("ns", "p")
			assert.Equal(t, tc.stored, stored.Status.Phase == v1.PodRunning)

			if !tc.stored {
				f.ClearActions()
				m.Sync(context.Background())
				stored, _ = f.Pod("ns", "p")
				assert.Equal(t, v1.PodRunning, stored.Status.Phase, "the next sync sends it")
			}
		})
	}
}

func TestTerminatePod(t *testing.T) {
	pod := testPod("p", "uid1")
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "c2"}, v1.Container{Name: "c3"})
	m, _ := newManager(t, nil, nil)
	st := runningStatus("cri://a")
	st.ContainerStatuses = append(st.ContainerStatuses,
		v1.ContainerStatus{Name: "c2", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
		v1.ContainerStatus{Name: "c3", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	)
	m.SetPodStatus(pod, st)
	m.TerminatePod(pod)

	got, ok := m.GetPodStatus(pod.UID)
	require.True(t, ok)
	assert.Equal(t, v1.PodFailed, got.Phase)
	for _, cs := range got.ContainerStatuses {
		require.NotNil(t, cs.State.Terminated, cs.Name)
		if cs.Name == "c2" {
			assert.Equal(t, "Completed", cs.State.Terminated.Reason, "a terminated container keeps its state")
			continue
		}
		assert.Equal(t, status.ContainerStatusUnknown, cs.State.Terminated.Reason, cs.Name)
		assert.EqualValues(t, 137, cs.State.Terminated.ExitCode, cs.Name)
	}
}

func TestTerminatePodLeavesInitContainersThatNeverRan(t *testing.T) {
	pod := testPod("p", "uid1")
	pod.Spec.InitContainers = []v1.Container{{Name: "i1"}, {Name: "i2"}, {Name: "i3"}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "PodInitializing"}}
	pod.Status = v1.PodStatus{
		Phase: v1.PodPending,
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "i1", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: "i2", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
			{Name: "i3", State: waiting},
		},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c1", State: waiting}},
	}
	m, _ := newManager(t, nil, nil)
	m.TerminatePod(pod)
	got, _ := m.GetPodStatus(pod.UID)
	assert.Equal(t, status.ContainerStatusUnknown, got.InitContainerStatuses[1].State.Terminated.Reason, "running init container")
	assert.NotNil(t, got.InitContainerStatuses[2].State.Waiting, "init container that never ran")
	assert.NotNil(t, got.ContainerStatuses[0].State.Waiting, "regular container of an uninitialized pod")
	assert.Equal(t, v1.PodFailed, got.Phase)
}

func TestTerminatePodEnsuresTerminalPhase(t *testing.T) {
	cases := []struct {
		name   string
		static bool
		phase  v1.PodPhase
		want   v1.PodPhase
	}{
		{name: "pending pod fails", phase: v1.PodPending, want: v1.PodFailed},
		{name: "running pod fails", phase: v1.PodRunning, want: v1.PodFailed},
		{name: "succeeded pod stays succeeded", phase: v1.PodSucceeded, want: v1.PodSucceeded},
		{name: "failed pod stays failed", phase: v1.PodFailed, want: v1.PodFailed},
		{name: "static pod keeps its phase", static: true, phase: v1.PodRunning, want: v1.PodRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "uid1")
			if tc.static {
				pod = staticPod("p", "h1")
			}
			m, _ := newManager(t, nil, nil)
			st := runningStatus("cri://a")
			st.Phase = tc.phase
			m.SetPodStatus(pod, st)
			m.TerminatePod(pod)
			got, _ := m.GetPodStatus(pod.UID)
			assert.Equal(t, tc.want, got.Phase)
		})
	}
}

func TestGuards(t *testing.T) {
	terminated := func(code int32) v1.PodStatus {
		st := runningStatus("cri://a")
		st.Phase = v1.PodRunning
		st.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
		return st
	}
	cases := []struct {
		name      string
		policy    v1.RestartPolicy
		first     v1.PodStatus
		firstPh   v1.PodPhase
		wantPhase v1.PodPhase
		wantState string
	}{
		{name: "terminal phase is never left", policy: v1.RestartPolicyAlways, first: terminated(0),
			firstPh: v1.PodSucceeded, wantPhase: v1.PodSucceeded, wantState: "running"},
		{name: "terminated container does not run again under Never", policy: v1.RestartPolicyNever,
			first: terminated(1), firstPh: v1.PodRunning, wantPhase: v1.PodRunning, wantState: "terminated"},
		{name: "successful container does not run again under OnFailure", policy: v1.RestartPolicyOnFailure,
			first: terminated(0), firstPh: v1.PodRunning, wantPhase: v1.PodRunning, wantState: "terminated"},
		{name: "failed container restarts under OnFailure", policy: v1.RestartPolicyOnFailure,
			first: terminated(1), firstPh: v1.PodRunning, wantPhase: v1.PodRunning, wantState: "running"},
		{name: "container restarts under Always", policy: v1.RestartPolicyAlways,
			first: terminated(0), firstPh: v1.PodRunning, wantPhase: v1.PodRunning, wantState: "running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "uid1")
			pod.Spec.RestartPolicy = tc.policy
			m, _ := newManager(t, nil, nil)
			tc.first.Phase = tc.firstPh
			m.SetPodStatus(pod, tc.first)
			m.SetPodStatus(pod, runningStatus("cri://b"))
			got, _ := m.GetPodStatus(pod.UID)
			assert.Equal(t, tc.wantPhase, got.Phase)
			state := "terminated"
			if got.ContainerStatuses[0].State.Running != nil {
				state = "running"
			}
			assert.Equal(t, tc.wantState, state)
		})
	}
}

func TestDeletePod(t *testing.T) {
	cases := []struct {
		name       string
		deleting   bool
		terminate  bool
		couldRun   bool
		wantDelete bool
		wantPhase  v1.PodPhase
	}{
		{name: "finished pod being deleted is removed", deleting: true, terminate: true, wantDelete: true, wantPhase: v1.PodFailed},
		{name: "pod not finished is not removed", deleting: true, wantPhase: v1.PodSucceeded},
		{name: "pod whose containers could run keeps its phase and is not removed", deleting: true, terminate: true,
			couldRun: true, wantPhase: v1.PodRunning},
		{name: "finished pod not being deleted is kept", terminate: true, wantPhase: v1.PodSucceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "uid1")
			pod.Spec.RestartPolicy = v1.RestartPolicyNever
			if tc.deleting {
				ts := metav1.NewTime(t0)
				pod.DeletionTimestamp = &ts
			}
			api := pod.DeepCopy()
			api.Status.Phase = v1.PodRunning
			f := statustest.New(api)
			safety := &fakeSafety{couldRun: tc.couldRun}
			m, _ := newManager(t, f, func(c *status.Config) { c.DeletionSafety = safety })

			st := runningStatus("cri://a")
			st.Phase = v1.PodSucceeded
			st.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
			m.SetPodStatus(pod, st)
			if tc.terminate {
				m.TerminatePod(pod)
			}
			m.Sync(context.Background())

			stored, exists := f.Pod("ns", "p")
			assert.Equal(t, tc.wantDelete, !exists)
			if exists {
				assert.Equal(t, tc.wantPhase, stored.Status.Phase)
				return
			}
			del := f.Actions()[len(f.Actions())-1]
			require.Equal(t, statustest.VerbDelete, del.Verb)
			assert.EqualValues(t, 0, *del.DeleteOptions.GracePeriodSeconds)
			assert.EqualValues(t, "uid1", *del.DeleteOptions.Preconditions.UID)
			_, ok := m.GetPodStatus(pod.UID)
			assert.False(t, ok, "status of a deleted pod is forgotten")
		})
	}
}

func TestDeletePodWhileReclaiming(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	ts := metav1.NewTime(t0)
	pod.DeletionTimestamp = &ts
	api := pod.DeepCopy()
	api.Status.Phase = v1.PodRunning
	f := statustest.New(api)
	safety := &fakeSafety{couldRun: true}
	m, _ := newManager(t, f, func(c *status.Config) { c.DeletionSafety = safety })
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.TerminatePod(pod)
	m.Sync(ctx)
	stored, ok := f.Pod("ns", "p")
	require.True(t, ok, "not deleted while containers could run")
	assert.Equal(t, v1.PodRunning, stored.Status.Phase, "terminal phase held back")

	safety.couldRun = false
	f.ClearActions()
	m.Sync(ctx)
	assert.Equal(t, []string{"get", "patch", "delete"}, verbs(f), "the reconcile finishes the job")
	_, ok = f.Pod("ns", "p")
	assert.False(t, ok)
}

func TestConditionsOfOthersAreKept(t *testing.T) {
	pod := testPod("p", "uid1")
	api := pod.DeepCopy()
	api.Status.Conditions = []v1.PodCondition{
		{Type: "example.com/Gate", Status: v1.ConditionTrue},
		{Type: v1.PodInitialized, Status: v1.ConditionFalse},
	}
	f := statustest.New(api)
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	stored, _ := f.Pod("ns", "p")
	types := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range stored.Status.Conditions {
		types[c.Type] = c.Status
	}
	assert.Equal(t, map[v1.PodConditionType]v1.ConditionStatus{
		"example.com/Gate": v1.ConditionTrue,
		v1.PodReady:        v1.ConditionTrue,
		v1.ContainersReady: v1.ConditionTrue,
	}, types, "others' kept, the agent's replaced, stale agent-owned removed")
	for _, c := range stored.Status.Conditions {
		if c.Type == v1.PodReady {
			assert.Equal(t, t0, c.LastTransitionTime.Time.UTC(), "transition time set")
		}
	}
}

func TestSetContainerReadiness(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, _ := newManager(t, f, nil)
	st := runningStatus("cri://a")
	st.ContainerStatuses[0].Ready = false
	st.Conditions = nil
	m.SetPodStatus(pod, st)
	m.Sync(ctx)
	f.ClearActions()

	m.SetContainerReadiness(pod.UID, runtime.ContainerID{Type: "cri", ID: "a"}, true)
	got, _ := m.GetPodStatus(pod.UID)
	assert.True(t, got.ContainerStatuses[0].Ready)
	ready := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range got.Conditions {
		ready[c.Type] = c.Status
	}
	assert.Equal(t, v1.ConditionTrue, ready[v1.PodReady])
	assert.Equal(t, v1.ConditionTrue, ready[v1.ContainersReady])
	m.Sync(ctx)
	assert.Equal(t, 1, f.Count(statustest.VerbPatch))

	f.ClearActions()
	m.SetContainerReadiness(pod.UID, runtime.ContainerID{Type: "cri", ID: "a"}, true)
	m.SetContainerReadiness(pod.UID, runtime.ContainerID{Type: "cri", ID: "unknown"}, false)
	m.SetContainerReadiness("other-pod", runtime.ContainerID{Type: "cri", ID: "a"}, false)
	m.SetContainerStartup(pod.UID, runtime.ContainerID{Type: "cri", ID: "a"}, true)
	m.Sync(ctx)
	got, _ = m.GetPodStatus(pod.UID)
	assert.True(t, *got.ContainerStatuses[0].Started)
	assert.Equal(t, 1, f.Count(statustest.VerbPatch), "only the startup change is sent")
}

func TestMirrorPods(t *testing.T) {
	ctx := context.Background()
	pod := staticPod("etcd", "h1")
	f := statustest.New()
	m, _ := newManager(t, f, func(c *status.Config) { c.Nodes = fakeNodes{uid: "node-uid"} })

	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	assert.Equal(t, []string{"get", "create", "patch"}, verbs(f))
	mirror, ok := f.Pod("ns", "etcd")
	require.True(t, ok, "mirror created")
	assert.Equal(t, "h1", mirror.Annotations[podutil.ConfigMirrorAnnotationKey])
	require.Len(t, mirror.OwnerReferences, 1)
	assert.Equal(t, "Node", mirror.OwnerReferences[0].Kind)
	assert.Equal(t, types.UID("node-uid"), mirror.OwnerReferences[0].UID)
	assert.Equal(t, v1.PodRunning, mirror.Status.Phase, "status sent to the mirror")
	assert.NotEqual(t, pod.UID, mirror.UID)

	got, ok := m.GetPodStatus(mirror.UID)
	require.True(t, ok, "status found by the mirror's UID")
	assert.Equal(t, v1.PodRunning, got.Phase)

	// The static pod changes: a new UID and hash; the old mirror is replaced.
	m.RemoveOrphanedStatuses(map[types.UID]bool{})
	pod2 := staticPod("etcd", "h2")
	m.SetPodStatus(pod2, runningStatus("cri://b"))
	f.ClearActions()
	m.Sync(ctx)
	mirror2, ok := f.Pod("ns", "etcd")
	require.True(t, ok)
	assert.Equal(t, "h2", mirror2.Annotations[podutil.ConfigMirrorAnnotationKey])
	assert.NotEqual(t, mirror.UID, mirror2.UID)
	for _, a := range f.Actions() {
		if a.Verb == statustest.VerbDelete {
			assert.Equal(t, mirror.UID, *a.DeleteOptions.Preconditions.UID, "deletes only the old mirror")
		}
	}

	// The static pod goes away: its mirror is deleted.
	m.RemoveOrphanedStatuses(map[types.UID]bool{})
	f.ClearActions()
	m.Sync(ctx)
	assert.Equal(t, []string{"delete"}, verbs(f))
	_, ok = f.Pod("ns", "etcd")
	assert.False(t, ok)
}

func TestMirrorPodOfAFinishedStaticPodIsNotCreated(t *testing.T) {
	pod := staticPod("etcd", "h1")
	f := statustest.New()
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.TerminatePod(pod)
	m.Sync(context.Background())
	assert.Equal(t, []string{"get"}, verbs(f))
	f.ClearActions()
	m.Sync(context.Background())
	assert.Empty(t, verbs(f), "not asked again until the next change")
}

func TestNoMirrorPodWithoutNodeName(t *testing.T) {
	pod := staticPod("etcd", "h1")
	f := statustest.New()
	m, _ := newManager(t, f, func(c *status.Config) { c.NodeName = "" })
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	assert.Equal(t, []string{"get"}, verbs(f))
	_, ok := m.GetPodStatus(pod.UID)
	assert.True(t, ok, "the static pod's status is still served")
}

func TestStaticPodWithoutMirrorIsNotReadAgainByTheReconcile(t *testing.T) {
	ctx := context.Background()
	pod := staticPod("etcd", "h1")
	f := statustest.New()
	m, _ := newManager(t, f, func(c *status.Config) { c.NodeName = "" })
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	f.ClearActions()
	m.Sync(ctx)
	m.Sync(ctx)
	assert.Empty(t, verbs(f), "no mirror to check until the next change")

	m.SetPodStatus(pod, runningStatus("cri://b"))
	m.Sync(ctx)
	assert.Equal(t, []string{"get"}, verbs(f), "a change is still looked at")
}

func TestStaticPodNameTakenByARegularPod(t *testing.T) {
	pod := staticPod("etcd", "h1")
	f := statustest.New(testPod("etcd", "someone-elses"))
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	assert.Equal(t, []string{"get"}, verbs(f), "a pod that is no mirror is neither patched nor deleted")
}

func TestWithoutClientStatusesAreServed(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	pod := testPod("p", "uid1")
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	got, ok := m.GetPodStatus(pod.UID)
	require.True(t, ok)
	assert.Equal(t, v1.PodRunning, got.Phase)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	cancel()
	<-done

	m.RemoveOrphanedStatuses(map[types.UID]bool{})
	_, ok = m.GetPodStatus(pod.UID)
	assert.False(t, ok)
}

func TestStartSyncsChangesAndReconciles(t *testing.T) {
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, clk := newManager(t, f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	wait, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	f.InjectError(statustest.VerbPatch, apierrors.NewInternalError(assert.AnError))
	m.SetPodStatus(pod, runningStatus("cri://a"))
	require.NoError(t, f.WaitForActions(wait, statustest.VerbPatch, 1), "a change is synced at once")
	stored, _ := f.Pod("ns", "p")
	assert.Empty(t, stored.Status.Phase, "the first patch failed")

	for !clk.HasWaiters() {
		goruntime.Gosched()
	}
	// A tick that comes while the failed patch's worker still holds the
	// pod skips it (the worker has it): step until a reconcile resends it.
	require.Eventually(t, func() bool {
		clk.Step(10 * time.Second)
		return f.Count(statustest.VerbPatch) >= 2
	}, 30*time.Second, 10*time.Millisecond, "the reconcile resends it")
}

func TestDeletedMirrorPodIsRecreatedByTheReconcile(t *testing.T) {
	ctx := context.Background()
	pod := staticPod("etcd", "h1")
	f := statustest.New()
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	f.Remove("ns", "etcd")
	f.ClearActions()

	m.Sync(ctx)
	assert.Equal(t, []string{"get", "create", "patch"}, verbs(f))
	mirror, ok := f.Pod("ns", "etcd")
	require.True(t, ok)
	assert.Equal(t, v1.PodRunning, mirror.Status.Phase)
	_, ok = m.GetPodStatus(mirror.UID)
	assert.True(t, ok, "the new mirror's UID translates")

	f.ClearActions()
	m.Sync(ctx)
	assert.Equal(t, []string{"get"}, verbs(f), "an intact mirror costs one read per reconcile")
}

func TestNewStatusKeepsTheAPIStartTime(t *testing.T) {
	pod := testPod("p", "uid1")
	start := metav1.NewTime(t0.Add(-time.Minute))
	pod.Status.StartTime = &start
	m, _ := newManager(t, nil, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	got, _ := m.GetPodStatus(pod.UID)
	assert.True(t, got.StartTime.Equal(&start))

	st := runningStatus("cri://a")
	later := metav1.NewTime(t0)
	st.StartTime = &later
	st.Message = "changed"
	m.SetPodStatus(pod, st)
	got, _ = m.GetPodStatus(pod.UID)
	assert.True(t, got.StartTime.Equal(&start), "start time never changes")
}

func TestConditionTransitionTimes(t *testing.T) {
	pod := testPod("p", "uid1")
	m, clk := newManager(t, nil, nil)
	ready := func(s v1.ConditionStatus) v1.PodStatus {
		return v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: s}}}
	}
	readyTime := func() time.Time {
		got, _ := m.GetPodStatus(pod.UID)
		return got.Conditions[0].LastTransitionTime.Time.UTC()
	}
	m.SetPodStatus(pod, ready(v1.ConditionTrue))
	assert.Equal(t, t0, readyTime(), "new condition")

	clk.Step(time.Minute)
	m.SetPodStatus(pod, ready(v1.ConditionTrue))
	assert.Equal(t, t0, readyTime(), "unchanged condition keeps its time")

	clk.Step(time.Minute)
	m.SetPodStatus(pod, ready(v1.ConditionFalse))
	assert.Equal(t, t0.Add(2*time.Minute), readyTime(), "changed condition")
}

// TestTerminatePodWithStalePod ports upstream's TestTerminatePod: the pod
// handed to TerminatePod carries an outdated apiserver status; the cached
// status is the base, and what it shows terminated stays as it was.
func TestTerminatePodWithStalePod(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	pod := testPod("p", "uid1")
	pod.Spec.InitContainers = []v1.Container{{Name: "init-1"}, {Name: "init-2"}, {Name: "init-3"}}
	pod.Spec.Containers = []v1.Container{{Name: "test-1"}, {Name: "test-2"}, {Name: "test-3"}}
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	term := func(reason string, code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: code}}
	}
	first := v1.PodStatus{
		Phase: v1.PodFailed, Message: "first",
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "init-1"}, {Name: "init-2", State: term("InitTest", 0)}, {Name: "init-3", State: term("InitTest", 3)},
		},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "test-1"}, {Name: "test-2", State: term("Test", 2)}, {Name: "test-3", State: term("Test", 0)},
		},
	}
	m.SetPodStatus(pod, first)

	stale := pod.DeepCopy()
	stale.Status = v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "test-1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
	}}
	m.TerminatePod(stale)

	got, _ := m.GetPodStatus(pod.UID)
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason: status.ContainerStatusUnknown, Message: "The container could not be located when the pod was terminated", ExitCode: 137,
	}}
	assert.Equal(t, unknown, got.InitContainerStatuses[0].State, "init container with no state")
	assert.Equal(t, first.InitContainerStatuses[1].State, got.InitContainerStatuses[1].State)
	assert.Equal(t, first.InitContainerStatuses[2].State, got.InitContainerStatuses[2].State)
	assert.Equal(t, unknown, got.ContainerStatuses[0].State, "container with no state")
	assert.Equal(t, first.ContainerStatuses[1].State, got.ContainerStatuses[1].State)
	assert.Equal(t, first.ContainerStatuses[2].State, got.ContainerStatuses[2].State)
	assert.Equal(t, v1.PodFailed, got.Phase)
	assert.Equal(t, "first", got.Message, "the cached status is kept")
}

type panickingSafety struct{}

func (panickingSafety) PodCouldHaveRunningContainers(*v1.Pod) bool { panic("boom") }

func TestPanicInAnInjectedDependencyDoesNotEscape(t *testing.T) {
	pods := []*v1.Pod{testPod("p1", "uid1"), testPod("p2", "uid2")}
	f := statustest.New(pods...)
	m, _ := newManager(t, f, func(c *status.Config) { c.DeletionSafety = panickingSafety{} })
	for _, p := range pods {
		m.SetPodStatus(p, runningStatus("cri://a"))
	}
	require.NotPanics(t, func() { m.Sync(context.Background()) })
	assert.Equal(t, 2, f.Count(statustest.VerbGet), "every pod is tried")
	assert.Equal(t, 0, f.Count(statustest.VerbPatch))
}

func TestStatusesAreCopiedInAndOut(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	pod := testPod("p", "uid1")
	st := runningStatus("cri://a")
	m.SetPodStatus(pod, st)
	st.ContainerStatuses[0].Name = "changed by the caller"
	got, _ := m.GetPodStatus(pod.UID)
	got.ContainerStatuses[0].Image = "changed by the reader"
	again, _ := m.GetPodStatus(pod.UID)
	assert.Equal(t, "c1", again.ContainerStatuses[0].Name)
	assert.Equal(t, "img", again.ContainerStatuses[0].Image)
}

func TestSharedStatusIsNotChangedByLaterUpdates(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	pod := testPod("p", "uid1")
	m.SetPodStatus(pod, runningStatus("cri://a"))
	shared, ok := m.SharedPodStatus(pod.UID)
	require.True(t, ok)
	before := shared.DeepCopy()

	m.SetContainerReadiness(pod.UID, runtime.ContainerID{Type: "cri", ID: "a"}, false)
	m.SetPodStatus(pod, runningStatus("cri://b"))
	assert.Equal(t, before, shared, "a status handed out is never modified")
	now, _ := m.SharedPodStatus(pod.UID)
	assert.Equal(t, "cri://b", now.ContainerStatuses[0].ContainerID, "the latest status replaces it")

	_, ok = m.SharedPodStatus("unknown")
	assert.False(t, ok)
}

func TestPodBeingDeletedIsSyncedWithoutChange(t *testing.T) {
	ctx := context.Background()
	pod := testPod("p", "uid1")
	f := statustest.New(pod)
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(ctx)
	f.ClearActions()

	deleting := pod.DeepCopy()
	ts := metav1.NewTime(t0)
	deleting.DeletionTimestamp = &ts
	m.SetPodStatus(deleting, runningStatus("cri://a"))
	m.Sync(ctx)
	assert.Equal(t, []string{"get"}, verbs(f), "the same status is synced again (and found current)")
}

// A terminal phase held back while containers could run is sent by the
// next signalled sync after Resend, not only by the periodic reconcile.
func TestResendSendsAHeldBackTerminalPhase(t *testing.T) {
	pod := testPod("p", "uid1")
	api := pod.DeepCopy()
	api.Status.Phase = v1.PodRunning
	f := statustest.New(api)
	safety := &atomicSafety{}
	safety.v.Store(true)
	m, _ := newManager(t, f, func(c *status.Config) { c.DeletionSafety = safety })
	failed := runningStatus("cri://a")
	failed.Phase = v1.PodFailed
	m.SetPodStatus(pod, failed)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	phase := func() v1.PodPhase { p, _ := f.Pod("ns", "p"); return p.Status.Phase }
	require.Eventually(t, func() bool { return len(verbs(f)) >= 2 }, 5*time.Second, time.Millisecond)
	require.Equal(t, v1.PodRunning, phase(), "held back while containers could run")
	safety.v.Store(false)
	m.Resend(pod.UID)
	require.Eventually(t, func() bool { return phase() == v1.PodFailed }, 5*time.Second, time.Millisecond)
}

type atomicSafety struct{ v atomic.Bool }

func (s *atomicSafety) PodCouldHaveRunningContainers(*v1.Pod) bool { return s.v.Load() }

// A pod deleted from the apiserver before the agent hears of it: its patch
// answers NotFound, the pod is read once (NotFound too) and nothing more is
// sent, nor is the source's copy patched again at its next change. The
// retry used to patch that copy again and again (11,000 patches answered
// 404 in 7 minutes of churn, one status worker held).
func TestPatchOfAPodGoneFromTheAPIServerReadsItOnce(t *testing.T) {
	pod := testPod("p", "uid1")
	pod.ResourceVersion = "7" // as the watch delivered it: known
	f := statustest.New()     // but gone from the apiserver
	m, _ := newManager(t, f, nil)
	m.SetPodStatus(pod, runningStatus("cri://a"))
	m.Sync(context.Background())
	assert.Equal(t, []string{"patch", "get"}, verbs(f))

	f.ClearActions()
	st := runningStatus("cri://a")
	st.Message = "later"
	m.SetPodStatus(pod, st)
	m.Sync(context.Background())
	assert.Equal(t, []string{"get"}, verbs(f), "a later change reads the pod first")
}

// patchOnlyClient hides the Fake's UpdateStatus.
type patchOnlyClient struct{ status.PodClient }

// With UpdateKnownStatus a status whose base the Manager knows is written
// with one update on that base's resourceVersion; a base someone changed
// since answers Conflict, and the pod is read and patched. Where a read is
// needed anyway, or the client cannot update, it patches.
func TestUpdateKnownStatus(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		update      bool
		patchOnly   bool
		before      func(f *statustest.Fake)
		first, next v1.PodStatus
		verbs       []string
		check       func(t *testing.T, stored *v1.Pod)
	}{
		{name: "first and later writes: updates, no read", update: true, first: runningWithMessage("one"), next: runningWithMessage("two"),
			verbs: []string{"update", "update"}, check: func(t *testing.T, p *v1.Pod) {
				assert.Equal(t, "two", p.Status.Message)
				assert.Equal(t, map[string]string{"example.com/a": "b"}, p.Annotations, "the agent's annotations are not stored, the pod's kept")
				assert.Equal(t, map[string]string{"app": "web"}, p.Labels, "the pod's labels are kept")
				assert.Equal(t, []string{"batch.kubernetes.io/job-tracking"}, p.Finalizers, "the pod's finalizers are kept")
				assert.Equal(t, "p-", p.GenerateName, "the pod's generateName is kept")
			}},
		{name: "another writer's change: conflict, read, patch; its condition stays", update: true, first: runningWithMessage("one"), next: runningWithMessage("two"),
			before: func(f *statustest.Fake) {
				p, _ := f.Pod("ns", "p")
				p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue})
				f.Add(p)
			},
			verbs: []string{"update", "update", "get", "patch"}, check: func(t *testing.T, p *v1.Pod) {
				assert.Equal(t, "two", p.Status.Message)
				var types []v1.PodConditionType
				for _, c := range p.Status.Conditions {
					types = append(types, c.Type)
				}
				assert.Contains(t, types, v1.PodConditionType("example.com/gate"))
			}},
		{name: "terminal status: read, patch", update: true, first: runningWithMessage("one"), next: v1.PodStatus{Phase: v1.PodSucceeded},
			verbs: []string{"update", "get", "patch"}, check: func(t *testing.T, p *v1.Pod) {
				assert.Equal(t, v1.PodSucceeded, p.Status.Phase)
			}},
		{name: "client without UpdateStatus: patches", update: true, patchOnly: true, first: runningWithMessage("one"), next: runningWithMessage("two"),
			verbs: []string{"patch", "patch"}, check: func(t *testing.T, p *v1.Pod) { assert.Equal(t, "two", p.Status.Message) }},
		{name: "default: patches, as the kubelet", first: runningWithMessage("one"), next: runningWithMessage("two"),
			verbs: []string{"patch", "patch"}, check: func(t *testing.T, p *v1.Pod) { assert.Equal(t, "two", p.Status.Message) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := testPod("p", "uid1")
			orig.Annotations = map[string]string{"example.com/a": "b"}
			orig.Labels = map[string]string{"app": "web"}
			orig.Finalizers, orig.GenerateName = []string{"batch.kubernetes.io/job-tracking"}, "p-"
			f := statustest.New(orig)
			// The agent's copy: as the watch delivered it, with podconfig's
			// annotations.
			pod, _ := f.Pod("ns", "p")
			pod.Annotations[podutil.ConfigSourceAnnotationKey] = podutil.ApiserverSource
			pod.Annotations[podutil.ConfigFirstSeenAnnotationKey] = "2026-11-27T10:00:00Z"
			m, _ := newManager(t, f, func(c *status.Config) {
				c.UpdateKnownStatus = tc.update
				if tc.patchOnly {
					c.PodClient = func(ns string) status.PodClient { return patchOnlyClient{f.Pods(ns)} }
				}
			})
			m.SetPodStatus(pod, tc.first)
			m.Sync(ctx)
			if tc.before != nil {
				tc.before(f)
			}
			m.SetPodStatus(pod, tc.next)
			m.Sync(ctx)
			assert.Equal(t, tc.verbs, verbs(f))
			stored, _ := f.Pod("ns", "p")
			tc.check(t, stored)
		})
	}
}

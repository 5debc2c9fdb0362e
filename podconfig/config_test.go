package podconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podutil"
)

const testSource = "test"

// waitTimeout only guards against a hung test; no assertion depends on it.
const waitTimeout = 10 * time.Second

func validPod(name, namespace string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID:       types.UID(name + namespace),
			Name:      name,
			Namespace: namespace,
		},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			DNSPolicy:     v1.DNSClusterFirst,
			Containers: []v1.Container{{
				Name:                     "ctr",
				Image:                    "image",
				ImagePullPolicy:          v1.PullIfNotPresent,
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
		},
	}
}

func update(op PodOperation, source string, pods ...*v1.Pod) PodUpdate {
	return PodUpdate{Pods: pods, Op: op, Source: source}
}

type tester struct {
	t      *testing.T
	ch     chan<- PodUpdate
	out    <-chan PodUpdate
	config *PodConfig
	rec    *podconfigtest.Recorder
	clock  *clocktesting.FakePassiveClock
}

func newTester(t *testing.T, mode NotificationMode) *tester {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := podconfigtest.NewRecorder(0)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c, err := NewPodConfig(mode, Options{Recorder: rec, Clock: clk})
	require.NoError(t, err)
	ch := c.Channel(ctx, testSource)
	t.Cleanup(cancel)
	return &tester{t: t, ch: ch, out: c.Updates(), config: c, rec: rec, clock: clk}
}

func (tt *tester) send(u PodUpdate) {
	tt.t.Helper()
	select {
	case tt.ch <- u:
	case <-time.After(waitTimeout):
		tt.t.Fatal("source channel not served")
	}
}

// stripLocal returns a copy of p without the agent's own annotations.
func stripLocal(p *v1.Pod) *v1.Pod {
	c := p.DeepCopy()
	for k := range c.Annotations {
		if isLocalAnnotation(k) {
			delete(c.Annotations, k)
		}
	}
	if len(c.Annotations) == 0 {
		c.Annotations = nil
	}
	return c
}

func sortPods(p []*v1.Pod) {
	sort.Slice(p, func(i, j int) bool { return podutil.FullName(p[i]) < podutil.FullName(p[j]) })
}

// expect reads the given updates, in order, then checks nothing else was
// delivered. Merges deliver synchronously before the listener takes the next
// update, so a following send on the unbuffered source channel orders it.
func (tt *tester) expect(want ...PodUpdate) {
	tt.t.Helper()
	for i, w := range want {
		var got PodUpdate
		select {
		case got = <-tt.out:
		case <-time.After(waitTimeout):
			tt.t.Fatalf("update %d: want %v %s, got none", i, w.Op, w.Source)
		}
		require.Equal(tt.t, w.Op, got.Op, "update %d op", i)
		require.Equal(tt.t, w.Source, got.Source, "update %d source", i)
		require.Len(tt.t, got.Pods, len(w.Pods), "update %d pods", i)
		gp := append([]*v1.Pod(nil), got.Pods...)
		wp := append([]*v1.Pod(nil), w.Pods...)
		sortPods(gp)
		sortPods(wp)
		for j := range wp {
			if !apiequality.Semantic.DeepEqual(stripLocal(wp[j]), stripLocal(gp[j])) {
				assert.Equal(tt.t, stripLocal(wp[j]), stripLocal(gp[j]), "update %d pod %d", i, j)
				tt.t.FailNow()
			}
		}
	}
	tt.expectNothing()
}

// expectNothing checks that no update is pending. An empty REMOVE goes
// through the source channel first as a barrier: the listener takes it only
// after the previous merge has delivered everything.
func (tt *tester) expectNothing() {
	tt.t.Helper()
	tt.send(update(REMOVE, testSource))
	select {
	case u := <-tt.out:
		tt.t.Fatalf("want no update, got %v %s with %d pods", u.Op, u.Source, len(u.Pods))
	default:
	}
}

func (tt *tester) sync() {
	tt.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(tt.t, tt.config.Sync(ctx))
}

func TestNewPodConfigRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode NotificationMode
		opts Options
	}{
		{"unknown mode", 0, Options{}},
		{"mode out of range", SnapshotAndUpdates + 1, Options{}},
		{"negative buffer", Incremental, Options{UpdatesBuffer: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPodConfig(tc.mode, tc.opts)
			assert.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
}

func TestModeIsTheOneGivenToNew(t *testing.T) {
	for _, m := range []NotificationMode{Incremental, Snapshot, SnapshotAndUpdates} {
		c, err := NewPodConfig(m, Options{})
		require.NoError(t, err)
		assert.Equal(t, m, c.Mode())
	}
}

func TestNewPodAdded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		namespace string
	}{
		{"pod in a namespace is added", "new"},
		{"pod without namespace is added as is", ""},
		{"pod in the default namespace is added", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTester(t, Incremental)
			tt.send(update(ADD, testSource, validPod("foo", tc.namespace)))
			tt.expect(update(ADD, testSource, validPod("foo", tc.namespace)))
			tt.sync()
			tt.expect(update(SET, podutil.AllSource, validPod("foo", tc.namespace)))
		})
	}
}

func TestNewPodAddedDifferentNamespaces(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, validPod("foo", "default")))
	tt.expect(update(ADD, testSource, validPod("foo", "default")))
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	tt.expect(update(ADD, testSource, validPod("foo", "new")))
	tt.sync()
	tt.expect(update(SET, podutil.AllSource, validPod("foo", "default"), validPod("foo", "new")))
}

func TestNewPodAddedAnnotatesSourceAndFirstSeen(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	got := <-tt.out
	require.Len(t, got.Pods, 1)
	assert.Equal(t, testSource, got.Pods[0].Annotations[podutil.ConfigSourceAnnotationKey])
	assert.Equal(t, "2026-01-02T03:04:05Z", got.Pods[0].Annotations[podutil.ConfigFirstSeenAnnotationKey])

	// An update keeps the first-seen time.
	tt.clock.SetTime(tt.clock.Now().Add(time.Hour))
	changed := validPod("foo", "new")
	changed.Labels = map[string]string{"a": "b"}
	tt.send(update(UPDATE, testSource, changed))
	got = <-tt.out
	require.Equal(t, UPDATE, got.Op)
	assert.Equal(t, "2026-01-02T03:04:05Z", got.Pods[0].Annotations[podutil.ConfigFirstSeenAnnotationKey])
}

func TestInvalidPodFiltered(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	tt.expect(update(ADD, testSource, validPod("foo", "new")))

	// The same pod again is no change.
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	tt.sync()
	tt.expect(update(SET, podutil.AllSource, validPod("foo", "new")))
}

func TestDuplicateNameInOneUpdateIsDroppedWithEvent(t *testing.T) {
	for _, op := range []PodOperation{ADD, SET} {
		t.Run(op.String(), func(t *testing.T) {
			tt := newTester(t, Incremental)
			first := validPod("foo", "new")
			dup := validPod("foo", "new")
			dup.UID = "other-uid"
			other := validPod("bar", "new")
			tt.send(update(op, testSource, first, dup, other))
			tt.expect(update(ADD, testSource, validPod("foo", "new"), validPod("bar", "new")))
			events := tt.rec.Events()
			require.Len(t, events, 1)
			assert.Equal(t, ReasonFailedValidation, events[0].Reason)
			assert.Equal(t, v1.EventTypeWarning, events[0].Type)
			assert.Contains(t, events[0].Message, `duplicate pod name "foo"`)
			assert.Same(t, dup, events[0].Object)
		})
	}
}

func TestPodWithoutUIDIsRejectedOnceWithEventAndErrorLog(t *testing.T) {
	for _, op := range []PodOperation{ADD, SET} {
		t.Run(op.String(), func(t *testing.T) {
			var mu sync.Mutex
			var errs []string
			log := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, args)
			}, funcr.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			rec := podconfigtest.NewRecorder(0)
			c, err := NewPodConfig(Incremental, Options{Recorder: rec, Log: log})
			require.NoError(t, err)
			tt := &tester{t: t, ch: c.Channel(ctx, testSource), out: c.Updates(), config: c, rec: rec}

			noUID := validPod("nouid", "new")
			noUID.UID = ""
			other := validPod("other", "new")
			tt.send(update(op, testSource, noUID, other))
			tt.expect(update(ADD, testSource, validPod("other", "new")))
			tt.send(update(op, testSource, noUID.DeepCopy(), other))
			tt.expectNothing()

			events := rec.Events()
			require.Len(t, events, 1, "one event however often the pod is sent")
			assert.Equal(t, v1.EventTypeWarning, events[0].Type)
			assert.Equal(t, ReasonFailedValidation, events[0].Reason)
			assert.Contains(t, events[0].Message, "nouid_new")
			assert.Contains(t, events[0].Message, "uid")
			mu.Lock()
			var noUIDErrs []string
			for _, e := range errs {
				if strings.Contains(e, `"error"`) && strings.Contains(e, "new/nouid") {
					noUIDErrs = append(noUIDErrs, e)
				}
			}
			mu.Unlock()
			assert.Len(t, noUIDErrs, 1, "one error log line naming the pod")

			// Gone and sent again: reported again.
			tt.send(update(REMOVE, testSource, noUID.DeepCopy()))
			tt.expectNothing()
			tt.send(update(ADD, testSource, noUID.DeepCopy()))
			tt.expectNothing()
			assert.Len(t, rec.Events(), 2)
		})
	}
}

// A pod without a UID that a SET no longer carries is forgotten: sent
// again later, it is reported again.
func TestPodWithoutUIDLeftOutOfASetIsReportedAgain(t *testing.T) {
	tt := newTester(t, Incremental)
	noUID := validPod("nouid", "new")
	noUID.UID = ""
	other := validPod("other", "new")
	tt.send(update(SET, testSource, noUID, other))
	tt.expect(update(ADD, testSource, validPod("other", "new")))
	tt.send(update(SET, testSource, other))
	tt.expectNothing()
	require.Len(t, tt.rec.Events(), 1)
	tt.send(update(SET, testSource, noUID.DeepCopy(), other))
	tt.expectNothing()
	assert.Len(t, tt.rec.Events(), 2, "reported again after a SET without it")
}

func TestNilPodIsIgnored(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, nil, validPod("foo", "new")))
	tt.expect(update(ADD, testSource, validPod("foo", "new")))
	tt.send(update(REMOVE, testSource, nil))
	tt.expectNothingAfterSync(validPod("foo", "new"))
}

func (tt *tester) expectNothingAfterSync(all ...*v1.Pod) {
	tt.t.Helper()
	tt.expectNothing()
	tt.sync()
	tt.expect(update(SET, podutil.AllSource, all...))
}

func TestNewPodAddedSnapshotAndUpdates(t *testing.T) {
	tt := newTester(t, SnapshotAndUpdates)
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	tt.expect(update(SET, testSource, validPod("foo", "new")))
	tt.sync()
	tt.expect(update(SET, podutil.AllSource, validPod("foo", "new")))

	// A container change is delivered as UPDATE alone.
	pod := validPod("foo", "new")
	pod.Spec.Containers = []v1.Container{{Name: "bar", Image: "test", ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePolicy: v1.TerminationMessageReadFile}}
	tt.send(update(ADD, testSource, pod.DeepCopy()))
	tt.expect(update(UPDATE, testSource, pod))

	// A graceful deletion is delivered as DELETE alone.
	deleted := pod.DeepCopy()
	now := metav1.NewTime(time.Unix(100, 0))
	deleted.DeletionTimestamp = &now
	tt.send(update(UPDATE, testSource, deleted.DeepCopy()))
	tt.expect(update(DELETE, testSource, deleted))

	// A removal is delivered as a SET of what is left.
	tt.send(update(REMOVE, testSource, deleted.DeepCopy()))
	tt.expect(update(SET, testSource))
}

func TestNewPodAddedSnapshot(t *testing.T) {
	tt := newTester(t, Snapshot)
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	tt.expect(update(SET, testSource, validPod("foo", "new")))
	tt.sync()
	tt.expect(update(SET, podutil.AllSource, validPod("foo", "new")))

	pod := validPod("foo", "new")
	pod.Spec.Containers = []v1.Container{{Name: "bar", Image: "test", ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePolicy: v1.TerminationMessageReadFile}}
	tt.send(update(ADD, testSource, pod.DeepCopy()))
	tt.expect(update(SET, testSource, pod))

	// A status-only change is not reported in snapshot mode.
	st := pod.DeepCopy()
	st.Status.Message = "hello"
	tt.send(update(ADD, testSource, st))
	tt.expectNothingAfterSync(st)
}

func TestNewPodAddedUpdatedRemoved(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	tt.expect(update(ADD, testSource, validPod("foo", "new")))

	// An ADD of a known pod with a changed spec becomes an UPDATE.
	pod := validPod("foo", "new")
	pod.Spec.Containers = []v1.Container{{Name: "bar", Image: "test", ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePolicy: v1.TerminationMessageReadFile}}
	tt.send(update(ADD, testSource, pod.DeepCopy()))
	tt.expect(update(UPDATE, testSource, pod))

	// A REMOVE reports the stored pod, whatever the removal carried.
	tt.send(update(REMOVE, testSource, validPod("foo", "new")))
	tt.expect(update(REMOVE, testSource, pod))

	// Removing an unknown pod is a no-op.
	tt.send(update(REMOVE, testSource, validPod("foo", "new")))
	tt.expectNothingAfterSync()
}

func TestNewPodAddedDelete(t *testing.T) {
	tt := newTester(t, Incremental)
	added := validPod("foo", "new")
	tt.send(update(ADD, testSource, added.DeepCopy()))
	tt.expect(update(ADD, testSource, added))

	ts := metav1.NewTime(time.Unix(1000, 0))
	deleted := validPod("foo", "new")
	deleted.DeletionTimestamp = &ts
	tt.send(update(DELETE, testSource, deleted.DeepCopy()))
	tt.expect(update(DELETE, testSource, deleted))

	// The same deletion again is no change.
	tt.send(update(UPDATE, testSource, deleted.DeepCopy()))
	tt.expectNothingAfterSync(deleted)
}

func TestNewPodAddedUpdatedSet(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, validPod("foo", "new"), validPod("foo2", "new"), validPod("foo3", "new")))
	tt.expect(update(ADD, testSource, validPod("foo", "new"), validPod("foo2", "new"), validPod("foo3", "new")))

	pod := validPod("foo2", "new")
	pod.Spec.Containers = []v1.Container{{Name: "bar", Image: "test", ImagePullPolicy: v1.PullIfNotPresent, TerminationMessagePolicy: v1.TerminationMessageReadFile}}
	tt.send(update(SET, testSource, pod.DeepCopy(), validPod("foo3", "new"), validPod("foo4", "new")))
	tt.expect(
		update(REMOVE, testSource, validPod("foo", "new")),
		update(ADD, testSource, validPod("foo4", "new")),
		update(UPDATE, testSource, pod))
}

func TestNewPodAddedSetReconciled(t *testing.T) {
	newTestPods := func(touchStatus, touchSpec bool, n int) ([]*v1.Pod, *v1.Pod) {
		pods := []*v1.Pod{
			validPod("changeable-pod-0", "new"),
			validPod("constant-pod-1", "new"),
			validPod("constant-pod-2", "new"),
		}
		if touchStatus {
			pods[0].Status = v1.PodStatus{Message: "status-" + strconv.Itoa(n)}
		}
		if touchSpec {
			pods[0].Spec.Containers[0].Name = "ctr-" + strconv.Itoa(n)
		}
		return pods, pods[0]
	}
	for _, op := range []PodOperation{ADD, SET} {
		t.Run(op.String(), func(t *testing.T) {
			tt := newTester(t, Incremental)
			pods, _ := newTestPods(false, false, 0)
			tt.send(update(SET, testSource, pods...))
			tt.expect(update(ADD, testSource, pods...))

			// Unchanged status: nothing.
			pods, _ = newTestPods(false, false, 0)
			tt.send(update(op, testSource, pods...))
			tt.expectNothingAfterSync(pods...)

			// Changed status alone: RECONCILE.
			pods, changed := newTestPods(true, false, 1)
			tt.send(update(op, testSource, pods...))
			tt.expect(update(RECONCILE, testSource, changed))

			// Changed status and spec: UPDATE only.
			pods, changed = newTestPods(true, true, 2)
			tt.send(update(op, testSource, pods...))
			tt.expect(update(UPDATE, testSource, changed))
		})
	}
}

func TestInitialEmptySet(t *testing.T) {
	for _, tc := range []struct {
		mode NotificationMode
		op   PodOperation
	}{
		{Incremental, ADD},
		{Snapshot, SET},
		{SnapshotAndUpdates, SET},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			tt := newTester(t, tc.mode)
			// The first, empty SET still reports the source in.
			tt.send(update(SET, testSource))
			tt.expect(update(tc.op, testSource))

			// Later empty SETs report nothing.
			tt.send(update(SET, testSource))
			tt.send(update(ADD, testSource, validPod("foo", "new")))
			tt.expect(update(tc.op, testSource, validPod("foo", "new")))
		})
	}
}

func TestPodUpdateAnnotations(t *testing.T) {
	tt := newTester(t, Incremental)
	pod := validPod("foo2", "new")
	pod.Annotations = map[string]string{"kubernetes.io/blah": "blah"}

	tt.send(update(SET, testSource, validPod("foo1", "new"), pod.DeepCopy(), validPod("foo3", "new")))
	tt.expect(update(ADD, testSource, validPod("foo1", "new"), pod, validPod("foo3", "new")))

	pod.Annotations["kubernetes.io/blah"] = "superblah"
	tt.send(update(SET, testSource, validPod("foo1", "new"), pod.DeepCopy(), validPod("foo3", "new")))
	tt.expect(update(UPDATE, testSource, pod))

	pod.Annotations["kubernetes.io/otherblah"] = "doh"
	tt.send(update(SET, testSource, validPod("foo1", "new"), pod.DeepCopy(), validPod("foo3", "new")))
	tt.expect(update(UPDATE, testSource, pod))

	delete(pod.Annotations, "kubernetes.io/blah")
	tt.send(update(SET, testSource, validPod("foo1", "new"), pod.DeepCopy(), validPod("foo3", "new")))
	tt.expect(update(UPDATE, testSource, pod))

	// The agent's own annotations do not make a pod differ.
	local := pod.DeepCopy()
	local.Annotations[podutil.ConfigMirrorAnnotationKey] = "x"
	local.Annotations[podutil.ConfigFirstSeenAnnotationKey] = "yesterday"
	local.Annotations[podutil.ConfigSourceAnnotationKey] = "elsewhere"
	tt.send(update(SET, testSource, validPod("foo1", "new"), local, validPod("foo3", "new")))
	tt.expectNothingAfterSync(validPod("foo1", "new"), pod, validPod("foo3", "new"))
}

func TestPodUpdateLabels(t *testing.T) {
	tt := newTester(t, Incremental)
	pod := validPod("foo2", "new")
	pod.Labels = map[string]string{"key": "value"}
	tt.send(update(SET, testSource, pod.DeepCopy()))
	tt.expect(update(ADD, testSource, pod))

	pod.Labels["key"] = "newValue"
	tt.send(update(SET, testSource, pod.DeepCopy()))
	tt.expect(update(UPDATE, testSource, pod))
}

func TestChangeDetection(t *testing.T) {
	grace := int64(5)
	ts := metav1.NewTime(time.Unix(50, 0))
	for _, tc := range []struct {
		name   string
		mutate func(p *v1.Pod)
		want   PodOperation // -1: nothing
	}{
		{"identical pod produces nothing", func(*v1.Pod) {}, -1},
		{"nil and empty labels are equal", func(p *v1.Pod) { p.Labels = map[string]string{} }, -1},
		{"equal quantities in other units are equal", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}, -1},
		{"resourceVersion alone produces nothing", func(p *v1.Pod) { p.ResourceVersion = "42" }, -1},
		{"memory in bytes equals the same in Mi", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("134217728")}
		}, -1},
		{"changed cpu limit is an update", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1001m")}
		}, UPDATE},
		{"added request is an update", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
		}, UPDATE},
		{"limit moved to request is an update", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("128Mi")}
			p.Spec.Containers[0].Resources.Limits = nil
		}, UPDATE},
		{"init container resources are compared", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "i", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}}}
		}, UPDATE},
		{"pod overhead is compared", func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")} }, UPDATE},
		{"huge and fractional quantities are compared", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceEphemeralStorage] = resource.MustParse("0.5n")
		}, UPDATE},
		{"image change is an update", func(p *v1.Pod) { p.Spec.Containers[0].Image = "other" }, UPDATE},
		{"label change is an update", func(p *v1.Pod) { p.Labels = map[string]string{"a": "c"} }, UPDATE},
		{"annotation change is an update", func(p *v1.Pod) { p.Annotations = map[string]string{"x": "y"} }, UPDATE},
		{"grace period change is an update", func(p *v1.Pod) { p.DeletionGracePeriodSeconds = &grace }, UPDATE},
		{"new deletion timestamp is a delete", func(p *v1.Pod) { p.DeletionTimestamp = &ts }, DELETE},
		{"status change is a reconcile", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }, RECONCILE},
		{"nil versus zero pointer is an update", func(p *v1.Pod) { zero := int64(0); p.Spec.ActiveDeadlineSeconds = &zero }, UPDATE},
		{"equal env divisors in other units are equal", func(p *v1.Pod) {
			p.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.Divisor = resource.MustParse("1000m")
		}, -1},
		{"changed env divisor is an update", func(p *v1.Pod) {
			p.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.Divisor = resource.MustParse("1m")
		}, UPDATE},
		{"config annotations alone produce nothing", func(p *v1.Pod) {
			p.Annotations = map[string]string{podutil.ConfigSourceAnnotationKey: "other", podutil.ConfigFirstSeenAnnotationKey: "then"}
		}, -1},
	} {
		// The first comparison of a stored pod reads it (it went out
		// without fingerprints); later ones compare fingerprints.
		for _, compared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/compared before: %v", tc.name, compared), func(t *testing.T) {
				base := func() *v1.Pod {
					p := validPod("foo", "new")
					p.Labels = map[string]string{"a": "b"}
					p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1000m")}
					p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
					p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1")}}}}
					if tc.name == "nil and empty labels are equal" {
						p.Labels = nil
					}
					return p
				}
				tt := newTester(t, Incremental)
				tt.send(update(SET, testSource, base()))
				tt.expect(update(ADD, testSource, base()))
				if compared {
					tt.send(update(SET, testSource, base()))
					tt.expectNothing()
				}
				next := base()
				tc.mutate(next)
				tt.send(update(SET, testSource, next.DeepCopy()))
				if tc.want < 0 {
					tt.expectNothingAfterSync(base())
					return
				}
				tt.expect(update(tc.want, testSource, next))
			})
		}
	}
}

func TestResentSameObjectIsTheSamePod(t *testing.T) {
	// A change comes as a new object (as decoders and informers give):
	// the object sent before, sent again, is the pod stored, as in the
	// kubelet, whose storage compares it with itself. So a source that
	// breaks the contract by modifying a sent pod in place has its change
	// ignored, before and after the pod was first compared.
	for _, compared := range []bool{false, true} {
		t.Run(fmt.Sprintf("compared before: %v", compared), func(t *testing.T) {
			tt := newTester(t, Incremental)
			pod := validPod("foo", "new")
			tt.send(update(SET, testSource, pod))
			tt.expect(update(ADD, testSource, validPod("foo", "new")))
			if compared {
				tt.send(update(SET, testSource, validPod("foo", "new")))
				tt.expectNothing()
				tt.send(update(SET, testSource, pod))
				tt.expectNothing()
			}
			pod.Spec.Containers[0].Image = "changed"
			tt.send(update(SET, testSource, pod))
			tt.expectNothing()

			next := validPod("foo", "new")
			next.Spec.Containers[0].Image = "changed again"
			tt.send(update(SET, testSource, next))
			want := validPod("foo", "new")
			want.Spec.Containers[0].Image = "changed again"
			tt.expect(update(UPDATE, testSource, want))
		})
	}
}

func TestIncrementalOrderIsRemoveAddUpdateDeleteReconcile(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(SET, testSource, validPod("gone", "ns"), validPod("upd", "ns"), validPod("del", "ns"), validPod("rec", "ns")))
	<-tt.out

	upd := validPod("upd", "ns")
	upd.Spec.Containers[0].Image = "new"
	del := validPod("del", "ns")
	ts := metav1.NewTime(time.Unix(1, 0))
	del.DeletionTimestamp = &ts
	rec := validPod("rec", "ns")
	rec.Status.Phase = v1.PodRunning
	tt.send(update(SET, testSource, rec, del, upd, validPod("new", "ns")))
	tt.expect(
		update(REMOVE, testSource, validPod("gone", "ns")),
		update(ADD, testSource, validPod("new", "ns")),
		update(UPDATE, testSource, upd),
		update(DELETE, testSource, del),
		update(RECONCILE, testSource, rec))
}

func TestCopyPodsDeliversCopies(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewPodConfig(Incremental, Options{CopyPods: true})
	require.NoError(t, err)
	ch := c.Channel(ctx, "a")
	ch <- update(ADD, "a", validPod("foo", "new"))
	got := <-c.Updates()
	got.Pods[0].Spec.Containers[0].Image = "scribbled"
	require.NoError(t, c.Sync(ctx))
	all := <-c.Updates()
	assert.Equal(t, "image", all.Pods[0].Spec.Containers[0].Image)
	assert.NotSame(t, got.Pods[0], all.Pods[0])
}

func TestPodsAreSharedByDefaultAndNeverModifiedOnceDelivered(t *testing.T) {
	tt := newTester(t, Incremental)
	tt.send(update(ADD, testSource, validPod("foo", "new")))
	added := <-tt.out
	tt.sync()
	all := <-tt.out
	assert.Same(t, added.Pods[0], all.Pods[0])
	before := added.Pods[0].DeepCopy()

	changed := validPod("foo", "new")
	changed.Status.Phase = v1.PodRunning
	tt.send(update(UPDATE, testSource, changed))
	rec := <-tt.out
	require.Equal(t, RECONCILE, rec.Op)
	assert.Equal(t, v1.PodRunning, rec.Pods[0].Status.Phase)
	assert.Equal(t, before, added.Pods[0], "a delivered pod stays as it was")
}

func TestSeenAllSources(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewPodConfig(Incremental, Options{})
	require.NoError(t, err)
	a := c.Channel(ctx, "a")
	b := c.Channel(ctx, "b")
	assert.True(t, a == c.Channel(ctx, "a"), "repeated Channel returns the same channel")
	ready := NewSourcesReady(c.SeenAllSources)
	assert.False(t, ready.AllReady())

	a <- update(SET, "a")
	u := <-c.Updates()
	ready.AddSource(u.Source)
	assert.False(t, ready.AllReady(), "b has not sent a SET")

	b <- update(ADD, "b", validPod("x", "y"))
	u = <-c.Updates()
	ready.AddSource(u.Source)
	assert.False(t, ready.AllReady(), "an ADD does not mark b as seen")

	b <- update(SET, "b", validPod("x", "y"))
	ready.AddSource("b")
	// The SET changed nothing and b was not seen before: an empty ADD.
	u = <-c.Updates()
	assert.Equal(t, ADD, u.Op)
	assert.Empty(t, u.Pods)
	assert.True(t, ready.AllReady())
	assert.False(t, NewSourcesReady(nil).AllReady())
}

func TestPodConfigRace(t *testing.T) {
	c, err := NewPodConfig(Incremental, Options{})
	require.NoError(t, err)
	seen := sets.New(testSource)
	var wg sync.WaitGroup
	const iterations = 100
	wg.Add(2)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := 0; i < iterations; i++ {
			c.Channel(ctx, strconv.Itoa(i))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < iterations; i++ {
			c.SeenAllSources(seen)
		}
	}()
	wg.Wait()
}

func TestChannelIsServedUntilContextEnds(t *testing.T) {
	c, err := NewPodConfig(Incremental, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := c.Channel(ctx, "a")
	ch <- update(ADD, "a", validPod("x", "y"))
	<-c.Updates()
	cancel()
	// After ctx ends a new call serves a fresh channel.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	require.Eventually(t, func() bool { return c.Channel(ctx2, "a") != ch }, waitTimeout, time.Millisecond)
	c.Channel(ctx2, "a") <- update(ADD, "a", validPod("z", "y"))
	u := <-c.Updates()
	assert.Equal(t, "z", u.Pods[0].Name)
}

func TestMergeGivesUpWhenConsumerIsGoneAndContextEnds(t *testing.T) {
	c, err := NewPodConfig(Incremental, Options{UpdatesBuffer: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := c.Channel(ctx, "a")
	ch <- update(ADD, "a", validPod("x", "y"))
	ch <- update(ADD, "a", validPod("z", "y")) // blocks in delivery: buffer full
	cancel()
	// goleak in TestMain checks the listener ended.
	syncCtx, syncCancel := context.WithCancel(context.Background())
	syncCancel()
	assert.True(t, errors.Is(c.Sync(syncCtx), context.Canceled))
}

func TestPanickingRecorderDoesNotStopTheMux(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewPodConfig(Incremental, Options{Recorder: panicRecorder{}})
	require.NoError(t, err)
	ch := c.Channel(ctx, "a")
	ch <- update(ADD, "a", validPod("x", "y"), validPod("x", "y"))
	u := <-c.Updates()
	assert.Len(t, u.Pods, 1)
	ch <- update(ADD, "a", validPod("z", "y"))
	u = <-c.Updates()
	assert.Equal(t, "z", u.Pods[0].Name)
}

type panicRecorder struct{}

func (panicRecorder) Eventf(_ runtime.Object, _, _, _ string, _ ...interface{}) { panic("boom") }

func TestSenderMergesInTheCallersGoroutineAndRegistersItsSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := NewPodConfig(Incremental, Options{UpdatesBuffer: 1})
	require.NoError(t, err)
	send := c.Sender("s")
	ready := NewSourcesReady(c.SeenAllSources)
	assert.False(t, ready.AllReady(), "a Sender's source counts before its first SET")

	pod := validPod("x", "y")
	done := make(chan error, 1)
	go func() { done <- send(ctx, update(SET, "ignored", pod)) }()
	u := <-c.Updates()
	require.NoError(t, <-done)
	assert.Equal(t, ADD, u.Op)
	assert.Equal(t, "s", u.Source, "the update is the Sender's source's, whatever its Source field")
	require.Len(t, u.Pods, 1)
	assert.Equal(t, "x", u.Pods[0].Name)
	ready.AddSource(u.Source)
	assert.True(t, ready.AllReady())

	// Nobody reads Updates: once its buffer is full, send blocks until
	// ctx ends, and says so.
	require.NoError(t, send(ctx, update(ADD, "s", validPod("w", "y"))))
	sctx, scancel := context.WithCancel(ctx)
	go func() { done <- send(sctx, update(ADD, "s", validPod("z", "y"))) }()
	scancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

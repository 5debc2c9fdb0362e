package apiserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/podconfigtest"
	"github.com/nodekit/nodekit/podutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const node = "node-1"

// waitTimeout only guards against a hung test.
const waitTimeout = 10 * time.Second

func pod(name, rv, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: rv},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

func list(rv string, pods ...*v1.Pod) *v1.PodList {
	l := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	return l
}

type harness struct {
	t       *testing.T
	client  *podconfigtest.PodClient
	clock   *clocktesting.FakeClock
	updates chan podconfig.PodUpdate
	cancel  context.CancelFunc
	done    chan error
}

func start(t *testing.T, client *podconfigtest.PodClient) *harness {
	t.Helper()
	return startWith(t, client, nil)
}

// startWith is start with a Filter.
func startWith(t *testing.T, client *podconfigtest.PodClient, filter func(*v1.Pod) bool) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	src, err := New(Config{Client: client, NodeName: node, Clock: clk, Filter: filter})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, client: client, clock: clk, updates: make(chan podconfig.PodUpdate), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- src.Run(ctx, h.updates) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	select {
	case err := <-h.done:
		assert.NoError(h.t, err)
	case <-time.After(waitTimeout):
		h.t.Error("Run did not return after ctx ended")
	}
}

func (h *harness) next() podconfig.PodUpdate {
	h.t.Helper()
	select {
	case u := <-h.updates:
		require.Equal(h.t, podutil.ApiserverSource, u.Source)
		return u
	case <-time.After(waitTimeout):
		h.t.Fatal("no update")
	}
	return podconfig.PodUpdate{}
}

func (h *harness) call(verb string) podconfigtest.Call {
	h.t.Helper()
	select {
	case c := <-h.client.Notify():
		require.Equal(h.t, verb, c.Verb)
		return c
	case <-time.After(waitTimeout):
		h.t.Fatalf("no %s call", verb)
	}
	return podconfigtest.Call{}
}

// waitTimer waits until the source sleeps on the fake clock.
func (h *harness) waitTimer() {
	h.t.Helper()
	require.Eventually(h.t, h.clock.HasWaiters, waitTimeout, time.Millisecond)
}

// noCall fails the test if the source made a call: it is expected to
// wait on the clock.
func (h *harness) noCall(why string) {
	h.t.Helper()
	select {
	case c := <-h.client.Notify():
		h.t.Fatalf("%s: %v", why, c.Verb)
	default:
	}
}

// watching starts a source on a list at resourceVersion "10" with n fake
// watchers queued, and waits until its first watch is open.
func watching(t *testing.T, n int) (*harness, *podconfigtest.PodClient, []*watch.FakeWatcher) {
	t.Helper()
	client := podconfigtest.NewPodClient(10)
	client.SetList(list("10"))
	ws := make([]*watch.FakeWatcher, n)
	for i := range ws {
		ws[i] = watch.NewFake()
		client.AddWatcher(ws[i])
	}
	h := start(t, client)
	h.call("list")
	h.next()
	h.call("watch")
	return h, client, ws
}

func names(u podconfig.PodUpdate) []string {
	var n []string
	for _, p := range u.Pods {
		n = append(n, p.Name)
	}
	return n
}

func TestNewRejectsBadConfig(t *testing.T) {
	client := podconfigtest.NewPodClient(0)
	for name, c := range map[string]Config{
		"no client":        {NodeName: node},
		"no node":          {Client: client},
		"negative backoff": {Client: client, NodeName: node, BackoffInitial: -1},
	} {
		_, err := New(c)
		assert.ErrorIs(t, err, podconfig.ErrInvalidConfig, name)
	}
}

func TestInitialListIsSentAsSetThenWatchedFromItsVersion(t *testing.T) {
	client := podconfigtest.NewPodClient(10)
	client.SetList(list("10", pod("a", "5", "i"), pod("b", "6", "i")))
	w := watch.NewFake()
	client.AddWatcher(w)
	h := start(t, client)

	l := h.call("list")
	assert.Equal(t, "spec.nodeName="+node, l.Options.FieldSelector)
	u := h.next()
	assert.Equal(t, podconfig.SET, u.Op)
	assert.ElementsMatch(t, []string{"a", "b"}, names(u))

	c := h.call("watch")
	assert.Equal(t, "10", c.Options.ResourceVersion)
	assert.Equal(t, "spec.nodeName="+node, c.Options.FieldSelector)
	assert.True(t, c.Options.AllowWatchBookmarks)
	require.NotNil(t, c.Options.TimeoutSeconds)
	assert.Equal(t, int64(300), *c.Options.TimeoutSeconds)
}

func TestInitialEmptyListSendsEmptySet(t *testing.T) {
	client := podconfigtest.NewPodClient(10)
	client.AddWatcher(watch.NewFake())
	h := start(t, client)
	h.call("list")
	u := h.next()
	assert.Equal(t, podconfig.SET, u.Op)
	assert.Empty(t, u.Pods)
	h.call("watch")
}

func TestWatchEventsBecomeIncrementalUpdates(t *testing.T) {
	client := podconfigtest.NewPodClient(10)
	client.SetList(list("10", pod("a", "5", "one")))
	w := watch.NewFake()
	client.AddWatcher(w)
	h := start(t, client)
	h.call("list")
	h.next()
	h.call("watch")

	for _, tc := range []struct {
		name string
		send func()
		op   podconfig.PodOperation
		pod  string
	}{
		{"added pod is an ADD", func() { w.Add(pod("b", "11", "blah")) }, podconfig.ADD, "b"},
		{"modified pod is an UPDATE", func() { w.Modify(pod("a", "12", "two")) }, podconfig.UPDATE, "a"},
		{"deleted pod is a REMOVE", func() { w.Delete(pod("a", "13", "two")) }, podconfig.REMOVE, "a"},
	} {
		go tc.send()
		u := h.next()
		assert.Equal(t, tc.op, u.Op, tc.name)
		assert.Equal(t, []string{tc.pod}, names(u), tc.name)
	}
}

func TestPodsOfOtherNodesAreIgnored(t *testing.T) {
	client := podconfigtest.NewPodClient(10)
	other := pod("x", "3", "i")
	other.Spec.NodeName = "node-2"
	client.SetList(list("10", pod("a", "5", "i"), other))
	w := watch.NewFake()
	client.AddWatcher(w)
	h := start(t, client)
	h.call("list")
	assert.Equal(t, []string{"a"}, names(h.next()))
	h.call("watch")
	go func() {
		w.Add(other)
		w.Add(pod("b", "11", "i"))
	}()
	assert.Equal(t, []string{"b"}, names(h.next()), "the other node's pod was skipped")
}

// TestFilterKeepsPodsOut: pods the Filter refuses are left out of the
// list and their ADDED and MODIFIED events dropped, as virtual-kubelet's
// PodEventFilterFunc; a DELETED event passes whatever the filter says.
func TestFilterKeepsPodsOut(t *testing.T) {
	mine := func(name, rv, scheduler string) *v1.Pod {
		p := pod(name, rv, "i")
		p.Spec.SchedulerName = scheduler
		return p
	}
	client := podconfigtest.NewPodClient(10)
	client.SetList(list("10", mine("a", "5", "vk"), mine("x", "6", "default-scheduler")))
	w := watch.NewFake()
	client.AddWatcher(w)
	h := startWith(t, client, func(p *v1.Pod) bool { return p.Spec.SchedulerName == "vk" })
	h.call("list")
	assert.Equal(t, []string{"a"}, names(h.next()), "the list without the refused pod")
	h.call("watch")
	for _, tc := range []struct {
		name    string
		send    func()
		op      podconfig.PodOperation
		wantPod string
	}{
		{"a refused pod's ADDED is dropped, a passing one's sent", func() { w.Add(mine("y", "11", "other")); w.Add(mine("b", "12", "vk")) }, podconfig.ADD, "b"},
		{"a refused MODIFIED is dropped (the agent keeps its version)", func() { w.Modify(mine("a", "13", "other")); w.Modify(mine("b", "14", "vk")) }, podconfig.UPDATE, "b"},
		{"a DELETED passes whatever the filter says", func() { w.Delete(mine("a", "15", "other")) }, podconfig.REMOVE, "a"},
	} {
		go tc.send()
		u := h.next()
		assert.Equal(t, tc.op, u.Op, tc.name)
		assert.Equal(t, []string{tc.wantPod}, names(u), tc.name)
	}
}

func TestClosedWatchResumesFromLastResourceVersion(t *testing.T) {
	h, client, ws := watching(t, 2)
	w1, w2 := ws[0], ws[1]

	go w1.Add(pod("a", "11", "i"))
	h.next()
	// A bookmark moves the resourceVersion without an update.
	w1.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "15"}})
	w1.Stop()

	c := h.call("watch")
	assert.Equal(t, "15", c.Options.ResourceVersion, "resumed after the bookmark, no relist")
	go w2.Modify(pod("a", "16", "j"))
	u := h.next()
	assert.Equal(t, podconfig.UPDATE, u.Op)
	for _, call := range client.Calls() {
		if call.Verb == "list" && call != client.Calls()[0] {
			t.Fatal("relisted on a plain close")
		}
	}
}

func expired410(kind string) error {
	if kind == "gone" {
		return apierrors.NewGone("too old resource version")
	}
	return apierrors.NewResourceExpired("too old resource version")
}

func TestExpiredVersionRelistsAndMuxSendsTheDifference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expire func(w *watch.FakeWatcher, client *podconfigtest.PodClient)
	}{
		{"watch call fails with 410 Expired", func(w *watch.FakeWatcher, c *podconfigtest.PodClient) {
			c.FailWatch(expired410("expired"))
			c.AddWatcher(watch.NewFake())
			// A healthy watch ends (one bookmark, then closed): resuming
			// from the bookmark's version gets the 410.
			w.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "12"}})
			w.Stop()
		}},
		{"ERROR event Expired", func(w *watch.FakeWatcher, c *podconfigtest.PodClient) {
			c.AddWatcher(watch.NewFake())
			w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
		}},
		{"ERROR event Gone", func(w *watch.FakeWatcher, c *podconfigtest.PodClient) {
			c.AddWatcher(watch.NewFake())
			w.Error(&apierrors.NewGone("gone").ErrStatus)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
			require.NoError(t, err)
			client := podconfigtest.NewPodClient(0)
			client.SetList(list("10", pod("a", "5", "i"), pod("b", "6", "i"), pod("c", "7", "i")))
			w1 := watch.NewFake()
			client.AddWatcher(w1)
			src, err := New(Config{Client: client, NodeName: node, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
			require.NoError(t, err)
			done := make(chan struct{})
			go func() { _ = src.Run(ctx, cfg.Channel(ctx, podutil.ApiserverSource)); close(done) }()
			defer func() { cancel(); <-done }()

			u := <-cfg.Updates()
			require.Equal(t, podconfig.ADD, u.Op)
			require.Len(t, u.Pods, 3)

			// While the watch is broken: b deleted, c changed, d added.
			client.SetList(list("20", pod("a", "5", "i"), pod("c", "18", "new"), pod("d", "19", "i")))
			tc.expire(w1, client)

			want := []struct {
				op  podconfig.PodOperation
				pod string
			}{{podconfig.REMOVE, "b"}, {podconfig.ADD, "d"}, {podconfig.UPDATE, "c"}}
			for _, w := range want {
				select {
				case u = <-cfg.Updates():
				case <-time.After(waitTimeout):
					t.Fatalf("no %v", w.op)
				}
				assert.Equal(t, w.op, u.Op)
				assert.Equal(t, []string{w.pod}, names(u))
			}
			lists := 0
			for _, c := range client.Calls() {
				if c.Verb == "list" {
					lists++
					assert.Empty(t, c.Options.ResourceVersion, "relist reads the latest state")
				}
			}
			assert.Equal(t, 2, lists)
		})
	}
}

func TestFailedCallsBackOffOnTheClock(t *testing.T) {
	client := podconfigtest.NewPodClient(10)
	client.FailList(errors.New("connection refused"))
	client.FailList(errors.New("connection refused"))
	client.SetList(list("10", pod("a", "5", "i")))
	client.AddWatcher(watch.NewFake())
	h := start(t, client)

	h.call("list") // fails; back off 1s
	h.waitTimer()
	h.clock.Step(999 * time.Millisecond)
	h.noCall("retried before the back-off passed")
	h.clock.Step(time.Millisecond)
	h.call("list") // fails again; back off 2s
	h.waitTimer()
	h.clock.Step(time.Second)
	h.noCall("back-off did not double")
	h.clock.Step(time.Second)
	h.call("list")
	assert.Equal(t, []string{"a"}, names(h.next()))
	h.call("watch")
}

func TestWatchErrorsBackOffAndResume(t *testing.T) {
	client := podconfigtest.NewPodClient(10)
	client.SetList(list("10"))
	client.FailWatch(apierrors.NewServiceUnavailable("etcd down"))
	w := watch.NewFake()
	client.AddWatcher(w)
	h := start(t, client)
	h.call("list")
	h.next()
	c := h.call("watch")
	assert.Equal(t, "10", c.Options.ResourceVersion)
	h.waitTimer()
	h.clock.Step(time.Second)
	c = h.call("watch")
	assert.Equal(t, "10", c.Options.ResourceVersion, "resumed, not relisted")
	go w.Add(pod("a", "11", "i"))
	assert.Equal(t, podconfig.ADD, h.next().Op)
}

func TestNonExpiredErrorEventReconnectsFromLastVersion(t *testing.T) {
	h, _, ws := watching(t, 2)
	w1 := ws[0]
	go func() {
		w1.Add(pod("a", "11", "i"))
		w1.Error(&apierrors.NewInternalError(errors.New("boom")).ErrStatus)
	}()
	h.next()
	h.waitTimer()
	h.clock.Step(time.Second)
	c := h.call("watch")
	assert.Equal(t, "11", c.Options.ResourceVersion)
}

func TestRunReturnsWhenContextEndsWhileBlocked(t *testing.T) {
	client := podconfigtest.NewPodClient(0)
	client.SetList(list("1", pod("a", "1", "i")))
	client.AddWatcher(watch.NewFake())
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	src, err := New(Config{Client: client, NodeName: node, Clock: clk})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- src.Run(ctx, make(chan podconfig.PodUpdate)) }() // nobody reads
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return")
	}
}

func TestWatchClosedWithoutEventsBacksOff(t *testing.T) {
	h, _, ws := watching(t, 2)
	w1 := ws[0]
	w1.Stop() // closed at once, nothing delivered
	h.waitTimer()
	h.noCall("resumed without backing off")
	h.clock.Step(time.Second)
	c := h.call("watch")
	assert.Equal(t, "10", c.Options.ResourceVersion)
}

func TestWatchClosedEmptyAfterOneThatDeliveredResumesAtOnce(t *testing.T) {
	h, _, ws := watching(t, 4)
	w1, w2, w3 := ws[0], ws[1], ws[2]
	go w1.Add(pod("a", "11", "i"))
	h.next()
	w1.Stop() // the apiserver closed a watcher that fell behind

	c := h.call("watch")
	assert.Equal(t, "11", c.Options.ResourceVersion)
	w2.Stop() // closed again before it sent anything: no back-off yet
	c = h.call("watch")
	assert.Equal(t, "11", c.Options.ResourceVersion)

	w3.Stop() // empty twice in a row: back off
	h.waitTimer()
	h.noCall("resumed a second empty watch without backing off")
	h.clock.Step(time.Second)
	c = h.call("watch")
	assert.Equal(t, "11", c.Options.ResourceVersion)
}

// A bookmark that repeats the resourceVersion the watch started from is
// no progress: a server that sends only that and closes, again and again,
// is backed off from, not resumed at once in a loop.
func TestWatchWithOnlyARepeatedBookmarkBacksOff(t *testing.T) {
	h, _, ws := watching(t, 2)
	w1 := ws[0]
	bookmark := &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10"}}
	w1.Action(watch.Bookmark, bookmark)
	w1.Stop()
	h.waitTimer()
	h.noCall("resumed after a watch that made no progress without backing off")
	h.clock.Step(time.Second)
	c := h.call("watch")
	assert.Equal(t, "10", c.Options.ResourceVersion)
}

func TestTwoNamespacesSameNameAreBothKept(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
	require.NoError(t, err)
	p1, p2 := pod("p", "1", "one"), pod("p", "2", "blah")
	p1.Namespace, p1.UID = "one", "uid-1"
	p2.Namespace, p2.UID = "two", "uid-2"
	client := podconfigtest.NewPodClient(0)
	client.SetList(list("10", p1, p2))
	w := watch.NewFake()
	client.AddWatcher(w)
	src, err := New(Config{Client: client, NodeName: node})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { _ = src.Run(ctx, cfg.Channel(ctx, podutil.ApiserverSource)); close(done) }()
	defer func() { cancel(); <-done }()

	u := <-cfg.Updates()
	assert.Equal(t, podconfig.ADD, u.Op)
	assert.Len(t, u.Pods, 2, "same name in two namespaces: both pods")
	go w.Delete(p1)
	u = <-cfg.Updates()
	assert.Equal(t, podconfig.REMOVE, u.Op)
	require.Len(t, u.Pods, 1)
	assert.Equal(t, "one", u.Pods[0].Namespace)
}

package main

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodekit/nodekit/podconfig"
)

func boundPod(name, node string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.PodSpec{NodeName: node}}
}

func receive(t *testing.T, ch <-chan podconfig.PodUpdate) podconfig.PodUpdate {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
		return podconfig.PodUpdate{}
	}
}

// chanSend hands updates over ch, as an agent's Channel would.
func chanSend(ch chan<- podconfig.PodUpdate) sendFunc {
	return func(ctx context.Context, u podconfig.PodUpdate) error {
		select {
		case ch <- u:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Each node gets a SET of its cached pods, then its events in order; a
// node that takes nothing holds up no other; a feeder's goroutine runs
// only while it has updates to hand over, and all end with the context.
func TestDispatcherFeedsEachNodeOnItsOwnAndIdlesWithoutGoroutines(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byNode: nodeIndex})
	if err := idx.Add(boundPod("a1", "a")); err != nil {
		t.Fatal(err)
	}
	a, stuck := make(chan podconfig.PodUpdate), make(chan podconfig.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	d := newDispatcher(ctx, idx, map[string]sendFunc{"a": chanSend(a), "stuck": chanSend(stuck)})
	done := make(chan struct{})
	go func() { defer close(done); d.run() }()
	h := d.handler()
	h.OnAdd(boundPod("early", "a"), false) // before start: in the SET if cached, else dropped
	d.start("stuck")
	d.start("a")
	h.OnAdd(boundPod("s1", "stuck"), false)
	h.OnAdd(boundPod("a2", "a"), false)

	if u := receive(t, a); u.Op != podconfig.SET || len(u.Pods) != 1 || u.Pods[0].Name != "a1" {
		t.Fatalf("first update %v %d pods, want a SET of a1", u.Op, len(u.Pods))
	}
	if u := receive(t, a); u.Op != podconfig.ADD || u.Pods[0].Name != "a2" {
		t.Fatalf("second update %v %s, want ADD a2", u.Op, u.Pods[0].Name)
	}
	fa := d.feeders["a"]
	deadline := time.Now().Add(10 * time.Second)
	for {
		fa.mu.Lock()
		running := fa.running
		fa.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node a's feeder goroutine still runs with nothing to hand over")
		}
		time.Sleep(time.Millisecond)
	}
	h.OnUpdate(nil, boundPod("a2", "a"))
	if u := receive(t, a); u.Op != podconfig.UPDATE {
		t.Fatalf("update %v, want UPDATE", u.Op)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the context ended (the stuck node's feeder?)")
	}
}

// An agent's pod has annotations of its own (its pod config writes the
// source there) and shares the rest with the informer's object.
func TestForAgentOwnsItsAnnotations(t *testing.T) {
	in := boundPod("p", "a")
	in.Annotations = map[string]string{"k": "v"}
	in.Spec.Containers = []v1.Container{{Name: "c"}}
	out := forAgent(in)
	out.Annotations["kubernetes.io/config.source"] = "api"
	out.Name = "changed"
	if len(in.Annotations) != 1 || in.Name != "p" {
		t.Fatalf("the informer's pod changed: %v %s", in.Annotations, in.Name)
	}
	if out.Annotations["k"] != "v" || &out.Spec.Containers[0] != &in.Spec.Containers[0] {
		t.Fatal("the agent's pod lost an annotation or does not share the spec")
	}
}

// The Node informer stores the node controller's own Node when the watch
// brings its version, and drops an answer a later version overtook.
func TestCachedNodesShareTheControllersNode(t *testing.T) {
	c := &cachedNodes{sent: map[string]*v1.Node{}}
	mk := func(rv string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	}
	held := mk("10")
	c.sent["n"] = held
	if got, _ := c.share(mk("9")); got == held || got.(*v1.Node).ManagedFields != nil {
		t.Fatal("an older version was replaced by the held one, or kept its managedFields")
	}
	if got, _ := c.share(mk("10")); got != held {
		t.Fatal("the version the controller holds was not shared")
	}
	if _, ok := c.sent["n"]; ok {
		t.Fatal("the shared answer is still kept aside")
	}
	c.sent["n"] = held
	if got, _ := c.share(mk("11")); got == held || c.sent["n"] != nil {
		t.Fatal("an answer overtaken by a later version is still kept")
	}
}

package simclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/sim"
	"github.com/nodekit/nodekit/simclient"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// newServer is a cluster with nodes and its Server, closed at the end.
func newServer(t testing.TB, seed uint64, nodes ...string) (*sim.Cluster, *simclient.Server, *kubernetes.Clientset) {
	t.Helper()
	cl, err := sim.New(sim.Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	srv, err := simclient.New(cl, simclient.Config{Seed: seed, Resources: []simclient.Resource{
		{GroupVersionResource: widgets, Kind: "Widget", Namespaced: true, Status: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	for _, n := range nodes {
		if _, err := cl.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := srv.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cl, srv, cs
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
}

// A pod created through the clientset is the sim's: its agent runs it, and
// what the agent writes is what the clientset reads.
func TestPodsAreTheClusterPods(t *testing.T) {
	ctx := context.Background()
	cl, _, cs := newServer(t, 1, "n1")
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "n1" {
		t.Fatalf("pod %s on %q", p.Status.Phase, p.Spec.NodeName)
	}
	sp, _ := cl.Pod("default", "a")
	if sp.ResourceVersion != p.ResourceVersion || sp.UID != p.UID {
		t.Fatalf("clientset rv %s uid %s, store rv %s uid %s", p.ResourceVersion, p.UID, sp.ResourceVersion, sp.UID)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || len(n.Status.Conditions) == 0 {
		t.Fatalf("node: %v %v", n, err)
	}
	if _, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// Graceful deletion: the agent stops the pod, then it is gone.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err = cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("not terminating: %v", err)
	}
	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after deletion: %v", err)
	}
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=a,reason=Started"})
	if err != nil || len(evs.Items) != 1 {
		t.Fatalf("Started events: %v %v", evs, err)
	}
}

// client-go's default informers (a watch-list since 0.35) sync, and see
// the agents' writes: Nodes and pods.
func TestInformersSyncWithWatchList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, _, cs := newServer(t, 1, "n1", "n2")
	if _, err := cs.CoreV1().Pods("default").Create(ctx, testPod("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	pods, nodes := f.Core().V1().Pods(), f.Core().V1().Nodes()
	pods.Informer()
	nodes.Informer()
	f.Start(ctx.Done())
	defer func() {
		cancel()
		f.Shutdown()
	}()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v not synced", typ)
		}
	}
	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Lister().Pods("default").Get("a")
	if err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("informer's pod: %v %v", p, err)
	}
	cl.Node("n2").Stop()
	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	n, err := nodes.Lister().Get("n2")
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) == 0 || n.Spec.Taints[0].Key != corev1.TaintNodeUnreachable {
		t.Fatalf("informer's n2 taints: %v", n.Spec.Taints)
	}
}

// A watch-list sends the selected objects, then the bookmark that ends
// them, then changes.
func TestWatchListEndsInitialEventsWithABookmark(t *testing.T) {
	ctx := context.Background()
	_, _, cs := newServer(t, 1)
	for _, name := range []string{"b", "a"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true),
		AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for ev := range w.ResultChan() {
		cm := ev.Object.(*corev1.ConfigMap)
		got = append(got, fmt.Sprintf("%s %s %s", ev.Type, cm.Name, cm.Annotations[metav1.InitialEventsAnnotationKey]))
		if ev.Type == watch.Bookmark {
			break
		}
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "a", metav1.DeleteOptions{}), error(nil); err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	got = append(got, fmt.Sprintf("%s %s", ev.Type, ev.Object.(*corev1.ConfigMap).Name))
	want := []string{"ADDED a ", "ADDED b ", "BOOKMARK  true", "DELETED a"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestSemantics(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, cs *kubernetes.Clientset) error
	}{
		{"a stale resourceVersion is a conflict", func(t *testing.T, cs *kubernetes.Clientset) error {
			cm, _ := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
			cm2 := cm.DeepCopy()
			cm2.Data = map[string]string{"a": "1"}
			if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm2, metav1.UpdateOptions{}); err != nil {
				return err
			}
			cm.Data = map[string]string{"a": "2"}
			if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				return fmt.Errorf("update with a stale rv: %v", err)
			}
			return nil
		}},
		{"an update that changes nothing keeps the resourceVersion", func(t *testing.T, cs *kubernetes.Clientset) error {
			cm, _ := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
			got, err := cs.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
			if err != nil || got.ResourceVersion != cm.ResourceVersion {
				return fmt.Errorf("no-op update: rv %s -> %s, %v", cm.ResourceVersion, got.ResourceVersion, err)
			}
			return nil
		}},
		{"the main resource keeps the status and raises generation on spec changes", func(t *testing.T, cs *kubernetes.Clientset) error {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
			d, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			d.Status.Replicas = 1
			if d, err = cs.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
				return err
			}
			d.Spec.Replicas = ptr.To[int32](2)
			d.Status.Replicas = 7
			if d, err = cs.AppsV1().Deployments("default").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				return err
			}
			if d.Status.Replicas != 1 || d.Generation != 2 {
				return fmt.Errorf("status.replicas %d generation %d, want 1 and 2", d.Status.Replicas, d.Generation)
			}
			sc, err := cs.AppsV1().Deployments("default").GetScale(ctx, "d", metav1.GetOptions{})
			if err != nil || sc.Spec.Replicas != 2 {
				return fmt.Errorf("scale %v %v", sc, err)
			}
			return nil
		}},
		{"label and field selectors select", func(t *testing.T, cs *kubernetes.Clientset) error {
			for i, l := range []string{"x", "y", "x"} {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", i), Labels: map[string]string{"l": l}}, Type: corev1.SecretTypeOpaque}
				if i == 2 {
					s.Type = corev1.SecretTypeDockerConfigJson
					s.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}")}
				}
				if _, err := cs.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			l, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "l=x", FieldSelector: "type=Opaque"})
			if err != nil || len(l.Items) != 1 || l.Items[0].Name != "s0" {
				return fmt.Errorf("selected %v %v", l, err)
			}
			if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.foo=1"}); !apierrors.IsBadRequest(err) {
				return fmt.Errorf("unknown field: %v", err)
			}
			return nil
		}},
		{"merge, strategic merge and JSON patches patch", func(t *testing.T, cs *kubernetes.Clientset) error {
			cms := cs.CoreV1().ConfigMaps("default")
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for _, p := range []struct {
				pt   types.PatchType
				data string
			}{{types.MergePatchType, `{"data":{"b":"2"}}`}, {types.StrategicMergePatchType, `{"data":{"c":"3"}}`}, {types.JSONPatchType, `[{"op":"remove","path":"/data/a"}]`}} {
				if _, err := cms.Patch(ctx, "c", p.pt, []byte(p.data), metav1.PatchOptions{}); err != nil {
					return fmt.Errorf("%s: %w", p.pt, err)
				}
			}
			cm, _ := cms.Get(ctx, "c", metav1.GetOptions{})
			if fmt.Sprint(cm.Data) != "map[b:2 c:3]" {
				return fmt.Errorf("data %v", cm.Data)
			}
			return nil
		}},
		{"a finalizer keeps a deleted object until it is removed", func(t *testing.T, cs *kubernetes.Clientset) error {
			cms := cs.CoreV1().ConfigMaps("default")
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Finalizers: []string{"example.com/f"}}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			if err := cms.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
				return err
			}
			cm, err := cms.Get(ctx, "c", metav1.GetOptions{})
			if err != nil || cm.DeletionTimestamp == nil {
				return fmt.Errorf("after delete: %v %v", cm, err)
			}
			cm.Finalizers = nil
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return err
			}
			if _, err := cms.Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("after the finalizer: %v", err)
			}
			return nil
		}},
		{"a resourceVersion older than the history is 410 Gone", func(t *testing.T, cs *kubernetes.Clientset) error {
			cms := cs.CoreV1().ConfigMaps("default")
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			for i := range 2 * 4096 {
				if _, err := cms.Patch(ctx, "c", types.MergePatchType, fmt.Appendf(nil, `{"data":{"i":"%d"}}`, i), metav1.PatchOptions{}); err != nil {
					return err
				}
			}
			if _, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "2"}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				return fmt.Errorf("watch from an old rv: %v", err)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, cs := newServer(t, 1)
			if err := tt.run(t, cs); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// generateName and UIDs depend on the seed and the names alone: two
// writers interleaved differently get the same names.
func TestGenerateNameIsKeyedBySeedAndPrefix(t *testing.T) {
	ctx := context.Background()
	names := func(order []string) []string {
		_, _, cs := newServer(t, 3)
		var out []string
		for _, prefix := range order {
			j, err := cs.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, j.Name+" "+string(j.UID))
			p := testPod("")
			p.GenerateName = prefix
			if p, err = cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			out = append(out, p.Name+" "+string(p.UID))
		}
		sort.Strings(out)
		return out
	}
	a, b := names([]string{"x-", "y-", "x-"}), names([]string{"y-", "x-", "x-"})
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("%v\n%v", a, b)
	}
}

// The garbage collector deletes dependents in the background, and holds a
// foreground deletion until they are gone.
func TestGarbageCollection(t *testing.T) {
	ctx := context.Background()
	cl, _, cs := newServer(t, 1, "n1")
	own := func(o metav1.Object, kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: o.GetName(), UID: o.GetUID()}}
	}
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dep", OwnerReferences: own(owner, "ConfigMap")}}, metav1.CreateOptions{})
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "grand", OwnerReferences: own(sec, "Secret")}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := testPod("pod")
		p.OwnerReferences = own(owner, "ConfigMap")
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cl.RunFor(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
		if err := cl.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		_, ownerErr := cs.CoreV1().ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})
		if policy == metav1.DeletePropagationForeground && ownerErr != nil {
			t.Fatalf("foreground: owner gone while its pod terminates: %v", ownerErr)
		}
		if err := cl.RunFor(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"owner": errOf(cs.CoreV1().ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})),
			"dep":   errOf(cs.CoreV1().Secrets("default").Get(ctx, "dep", metav1.GetOptions{})),
			"grand": errOf(cs.CoreV1().ServiceAccounts("default").Get(ctx, "grand", metav1.GetOptions{})),
			"pod":   errOf(cs.CoreV1().Pods("default").Get(ctx, "pod", metav1.GetOptions{})),
		} {
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s: %s left: %v", policy, what, err)
			}
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// The dynamic client serves custom resources as unstructured objects,
// with their status subresource.
func TestDynamicClientCustomResource(t *testing.T) {
	ctx := context.Background()
	_, srv, _ := newServer(t, 1)
	dyn, err := srv.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"}, "spec": map[string]any{"size": int64(3)},
	}}
	got, err := dyn.Resource(widgets).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetUID() == "" || got.GetGeneration() != 1 {
		t.Fatalf("created %v", got)
	}
	_ = unstructured.SetNestedField(got.Object, "ok", "status", "state")
	if _, err := dyn.Resource(widgets).Namespace("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"size": 4}})
	got, err = dyn.Resource(widgets).Namespace("default").Patch(ctx, "w1", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ := unstructured.NestedString(got.Object, "status", "state")
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	if st != "ok" || size != 4 || got.GetGeneration() != 2 {
		t.Fatalf("status %q size %d generation %d", st, size, got.GetGeneration())
	}
	l, err := dyn.Resource(widgets).Namespace("").List(ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("list: %v %v", l, err)
	}
	// A dynamic informer on it syncs (watch-list).
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return dyn.Resource(widgets).Namespace("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return dyn.Resource(widgets).Namespace("").Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ictx) }()
	if !cache.WaitForCacheSync(ictx.Done(), inf.HasSynced) || len(inf.GetStore().List()) != 1 {
		t.Fatalf("dynamic informer: %d objects", len(inf.GetStore().List()))
	}
	cancel()
	<-done
}

// Deleting a namespace does what the namespace controller does: the
// namespace is Terminating (its kubernetes finalizer kept) and takes no
// new content; its objects are deleted, its pods gracefully by their
// agent; once it is empty it is gone. Another namespace's objects stay.
func TestNamespaceDeletionDeletesItsObjects(t *testing.T) {
	ctx := context.Background()
	cl, _, cs := newServer(t, 1, "n1")
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) || ns.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("new namespace: finalizers %v, phase %q", ns.Spec.Finalizers, ns.Status.Phase)
	}
	for _, n := range []string{"team", "default"} {
		if _, err := cs.CoreV1().ConfigMaps(n).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := testPod("web")
		p.Namespace = n
		if _, err := cs.CoreV1().Pods(n).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.AppsV1().Deployments("team").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}}, Spec: testPod("x").Spec}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.RunFor(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	if err := cs.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	ns, err = cs.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the namespace is gone while its pod terminates: %v", err)
	}
	if ns.DeletionTimestamp == nil || ns.Status.Phase != corev1.NamespaceTerminating || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Fatalf("deleted namespace: deletionTimestamp %v, phase %q, finalizers %v", ns.DeletionTimestamp, ns.Status.Phase, ns.Spec.Finalizers)
	}
	if _, err := cs.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a configmap created in the terminating namespace: %v, want Forbidden", err)
	}
	late := testPod("late")
	late.Namespace = "team"
	if _, err := cs.CoreV1().Pods("team").Create(ctx, late, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a pod created in the terminating namespace: %v, want Forbidden", err)
	}
	if err := errOf(cs.CoreV1().ConfigMaps("team").Get(ctx, "cfg", metav1.GetOptions{})); !apierrors.IsNotFound(err) {
		t.Errorf("the namespace's configmap: %v, want NotFound", err)
	}
	if p, err := cs.CoreV1().Pods("team").Get(ctx, "web", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Errorf("the namespace's pod, right after: %v (err %v), want it terminating", p.GetDeletionTimestamp(), err)
	}

	if err := cl.RunFor(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"namespace":  errOf(cs.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})),
		"pod":        errOf(cs.CoreV1().Pods("team").Get(ctx, "web", metav1.GetOptions{})),
		"deployment": errOf(cs.AppsV1().Deployments("team").Get(ctx, "app", metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s left: %v", what, err)
		}
	}
	for what, err := range map[string]error{
		"configmap": errOf(cs.CoreV1().ConfigMaps("default").Get(ctx, "cfg", metav1.GetOptions{})),
		"pod":       errOf(cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})),
	} {
		if err != nil {
			t.Errorf("default's %s: %v", what, err)
		}
	}
}

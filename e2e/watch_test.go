package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/apiserver"
	"github.com/nodekit/nodekit/podutil"
)

// podView is what a consumer of PodConfig's Incremental updates knows about
// the node's pods, with a count of updates that contradict it (an ADD of a
// pod it has, a change of one it has not).
type podView struct {
	mu        sync.Mutex
	pods      map[types.UID]*corev1.Pod
	anomalies []string
}

func (v *podView) apply(u podconfig.PodUpdate) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range u.Pods {
		_, have := v.pods[p.UID]
		switch u.Op {
		case podconfig.ADD:
			if have {
				v.anomalies = append(v.anomalies, fmt.Sprintf("ADD of %s (%s) already known", p.Name, p.UID))
			}
			v.pods[p.UID] = p
		case podconfig.UPDATE, podconfig.DELETE, podconfig.RECONCILE:
			if !have {
				v.anomalies = append(v.anomalies, fmt.Sprintf("%v of unknown %s (%s)", u.Op, p.Name, p.UID))
			}
			v.pods[p.UID] = p
		case podconfig.REMOVE:
			if !have {
				v.anomalies = append(v.anomalies, fmt.Sprintf("REMOVE of unknown %s (%s)", p.Name, p.UID))
			}
			delete(v.pods, p.UID)
		default:
			v.anomalies = append(v.anomalies, fmt.Sprintf("unexpected %v in Incremental mode", u.Op))
		}
	}
}

// diff says how the view differs from the apiserver's pods; "" if not at all.
func (v *podView) diff(api []corev1.Pod) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var d []string
	names := map[string]types.UID{}
	for uid, p := range v.pods {
		if other, dup := names[p.Namespace+"/"+p.Name]; dup {
			d = append(d, fmt.Sprintf("%s twice (%s, %s)", p.Name, uid, other))
		}
		names[p.Namespace+"/"+p.Name] = uid
	}
	seen := map[types.UID]bool{}
	for i := range api {
		a := &api[i]
		seen[a.UID] = true
		p, ok := v.pods[a.UID]
		switch {
		case !ok:
			d = append(d, "missing "+a.Name)
		case p.Name != a.Name || p.Spec.NodeName != a.Spec.NodeName:
			d = append(d, fmt.Sprintf("%s is %s on %q", a.Name, p.Name, p.Spec.NodeName))
		case fmt.Sprint(p.Labels) != fmt.Sprint(a.Labels):
			d = append(d, fmt.Sprintf("%s labels %v, apiserver %v", a.Name, p.Labels, a.Labels))
		case (p.DeletionTimestamp == nil) != (a.DeletionTimestamp == nil):
			d = append(d, fmt.Sprintf("%s deletionTimestamp %v, apiserver %v", a.Name, p.DeletionTimestamp, a.DeletionTimestamp))
		case p.Status.Phase != a.Status.Phase:
			d = append(d, fmt.Sprintf("%s phase %q, apiserver %q", a.Name, p.Status.Phase, a.Status.Phase))
		}
	}
	for uid, p := range v.pods {
		if !seen[uid] {
			d = append(d, fmt.Sprintf("extra %s (%s)", p.Name, uid))
		}
	}
	sort.Strings(d)
	if len(d) > 5 {
		d = append(d[:5], fmt.Sprintf("and %d more", len(d)-5))
	}
	return strings.Join(d, "; ")
}

func (v *podView) problems() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.anomalies...)
}

// startSource runs the apiserver pod source for node through a PodConfig
// mux until t ends, and returns the consumer's view.
func startSource(t *testing.T, cs *kubernetes.Clientset, node string) *podView {
	t.Helper()
	src, err := apiserver.New(apiserver.Config{
		Client: cs.CoreV1().Pods(""), NodeName: node,
		BackoffInitial: 100 * time.Millisecond, BackoffMax: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	view := &podView{pods: map[types.UID]*corev1.Pod{}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := src.Run(ctx, cfg.Channel(ctx, podutil.ApiserverSource)); err != nil {
			t.Errorf("source: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-cfg.Updates():
				view.apply(u)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return view
}

// waitView waits until view equals the apiserver's pods on node.
func waitView(t *testing.T, view *podView, cs *kubernetes.Clientset, node string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return false, err
		}
		last = view.diff(list.Items)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("the source's view never matched the apiserver: %v; last difference: %s", err, last)
	}
	if p := view.problems(); len(p) > 0 {
		t.Fatalf("the source sent %d contradicting updates, first: %v", len(p), p[0])
	}
}

// churn changes pods on node n1 (and, to be ignored, n2) through cs: creates,
// label changes, status changes, graceful and immediate deletions.
type churn struct {
	cs   *kubernetes.Clientset
	rng  *rand.Rand
	next int
	live []string // n1 pods not being deleted
}

func (c *churn) step(ctx context.Context) error {
	pods := c.cs.CoreV1().Pods("default")
	zero := int64(0)
	op := c.rng.IntN(20)
	if len(c.live) < 5 {
		op = 0
	}
	var victim string
	if op >= 12 {
		i := c.rng.IntN(len(c.live))
		victim = c.live[i]
		if op >= 16 { // the pod leaves the live set
			c.live = append(c.live[:i], c.live[i+1:]...)
		}
	}
	var err error
	switch {
	case op < 10:
		c.next++
		name := fmt.Sprintf("churn-%d", c.next)
		if _, err = pods.Create(ctx, testPod(name, "n1"), metav1.CreateOptions{}); err == nil {
			c.live = append(c.live, name)
		}
	case op < 12:
		c.next++
		_, err = pods.Create(ctx, testPod(fmt.Sprintf("elsewhere-%d", c.next), "n2"), metav1.CreateOptions{})
	case op < 14:
		patch := fmt.Sprintf(`{"metadata":{"labels":{"step":"%d"}}}`, c.rng.Int())
		_, err = pods.Patch(ctx, victim, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	case op < 16:
		patch := `{"status":{"phase":"Running"}}`
		_, err = pods.Patch(ctx, victim, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	case op < 18:
		err = pods.Delete(ctx, victim, metav1.DeleteOptions{}) // graceful: the pod stays, marked
	default:
		err = pods.Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *churn) steps(ctx context.Context, n int) error {
	for range n {
		if err := c.step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// background runs steps until the returned stop is called; stop returns the
// first error. The churn must not be used otherwise until stop returns.
func (c *churn) background(ctx context.Context) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := c.step(ctx); err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	return func() error {
		cancel()
		return <-errc
	}
}

// listWatchCounter counts the pod lists and watches a client makes.
type listWatchCounter struct {
	rt             http.RoundTripper
	lists, watches atomic.Int64
}

func (c *listWatchCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") {
		if req.URL.Query().Get("watch") == "true" {
			c.watches.Add(1)
		} else {
			c.lists.Add(1)
		}
	}
	return c.rt.RoundTrip(req)
}

func TestWatchInterruption(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	// The source talks to one apiserver, the writer to another on the same
	// etcd, so pods change while the source's apiserver is down.
	srcAPI := c.APIServer()
	writerAPI, err := c.AddAPIServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counter := &listWatchCounter{}
	srcCS, _ := clientset(t, srcAPI.RESTConfig(), 50, 100, func(rt http.RoundTripper) http.RoundTripper {
		counter.rt = rt
		return counter
	})
	writer, _ := clientset(t, writerAPI.RESTConfig(), 200, 400)
	w := &churn{cs: writer, rng: rand.New(rand.NewPCG(1, 2))}
	if err := w.steps(ctx, 40); err != nil {
		t.Fatal(err)
	}
	view := startSource(t, srcCS, "n1")
	waitView(t, view, writer, "n1")

	t.Run("changes while the apiserver is down and history compacted are relisted", func(t *testing.T) {
		lists := counter.lists.Load()
		srcAPI.Stop()
		if err := w.steps(ctx, 60); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CompactEtcd(ctx); err != nil {
			t.Fatal(err)
		}
		stop := w.background(ctx)
		err := srcAPI.Start(ctx)
		if err2 := stop(); err == nil {
			err = err2
		}
		if err != nil {
			t.Fatal(err)
		}
		waitView(t, view, writer, "n1")
		if counter.lists.Load() == lists {
			t.Fatal("the source never relisted: its watch from a compacted resourceVersion did not get 410")
		}
	})

	t.Run("changes during an apiserver restart are not lost", func(t *testing.T) {
		stop := w.background(ctx)
		err := srcAPI.Restart(ctx)
		if err2 := stop(); err == nil {
			err = err2
		}
		if err == nil {
			err = w.steps(ctx, 20)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitView(t, view, writer, "n1")
	})

	t.Run("changes while connected arrive as they happen", func(t *testing.T) {
		watches := counter.watches.Load()
		if err := w.steps(ctx, 100); err != nil {
			t.Fatal(err)
		}
		waitView(t, view, writer, "n1")
		if got := counter.watches.Load() - watches; got > 1 {
			t.Fatalf("the source opened %d watches for 100 changes on a healthy apiserver, want at most 1", got)
		}
	})
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/provider"
	"github.com/nodekit/nodekit/provider/providertest"
	"github.com/nodekit/nodekit/status"
)

// nodekit's provider interfaces and virtual-kubelet's are the same method
// sets: a value of either satisfies the other, with no wrapper.
var (
	_ vknode.PodLifecycleHandler   = provider.PodLifecycleHandler(nil)
	_ provider.PodLifecycleHandler = vknode.PodLifecycleHandler(nil)
	_ vknode.PodNotifier           = provider.PodNotifier(nil)
	_ provider.PodNotifier         = vknode.PodNotifier(nil)
	_ vknode.NodeProvider          = provider.NodeProvider(nil)
	_ provider.NodeProvider        = vknode.NodeProvider(nil)
	_ vknode.NodeProvider          = node.Provider(nil)
	_ node.Provider                = vknode.NodeProvider(nil)

	// The mock providers are virtual-kubelet providers.
	_ vknode.PodLifecycleHandler = (*providertest.Provider)(nil)
	_ vknode.PodNotifier         = (*providertest.Notifier)(nil)
)

// startVirtualKubelet runs virtual-kubelet's own PodController for nodeName
// on p until the test ends.
func startVirtualKubelet(t *testing.T, cs *kubernetes.Clientset, nodeName string, p vknode.PodLifecycleHandler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pods := informers.NewSharedInformerFactoryWithOptions(cs, time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	others := informers.NewSharedInformerFactory(cs, time.Minute)
	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	pc, err := vknode.NewPodController(vknode.PodControllerConfig{
		PodClient:         cs.CoreV1(),
		PodInformer:       pods.Core().V1().Pods(),
		EventRecorder:     eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virtual-kubelet", Host: nodeName}),
		Provider:          p,
		ConfigMapInformer: others.Core().V1().ConfigMaps(),
		SecretInformer:    others.Core().V1().Secrets(),
		ServiceInformer:   others.Core().V1().Services(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pods.Start(ctx.Done())
	others.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- pc.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("virtual-kubelet PodController: %v", err)
		}
		pods.Shutdown()
		others.Shutdown()
		eb.Shutdown()
	})
	select {
	case <-pc.Ready():
	case <-pc.Done():
		t.Fatalf("virtual-kubelet PodController stopped: %v", pc.Err())
	case <-time.After(time.Minute):
		t.Fatal("virtual-kubelet PodController not ready after a minute")
	}
}

// startNodekit runs nodekit's agent for nodeName on p until the test ends.
func startNodekit(t *testing.T, cs *kubernetes.Clientset, nodeName string, p provider.PodLifecycleHandler) {
	t.Helper()
	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(eb.Shutdown)
	rt, err := provider.New(provider.Config{Provider: p,
		Recorder: eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodekit", Host: nodeName})})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		NodeName:     nodeName,
		Runtime:      rt,
		PodSource:    cs.CoreV1().Pods(""),
		StatusClient: func(ns string) status.PodClient { return cs.CoreV1().Pods(ns) },
		// Status writes by update, as provider/nodeutil sets it (and as
		// virtual-kubelet writes them).
		UpdateKnownStatus: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, a)
}

// comparable is the part of a pod's status both must agree on: phase,
// reason, conditions (type=status) and each container's state.
func comparable(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s reason=%q", p.Status.Phase, p.Status.Reason)
	conds := make([]string, 0, len(p.Status.Conditions))
	for _, c := range p.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	sort.Strings(conds)
	fmt.Fprintf(&b, " conditions=%v", conds)
	for _, cs := range p.Status.ContainerStatuses {
		state := "waiting"
		switch {
		case cs.State.Running != nil:
			state = "running"
		case cs.State.Terminated != nil:
			state = "terminated:" + cs.State.Terminated.Reason
		}
		fmt.Fprintf(&b, " %s=%s,ready=%v", cs.Name, state, cs.Ready)
	}
	return b.String()
}

// statusDiff lists the status fields that differ between two pods, times,
// names and UIDs aside: what the two runners do differently.
func statusDiff(a, b *corev1.Pod) []string {
	flat := func(p *corev1.Pod) map[string]string {
		st := p.Status.DeepCopy()
		st.StartTime = nil
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime, st.Conditions[i].LastProbeTime = metav1.Time{}, metav1.Time{}
		}
		for i := range st.ContainerStatuses {
			c := &st.ContainerStatuses[i]
			if c.State.Running != nil {
				c.State.Running.StartedAt = metav1.Time{}
			}
			if c.State.Terminated != nil {
				c.State.Terminated.StartedAt, c.State.Terminated.FinishedAt = metav1.Time{}, metav1.Time{}
			}
		}
		raw, _ := json.Marshal(st)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		out := map[string]string{}
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, x := range v {
					walk(prefix+"."+k, x)
				}
			case []any:
				for i, x := range v {
					walk(fmt.Sprintf("%s[%d]", prefix, i), x)
				}
			default:
				out[prefix] = fmt.Sprint(v)
			}
		}
		walk("status", m)
		return out
	}
	fa, fb := flat(a), flat(b)
	var diffs []string
	for k, v := range fa {
		if w, ok := fb[k]; !ok || w != v {
			diffs = append(diffs, fmt.Sprintf("%s: virtual-kubelet %q, nodekit %q", k, v, fb[k]))
		}
	}
	for k, w := range fb {
		if _, ok := fa[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: virtual-kubelet unset, nodekit %q", k, w))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// TestVirtualKubeletProviderSideBySide runs one mock provider under
// virtual-kubelet's PodController and another under nodekit's agent,
// against the same kube-apiserver, with the same pods, and compares what
// the apiserver shows at each step.
func TestVirtualKubeletProviderSideBySide(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 200, 400)
	ctx := t.Context()

	runners := []struct {
		name, node string
		p          *providertest.Notifier
	}{
		{"virtual-kubelet", "vk-node", providertest.NewNotifier(nil)},
		{"nodekit", "nk-node", providertest.NewNotifier(nil)},
	}
	startVirtualKubelet(t, cs, runners[0].node, runners[0].p)
	startNodekit(t, cs, runners[1].node, runners[1].p)

	specs := func(node string) []*corev1.Pod {
		web := testPod("web-"+node, node)
		web.Labels = map[string]string{"app": "web"}
		two := testPod("two-"+node, node)
		two.Spec.Containers = append(two.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
		// A status write must keep what the pod's metadata holds (an
		// update of pods/status takes finalizers from its body).
		two.Finalizers = []string{"example.com/keep"}
		job := testPod("job-"+node, node)
		job.Spec.RestartPolicy = corev1.RestartPolicyNever
		return []*corev1.Pod{web, two, job}
	}
	get := func(t *testing.T, name string) *corev1.Pod {
		t.Helper()
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// compare waits until both runners' pod base+"-"+node satisfies check,
	// then compares them.
	compare := func(t *testing.T, step, base string, check func(*corev1.Pod) string) {
		t.Helper()
		var got [2]*corev1.Pod
		for i, r := range runners {
			got[i] = waitPod(t, cs, "default", base+"-"+r.node, check)
		}
		if a, b := comparable(got[0]), comparable(got[1]); a != b {
			t.Errorf("%s, %s: virtual-kubelet %s\n  nodekit %s", step, base, a, b)
		}
		for _, d := range statusDiff(got[0], got[1]) {
			t.Logf("difference (%s, %s): %s", step, base, d)
		}
	}

	for _, r := range runners {
		for _, p := range specs(r.node) {
			if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	running := func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodRunning {
			return "phase " + string(p.Status.Phase)
		}
		return ""
	}
	for _, base := range []string{"web", "two", "job"} {
		compare(t, "created", base, running)
	}

	// A label change is passed on with UpdatePod by both.
	for _, r := range runners {
		p := get(t, "web-"+r.node)
		p.Labels["tier"] = "front"
		if _, err := cs.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runners {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			pp := r.p.Pod("default", "web-"+r.node)
			return pp != nil && pp.Labels["tier"] == "front", nil
		})
		if err != nil {
			t.Errorf("%s: the label change did not reach the provider (UpdatePod calls %d)", r.name, r.p.Calls("UpdatePod"))
		}
	}

	// A status change made by the backend reaches the apiserver.
	for _, r := range runners {
		r.p.SetPodStatus("default", "two-"+r.node, func(st *corev1.PodStatus) {
			for i := range st.Conditions {
				if st.Conditions[i].Type == corev1.PodReady {
					st.Conditions[i].Status = corev1.ConditionFalse
				}
			}
			st.ContainerStatuses[1].Ready = false
		})
	}
	compare(t, "backend made it unready", "two", func(p *corev1.Pod) string {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionFalse {
				return ""
			}
		}
		return "still ready"
	})
	// Its second status write (after Running) kept the finalizer; then it
	// goes, so the pod can be deleted below.
	for _, r := range runners {
		if p := get(t, "two-"+r.node); !slices.Equal(p.Finalizers, []string{"example.com/keep"}) {
			t.Errorf("%s: finalizers %v after two status writes, want [example.com/keep]", r.name, p.Finalizers)
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := cs.CoreV1().Pods("default").Patch(ctx, "two-"+r.node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Graceful deletion: DeletePod, then the pod leaves the apiserver.
	for _, r := range runners {
		err := cs.CoreV1().Pods("default").Delete(ctx, "web-"+r.node, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](5)})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runners {
		start := time.Now()
		waitGone(t, cs, "default", "web-"+r.node)
		t.Logf("%s: deleted pod gone from the apiserver after %v; DeletePod calls %d", r.name, time.Since(start).Round(10*time.Millisecond), r.p.Calls("DeletePod"))
		if r.p.Pod("default", "web-"+r.node) != nil {
			t.Errorf("%s: the provider still has the deleted pod", r.name)
		}
	}
	// Provider errors: the status says so (reason ProviderFailed; Failed
	// under restart policy Never), and a retry runs the pod once the
	// provider recovers.
	for _, r := range runners {
		r.p.SetError("CreatePod", errors.New("quota exceeded"))
		flaky, doomed := testPod("flaky-"+r.node, r.node), testPod("doomed-"+r.node, r.node)
		doomed.Spec.RestartPolicy = corev1.RestartPolicyNever
		for _, p := range []*corev1.Pod{flaky, doomed} {
			if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	providerFailed := func(phase corev1.PodPhase) func(*corev1.Pod) string {
		return func(p *corev1.Pod) string {
			if p.Status.Reason != provider.ReasonProviderFailed || p.Status.Phase != phase {
				return fmt.Sprintf("phase %s reason %q", p.Status.Phase, p.Status.Reason)
			}
			return ""
		}
	}
	compare(t, "CreatePod fails", "flaky", providerFailed(corev1.PodPending))
	compare(t, "CreatePod fails", "doomed", providerFailed(corev1.PodFailed))
	for _, r := range runners {
		r.p.SetError("CreatePod", nil)
	}
	compare(t, "the provider recovered", "flaky", running)
	compare(t, "the provider recovered", "doomed", providerFailed(corev1.PodFailed))

	for _, r := range runners {
		t.Logf("%s: provider calls CreatePod %d UpdatePod %d DeletePod %d GetPod %d GetPodStatus %d GetPods %d", r.name,
			r.p.Calls("CreatePod"), r.p.Calls("UpdatePod"), r.p.Calls("DeletePod"), r.p.Calls("GetPod"), r.p.Calls("GetPodStatus"), r.p.Calls("GetPods"))
		if r.p.Pod("default", "doomed-"+r.node) != nil {
			t.Errorf("%s: the pod that failed for good was created after all", r.name)
		}
	}
	// Leave nothing behind for the runners' shutdown.
	for _, r := range runners {
		for _, base := range []string{"two", "job", "flaky", "doomed"} {
			err := cs.CoreV1().Pods("default").Delete(ctx, base+"-"+r.node, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
	}
}

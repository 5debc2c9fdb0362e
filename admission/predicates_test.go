package admission_test

import (
	"slices"

	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podutil"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// reqPod is a pod of one container requesting kv.
func reqPod(kv ...string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: rl(kv...)}}}}}
}

func with(p *v1.Pod, f func(*v1.Pod)) *v1.Pod { f(p); return p }

func portPod(proto v1.Protocol, ip string, port int32) *v1.Pod {
	return with(reqPod(), func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip, Protocol: proto}}
	})
}

func affinity(terms ...v1.NodeSelectorTerm) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

func expr(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// TestGeneralPredicates: the kubelet's predicate admit handler's checks,
// reasons and messages.
func TestGeneralPredicates(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "cores": "8", v1.LabelOSStable: goruntime.GOOS}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: "maintenance", Value: "soon", Effect: v1.TaintEffectNoExecute},
			{Key: "gpu", Effect: v1.TaintEffectNoSchedule},
		}},
		Status: v1.NodeStatus{Allocatable: rl("cpu", "2", "memory", "4Gi", "pods", "3", "example.com/gpu", "1")},
	}
	tolerate := func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "maintenance", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	}
	tolerated := func(p *v1.Pod) *v1.Pod { return with(p, tolerate) }
	cpu1 := tolerated(reqPod("cpu", "1"))
	cases := []struct {
		name    string
		pod     *v1.Pod
		others  []*v1.Pod
		reason  string // "" admits
		message string // checked if set
	}{
		{"a pod that fits is admitted", tolerated(reqPod("cpu", "500m", "memory", "1Gi")), []*v1.Pod{cpu1}, "", ""},
		{"cpu beyond what is left", tolerated(reqPod("cpu", "1500m")), []*v1.Pod{cpu1}, "OutOfcpu",
			"Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{"memory beyond allocatable", tolerated(reqPod("memory", "5Gi")), nil, "OutOfmemory",
			"Node didn't have enough resource: memory, requested: 5368709120, used: 0, capacity: 4294967296"},
		{"cpu is checked before memory", tolerated(reqPod("memory", "5Gi", "cpu", "3")), nil, "OutOfcpu", ""},
		{"an init container's larger request counts", with(tolerated(reqPod("cpu", "100m")), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: rl("cpu", "3")}}}
		}), nil, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"},
		{"the pod overhead counts", with(tolerated(reqPod("cpu", "1500m")), func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "1") }),
			nil, "OutOfcpu", ""},
		{"an extended resource the node has, short", tolerated(reqPod("example.com/gpu", "2")), nil, "OutOfexample.com/gpu",
			"Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"},
		{"an extended resource unknown to the node is cluster-level", tolerated(reqPod("example.com/fpga", "4")), nil, "", ""},
		{"hugepages the node has none of", tolerated(reqPod("hugepages-2Mi", "4Mi")), nil, "OutOfhugepages-2Mi", ""},
		{"the pods capacity", tolerated(reqPod()), []*v1.Pod{reqPod(), reqPod(), reqPod()}, "OutOfpods",
			"Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"},
		{"a node selector the labels match", with(tolerated(reqPod()), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }), nil, "", ""},
		{"a node selector the labels do not match", with(tolerated(reqPod()), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			nil, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{"resources are checked before affinity", with(tolerated(reqPod("cpu", "3")), func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			nil, "OutOfcpu", ""},
		{"required affinity: one matching term of several", with(tolerated(reqPod()), affinity(expr("zone", v1.NodeSelectorOpIn, "b"), expr("zone", v1.NodeSelectorOpIn, "a", "c"))), nil, "", ""},
		{"required affinity: no term matches", with(tolerated(reqPod()), affinity(expr("zone", v1.NodeSelectorOpNotIn, "a"), expr("ssd", v1.NodeSelectorOpExists))), nil, "NodeAffinity", ""},
		{"required affinity: DoesNotExist", with(tolerated(reqPod()), affinity(expr("ssd", v1.NodeSelectorOpDoesNotExist))), nil, "", ""},
		{"required affinity: Gt", with(tolerated(reqPod()), affinity(expr("cores", v1.NodeSelectorOpGt, "4"))), nil, "", ""},
		{"required affinity: Lt fails", with(tolerated(reqPod()), affinity(expr("cores", v1.NodeSelectorOpLt, "4"))), nil, "NodeAffinity", ""},
		{"required affinity: a term's requirements all hold", with(tolerated(reqPod()), affinity(v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
			{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}, {Key: "cores", Operator: v1.NodeSelectorOpIn, Values: []string{"16"}}}})), nil, "NodeAffinity", ""},
		{"required affinity: metadata.name field", with(tolerated(reqPod()), affinity(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}})), nil, "", ""},
		{"required affinity: an empty term matches nothing", with(tolerated(reqPod()), affinity(v1.NodeSelectorTerm{})), nil, "NodeAffinity", ""},
		{"another node's name", with(tolerated(reqPod()), func(p *v1.Pod) { p.Spec.NodeName = "n2" }), nil, "NodeName",
			"Predicate NodeName failed: node(s) didn't match the requested node name"},
		{"a host port bound on every address", tolerated(portPod("", "10.0.0.1", 8080)), []*v1.Pod{portPod(v1.ProtocolTCP, "", 8080)}, "NodePorts",
			"Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{"a host port on every address, bound on one", tolerated(portPod(v1.ProtocolTCP, "::", 8080)), []*v1.Pod{portPod(v1.ProtocolTCP, "10.0.0.1", 8080)}, "NodePorts", ""},
		{"the same host port, another protocol", tolerated(portPod(v1.ProtocolUDP, "", 8080)), []*v1.Pod{portPod(v1.ProtocolTCP, "", 8080)}, "", ""},
		{"the same host port on two addresses", tolerated(portPod(v1.ProtocolTCP, "10.0.0.2", 8080)), []*v1.Pod{portPod(v1.ProtocolTCP, "10.0.0.1", 8080)}, "", ""},
		{"a sidecar's host port is bound", tolerated(portPod("", "", 8080)), []*v1.Pod{with(reqPod(), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Ports: []v1.ContainerPort{{HostPort: 8080}}}}
		})}, "NodePorts", ""},
		{"an init container's host port is free once it ends", tolerated(portPod("", "", 8080)), []*v1.Pod{with(reqPod(), func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Ports: []v1.ContainerPort{{HostPort: 8080}}}}
		})}, "", ""},
		{"an untolerated NoExecute taint", reqPod(), nil, "TaintToleration",
			"Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		{"a NoSchedule taint does not matter", tolerated(reqPod()), nil, "", ""},
		{"a static pod is not checked against taints", with(reqPod(), func(p *v1.Pod) {
			p.Annotations = map[string]string{podutil.ConfigSourceAnnotationKey: podutil.FileSource}
		}), nil, "", ""},
		{"the pod's OS label against the node's", with(tolerated(reqPod()), func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: "plan9"} }),
			nil, admission.ReasonOSSelectorMismatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{"the pod's OS field against the node's", with(tolerated(reqPod()), func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "plan9"} }),
			nil, admission.ReasonOSNotSupported, ""},
	}
	// The other pods' usage: summed by the handler, given from NewUsage,
	// or kept pod by pod by the caller (read before the last pod is added,
	// as a caller admitting one pod after another does).
	usages := []struct {
		name string
		of   func(others []*v1.Pod) *admission.Usage
	}{
		{"summed by the handler", func([]*v1.Pod) *admission.Usage { return nil }},
		{"NewUsage", admission.NewUsage},
		{"kept by the caller", func(others []*v1.Pod) *admission.Usage {
			u := admission.NewUsage(nil)
			for i, o := range others {
				if i == len(others)-1 {
					u.Pods()
				}
				u.Add(o)
			}
			return u
		}},
	}
	for _, tc := range cases {
		for _, usage := range usages {
			t.Run(tc.name+"/"+usage.name, func(t *testing.T) {
				h := admission.GeneralPredicates(func() *v1.Node { return node })
				got := h.Admit(&admission.PodAdmitAttributes{Pod: tc.pod, OtherPods: tc.others, OtherPodsUsage: usage.of(tc.others)})
				if tc.reason == "" {
					assert.True(t, got.Admit, "refused: %s: %s", got.Reason, got.Message)
					return
				}
				assert.False(t, got.Admit)
				assert.Equal(t, tc.reason, got.Reason)
				if tc.message != "" {
					assert.Equal(t, tc.message, got.Message)
				}
			})
		}
	}
	// Without resources (virtual-kubelet's behaviour for providers): what
	// was short of a resource is admitted, every other check stays.
	for _, tc := range cases {
		t.Run("without resources/"+tc.name, func(t *testing.T) {
			want := tc.reason
			if strings.HasPrefix(want, admission.ReasonOutOfPrefix) {
				want = ""
			}
			if tc.name == "resources are checked before affinity" {
				want = admission.ReasonNodeAffinity
			}
			h := admission.GeneralPredicatesWithoutResources(func() *v1.Node { return node }, nil)
			got := h.Admit(&admission.PodAdmitAttributes{Pod: tc.pod, OtherPods: tc.others})
			assert.Equal(t, want == "", got.Admit, "%s: %s", got.Reason, got.Message)
			assert.Equal(t, want, got.Reason)
		})
	}
	t.Run("an unknown node admits every pod", func(t *testing.T) {
		h := admission.GeneralPredicates(func() *v1.Node { return nil })
		assert.True(t, h.Admit(&admission.PodAdmitAttributes{Pod: reqPod("cpu", "100")}).Admit)
	})
}

// TestAdmissionBeforeRegistration: GeneralPredicatesOrInitial checks pods
// against the Node the agent would register until it is registered, as
// the kubelet's getNodeAnyWay, then against the registered one.
func TestAdmissionBeforeRegistration(t *testing.T) {
	initial := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.LabelOSStable: goruntime.GOOS, "zone": "a"}},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{Key: "registering", Effect: v1.TaintEffectNoExecute}}},
		Status:     v1.NodeStatus{Allocatable: rl("cpu", "2", "memory", "4Gi", "pods", "110")},
	}
	// The Node as registered: others gave it a label, the registration
	// taint is gone, more cpu is allocatable.
	registered := initial.DeepCopy()
	registered.Labels["disk"] = "ssd"
	registered.Spec.Taints = nil
	registered.Status.Allocatable = rl("cpu", "8", "memory", "4Gi", "pods", "110")
	tolerate := func(p *v1.Pod) {
		p.Spec.Tolerations = []v1.Toleration{{Key: "registering", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	}
	selector := func(kv ...string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			tolerate(p)
			p.Spec.NodeSelector = map[string]string{kv[0]: kv[1]}
		}
	}
	cases := []struct {
		name       string
		registered *v1.Node // nil: not registered yet
		initial    *v1.Node // nil: none known
		pod        *v1.Pod
		reason     string // "" admits
	}{
		{"before registration, resources are checked against the initial Node", nil, initial,
			with(reqPod("cpu", "4"), tolerate), "OutOfcpu"},
		{"before registration, the registration taints are checked", nil, initial, reqPod(), "TaintToleration"},
		{"before registration, a pod the initial Node fits is admitted", nil, initial, with(reqPod("cpu", "1"), tolerate), ""},
		{"before registration, a selector the initial Node's labels miss admits (the Node may have more)", nil, initial,
			with(reqPod(), selector("disk", "ssd")), ""},
		{"before registration, the OS label is checked", nil, initial,
			with(reqPod(), func(p *v1.Pod) { tolerate(p); p.Labels = map[string]string{v1.LabelOSStable: "plan9"} }), admission.ReasonOSSelectorMismatch},
		{"without an initial Node, a pod is admitted unchecked before registration", nil, nil, reqPod("cpu", "4"), ""},
		{"once registered, the registered Node is checked: its resources", registered, initial, reqPod("cpu", "4"), ""},
		{"once registered, the registered Node is checked: its labels", registered, initial, with(reqPod(), selector("disk", "hdd")), "NodeAffinity"},
		{"once registered, the registered Node is checked: a label others gave it", registered, initial, with(reqPod(), selector("disk", "ssd")), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var initialFn func() *v1.Node
			if tc.initial != nil {
				initialFn = func() *v1.Node { return tc.initial }
			}
			h := admission.GeneralPredicatesOrInitial(func() *v1.Node { return tc.registered }, initialFn)
			got := h.Admit(&admission.PodAdmitAttributes{Pod: tc.pod})
			if tc.reason == "" {
				assert.True(t, got.Admit, "refused: %s: %s", got.Reason, got.Message)
				return
			}
			assert.False(t, got.Admit)
			assert.Equal(t, tc.reason, got.Reason)
		})
	}
}

// TestUsageSumsRequestsAndPorts: a Usage kept pod by pod sums as one made
// of all the pods at once, whether read before the last additions or not.
func TestUsageSumsRequestsAndPorts(t *testing.T) {
	pods := []*v1.Pod{
		reqPod("cpu", "250m", "memory", "1Gi"),
		reqPod("cpu", "1", "example.com/gpu", "1"),
		portPod(v1.ProtocolTCP, "", 8080),
		with(reqPod("memory", "512Mi"), func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "100m") }),
	}
	check := func(t *testing.T, u *admission.Usage) {
		t.Helper()
		assert.Equal(t, 4, u.Pods())
		assert.Equal(t, int64(1350), u.Requested(v1.ResourceCPU), "cpu in millicores")
		assert.Equal(t, int64(1536<<20), u.Requested(v1.ResourceMemory))
		assert.Equal(t, int64(1), u.Requested("example.com/gpu"))
		assert.Equal(t, int64(0), u.Requested(v1.ResourceEphemeralStorage))
	}
	t.Run("at once", func(t *testing.T) { check(t, admission.NewUsage(pods)) })
	t.Run("pod by pod, read between", func(t *testing.T) {
		u := admission.NewUsage(pods[:1])
		assert.Equal(t, 1, u.Pods())
		for _, p := range pods[1:] {
			u.Add(p)
			u.Requested(v1.ResourceCPU)
		}
		check(t, u)
	})
	t.Run("the caller's later appends are not counted", func(t *testing.T) {
		others := append(make([]*v1.Pod, 0, 8), pods[:2]...)
		u := admission.NewUsage(others)
		others = append(others, pods[2]) // into the same array
		u.Add(pods[3])
		assert.Equal(t, 3, u.Pods())
		assert.Equal(t, int64(1350), u.Requested(v1.ResourceCPU))
		_ = others
	})
	t.Run("listed on first read, once, added pods after them", func(t *testing.T) {
		calls := 0
		u := admission.NewUsageOf(func() []*v1.Pod { calls++; return slices.Clone(pods[:3]) })
		u.Add(pods[3])
		assert.Zero(t, calls, "listed before a read")
		check(t, u)
		u.Pods()
		assert.Equal(t, 1, calls)
	})
	t.Run("never listed when not read", func(t *testing.T) {
		h := admission.GeneralPredicatesWithoutResources(func() *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}} }, nil)
		u := admission.NewUsageOf(func() []*v1.Pod { t.Fatal("listed for a pod without host ports"); return nil })
		got := h.Admit(&admission.PodAdmitAttributes{Pod: reqPod("cpu", "1"), OtherPodsUsage: u})
		assert.True(t, got.Admit, "%s: %s", got.Reason, got.Message)
		got = h.Admit(&admission.PodAdmitAttributes{Pod: portPod(v1.ProtocolTCP, "", 8080), OtherPodsUsage: admission.NewUsageOf(func() []*v1.Pod { return pods })})
		assert.Equal(t, admission.ReasonNodePorts, got.Reason, "the listed pods' port")
	})
	// The port is taken: a pod asking for it is refused against the usage.
	h := admission.GeneralPredicates(func() *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: rl("cpu", "8", "memory", "8Gi", "pods", "10", "example.com/gpu", "2")}}
	})
	got := h.Admit(&admission.PodAdmitAttributes{Pod: portPod(v1.ProtocolTCP, "10.0.0.1", 8080), OtherPods: pods, OtherPodsUsage: admission.NewUsage(pods)})
	assert.Equal(t, admission.ReasonNodePorts, got.Reason)
}

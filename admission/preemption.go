package admission

import (
	"fmt"
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/cm"
	"github.com/nodekit/nodekit/podutil"
)

// Reasons of the kubelet's critical pod preemption.
const (
	// ReasonPreempting is the status reason of a pod stopped to make room
	// for a critical pod.
	ReasonPreempting = "Preempting"
	// ReasonUnexpectedAdmissionError refuses a critical pod for which no
	// set of pods could be preempted.
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
	// PreemptionMessage is the message of a preempted pod's status.
	PreemptionMessage = "Preempted in order to admit critical pod"
)

// preemptable reports whether preemptor may preempt preemptee: a critical
// pod any pod that is not, otherwise a pod of higher priority.
func preemptable(preemptor, preemptee *v1.Pod) bool {
	if podutil.IsCritical(preemptor) && !podutil.IsCritical(preemptee) {
		return true
	}
	return preemptor.Spec.Priority != nil && preemptee.Spec.Priority != nil &&
		*preemptor.Spec.Priority > *preemptee.Spec.Priority
}

// Preempter stops pods to make room for a critical pod, as the kubelet's
// killPodFunc: each victim is evicted (its status Failed with
// ReasonPreempting and message) and Preempt returns once they have stopped
// or it gave up on them. It runs on the admitting goroutine, which waits,
// as the kubelet's sync loop does.
type Preempter interface {
	Preempt(victims []*v1.Pod, message string)
}

// PreempterFunc is a function that is a Preempter.
type PreempterFunc func(victims []*v1.Pod, message string)

// Preempt calls f.
func (f PreempterFunc) Preempt(victims []*v1.Pod, message string) { f(victims, message) }

// GeneralPredicatesWithPreemption is GeneralPredicatesOrInitial with the
// kubelet's CriticalPodAdmissionHandler (pkg/kubelet/preemption): a
// critical pod (podutil.IsCritical) refused only because the node is short of
// resources (the pods count, cpu, memory, ...) is admitted once preempter
// has stopped a set of OtherPods that frees them. The set is the kubelet's:
// pods the critical pod may preempt (not critical, or of lower priority),
// the fewest Guaranteed ones needed if every BestEffort and Burstable one
// went, then the fewest Burstable ones, then BestEffort ones, each time
// the pod nearest to what is still missing (every resource weighted alike),
// the smaller request on a tie. If no such set exists, the pod is refused
// with ReasonUnexpectedAdmissionError. Pods admitted later in the same
// batch still count the victims' requests (OtherPodsUsage is the caller's).
// A nil preempter preempts nothing: GeneralPredicatesOrInitial.
func GeneralPredicatesWithPreemption(registered, initial func() *v1.Node, preempter Preempter) PodAdmitHandler {
	return PodAdmitHandlerFunc(func(attrs *PodAdmitAttributes) PodAdmitResult {
		n, affinity := registered(), true
		if n == nil && initial != nil {
			n, affinity = initial(), false
		}
		if n == nil {
			return PodAdmitResult{Admit: true}
		}
		r, short, other := checkNode(attrs, n, affinity)
		if r.Admit || len(short) == 0 || preempter == nil || !podutil.IsCritical(attrs.Pod) {
			return r
		}
		if !other.Admit {
			// A critical pod is refused only for what preemption cannot fix.
			return other
		}
		need := make(requirements, len(short))
		for i, s := range short {
			need[i] = requirement{s.name, s.missing()}
		}
		victims, err := podsToPreempt(attrs.Pod, attrs.OtherPods, need)
		if err != nil {
			return PodAdmitResult{Reason: ReasonUnexpectedAdmissionError,
				Message: fmt.Sprintf("Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: %v", err)}
		}
		preempter.Preempt(victims, PreemptionMessage)
		return PodAdmitResult{Admit: true}
	})
}

// requirement is an amount of a resource to free.
type requirement struct {
	name     v1.ResourceName
	quantity int64
}

type requirements []requirement

// request is what pod requests of a resource as the kubelet's
// GetResourceRequest: 1 of pods, cpu in millicores.
func request(pod *v1.Pod, name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return 1
	}
	return cm.PodRequest(pod, name)
}

// subtract is what remains of rs once pods are stopped.
func (rs requirements) subtract(pods ...*v1.Pod) requirements {
	var out requirements
	for _, r := range rs {
		q := r.quantity
		for _, p := range pods {
			if q -= request(p, r.name); q <= 0 {
				break
			}
		}
		if q > 0 {
			out = append(out, requirement{r.name, q})
		}
	}
	return out
}

// distance is how far stopping pod leaves rs from met: the sum of the
// squared fractions left of each requirement.
func (rs requirements) distance(pod *v1.Pod) float64 {
	d := 0.0
	for _, r := range rs {
		if left := float64(r.quantity - request(pod, r.name)); left > 0 {
			d += math.Pow(left/float64(r.quantity), 2)
		}
	}
	return d
}

func (rs requirements) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s: %d", r.name, r.quantity)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// podsToPreempt is the kubelet's getPodsToPreempt.
func podsToPreempt(preemptor *v1.Pod, pods []*v1.Pod, need requirements) ([]*v1.Pod, error) {
	var bestEffort, burstable, guaranteed []*v1.Pod
	for _, p := range pods {
		if !preemptable(preemptor, p) {
			continue
		}
		switch podutil.QOSClass(p) {
		case v1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case v1.PodQOSBurstable:
			burstable = append(burstable, p)
		case v1.PodQOSGuaranteed:
			guaranteed = append(guaranteed, p)
		}
	}
	all := append(append(append([]*v1.Pod(nil), bestEffort...), burstable...), guaranteed...)
	if left := need.subtract(all...); len(left) > 0 {
		return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", left)
	}
	lower := append(append([]*v1.Pod(nil), bestEffort...), burstable...)
	g, err := nearest(guaranteed, need.subtract(lower...))
	if err != nil {
		return nil, err
	}
	b, err := nearest(burstable, need.subtract(append(append([]*v1.Pod(nil), bestEffort...), g...)...))
	if err != nil {
		return nil, err
	}
	be, err := nearest(bestEffort, need.subtract(append(append([]*v1.Pod(nil), b...), g...)...))
	if err != nil {
		return nil, err
	}
	return append(append(be, b...), g...), nil
}

// nearest picks pods, one at a time the one nearest to what is still
// needed (the smaller request on a tie), until need is met: the
// kubelet's getPodsToPreemptByDistance. pods is not modified.
func nearest(pods []*v1.Pod, need requirements) ([]*v1.Pod, error) {
	pods = append([]*v1.Pod(nil), pods...)
	var out []*v1.Pod
	for len(need) > 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("no set of running pods found to reclaim resources: %v", need)
		}
		best, bestDist := 0, float64(len(need)+1)
		for i, p := range pods {
			if d := need.distance(p); d < bestDist || (d == bestDist && smallerRequest(p, pods[best])) {
				best, bestDist = i, d
			}
		}
		need = need.subtract(pods[best])
		out = append(out, pods[best])
		pods[best] = pods[len(pods)-1]
		pods = pods[:len(pods)-1]
	}
	return out, nil
}

// smallerRequest reports whether a requests less than b: memory first,
// then cpu (true on a tie, as the kubelet).
func smallerRequest(a, b *v1.Pod) bool {
	for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		ra, rb := request(a, name), request(b, name)
		if ra != rb {
			return ra < rb
		}
	}
	return true
}

// Package providertest has in-memory pod-level providers in the style of
// virtual-kubelet's own mock (node/mock_test.go there): a pod is Running,
// with every container running and ready, as soon as CreatePod returns;
// DeletePod reports it Succeeded with every container terminated, then
// forgets it. Provider is polled (no NotifyPods); Notifier adds NotifyPods.
// Both are written against virtual-kubelet's interfaces only (k8s.io/api
// types), so they run under virtual-kubelet's PodController as under
// nodekit's provider.Runtime.
//
// Beyond virtual-kubelet's mock: injected errors per method (SetError),
// deletions held until FinishDelete (an asynchronous backend), status
// changes as a backend would make them (SetPodStatus) and call counts. What
// it does not do: restart containers, honour activeDeadlineSeconds or
// report anything but Running before deletion.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Reasons the mock sets, virtual-kubelet's mock's.
const (
	ReasonPodDeleted       = "MockProviderPodDeleted"
	ReasonContainerDeleted = "MockProviderPodContainerDeleted"
)

// ErrNotFound is returned (wrapped, with a NotFound() method as
// virtual-kubelet's errdefs.NotFound has) for a pod the provider does not
// have.
var ErrNotFound = errors.New("providertest: not found")

type notFoundError struct{ error }

func (notFoundError) NotFound() bool  { return true }
func (e notFoundError) Unwrap() error { return e.error }

func notFound(ns, name string) error {
	return notFoundError{fmt.Errorf("pod %q is not known to the provider: %w", ns+"/"+name, ErrNotFound)}
}

// Provider is a polled pod-level provider: it has no NotifyPods. It is safe
// for concurrent use.
type Provider struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	pods     map[string]*v1.Pod
	errs     map[string]error
	hold     bool
	held     map[string]bool
	calls    map[string]int
	notifier func(*v1.Pod)
}

// New returns an empty polled provider; clk nil means the real clock.
func New(clk clock.PassiveClock) *Provider {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Provider{clock: clk, pods: map[string]*v1.Pod{}, errs: map[string]error{}, held: map[string]bool{}, calls: map[string]int{}}
}

// Notifier is a Provider with NotifyPods: every status change is pushed.
type Notifier struct{ *Provider }

// NewNotifier returns an empty notifying provider.
func NewNotifier(clk clock.PassiveClock) *Notifier { return &Notifier{New(clk)} }

// NotifyPods registers the callback for status changes.
func (n *Notifier) NotifyPods(_ context.Context, cb func(*v1.Pod)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls["NotifyPods"]++
	n.notifier = cb
}

func key(ns, name string) string { return ns + "/" + name }

// enter counts a call and returns the error injected for method.
func (p *Provider) enter(method string) error {
	p.calls[method]++
	return p.errs[method]
}

// notify calls the NotifyPods callback with a copy of pod, outside the lock.
func (p *Provider) notify(cb func(*v1.Pod), pod *v1.Pod) {
	if cb != nil {
		cb(pod)
	}
}

// CreatePod runs the pod: Running at once, as virtual-kubelet's mock.
func (p *Provider) CreatePod(_ context.Context, pod *v1.Pod) error {
	p.mu.Lock()
	if err := p.enter("CreatePod"); err != nil {
		p.mu.Unlock()
		return err
	}
	if pod.Namespace == "" || pod.Name == "" {
		p.mu.Unlock()
		return errors.New("pod name or namespace missing")
	}
	now := metav1.NewTime(p.clock.Now())
	pod = pod.DeepCopy()
	pod.Status = v1.PodStatus{
		Phase:     v1.PodRunning,
		HostIP:    "1.2.3.4",
		PodIP:     "5.6.7.8",
		StartTime: &now,
		Conditions: []v1.PodCondition{
			{Type: v1.PodInitialized, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: v1.ConditionTrue},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		},
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	p.pods[key(pod.Namespace, pod.Name)] = pod
	cb, out := p.notifier, pod.DeepCopy()
	p.mu.Unlock()
	p.notify(cb, out)
	return nil
}

// UpdatePod stores the new pod, keeping its status.
func (p *Provider) UpdatePod(_ context.Context, pod *v1.Pod) error {
	p.mu.Lock()
	if err := p.enter("UpdatePod"); err != nil {
		p.mu.Unlock()
		return err
	}
	k := key(pod.Namespace, pod.Name)
	old, ok := p.pods[k]
	if !ok {
		p.mu.Unlock()
		return notFound(pod.Namespace, pod.Name)
	}
	pod = pod.DeepCopy()
	pod.Status = *old.Status.DeepCopy()
	p.pods[k] = pod
	cb, out := p.notifier, pod.DeepCopy()
	p.mu.Unlock()
	p.notify(cb, out)
	return nil
}

// DeletePod stops the pod: Succeeded with reason MockProviderPodDeleted,
// every container terminated, then forgotten. With HoldDeletes the pod runs
// on until FinishDelete.
func (p *Provider) DeletePod(_ context.Context, pod *v1.Pod) error {
	p.mu.Lock()
	if err := p.enter("DeletePod"); err != nil {
		p.mu.Unlock()
		return err
	}
	k := key(pod.Namespace, pod.Name)
	if _, ok := p.pods[k]; !ok {
		p.mu.Unlock()
		return notFound(pod.Namespace, pod.Name)
	}
	if p.hold {
		p.held[k] = true
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	return p.FinishDelete(pod.Namespace, pod.Name)
}

// FinishDelete completes the deletion of a pod: it reports it terminated
// and forgets it.
func (p *Provider) FinishDelete(ns, name string) error {
	p.mu.Lock()
	k := key(ns, name)
	pod, ok := p.pods[k]
	if !ok {
		p.mu.Unlock()
		return notFound(ns, name)
	}
	delete(p.held, k)
	now := metav1.NewTime(p.clock.Now())
	pod = pod.DeepCopy()
	pod.Status.Phase, pod.Status.Reason = v1.PodSucceeded, ReasonPodDeleted
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		var started metav1.Time
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Ready = false
		cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Message: "Mock provider terminated container upon deletion", FinishedAt: now,
			Reason: ReasonContainerDeleted, StartedAt: started,
		}}
	}
	delete(p.pods, k)
	cb := p.notifier
	p.mu.Unlock()
	p.notify(cb, pod)
	return nil
}

// GetPod returns a copy of the pod, or an error whose NotFound() is true.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*v1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enter("GetPod"); err != nil {
		return nil, err
	}
	if pod, ok := p.pods[key(namespace, name)]; ok {
		return pod.DeepCopy(), nil
	}
	return nil, notFound(namespace, name)
}

// GetPodStatus returns a copy of the pod's status.
func (p *Provider) GetPodStatus(_ context.Context, namespace, name string) (*v1.PodStatus, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enter("GetPodStatus"); err != nil {
		return nil, err
	}
	if pod, ok := p.pods[key(namespace, name)]; ok {
		return pod.Status.DeepCopy(), nil
	}
	return nil, notFound(namespace, name)
}

// GetPods returns copies of every pod.
func (p *Provider) GetPods(context.Context) ([]*v1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enter("GetPods"); err != nil {
		return nil, err
	}
	out := make([]*v1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		out = append(out, pod.DeepCopy())
	}
	return out, nil
}

// SetError makes every later call of method ("CreatePod", ...) fail with
// err; nil clears it.
func (p *Provider) SetError(method string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.errs, method)
		return
	}
	p.errs[method] = err
}

// HoldDeletes makes DeletePod accept deletions without carrying them out
// until FinishDelete, as a backend that takes its time.
func (p *Provider) HoldDeletes(hold bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = hold
}

// Held reports whether a deletion of the pod is held.
func (p *Provider) Held(ns, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[key(ns, name)]
}

// SetPodStatus changes a pod's status as the backend would (change gets
// the status to modify) and notifies it. It reports whether the pod exists.
func (p *Provider) SetPodStatus(ns, name string, change func(*v1.PodStatus)) bool {
	p.mu.Lock()
	pod, ok := p.pods[key(ns, name)]
	if !ok {
		p.mu.Unlock()
		return false
	}
	pod = pod.DeepCopy()
	change(&pod.Status)
	p.pods[key(ns, name)] = pod
	cb, out := p.notifier, pod.DeepCopy()
	p.mu.Unlock()
	p.notify(cb, out)
	return true
}

// Pod returns a copy of the pod as the provider has it, or nil.
func (p *Provider) Pod(ns, name string) *v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pod, ok := p.pods[key(ns, name)]; ok {
		return pod.DeepCopy()
	}
	return nil
}

// Len returns how many pods the provider has.
func (p *Provider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods)
}

// Calls returns how often method was called.
func (p *Provider) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

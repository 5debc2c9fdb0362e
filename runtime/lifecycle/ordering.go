package lifecycle

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
)

// Ordering holds the sidecars of a pod being stopped back until the
// containers they serve are stopped, as the kubelet's terminationOrdering:
// a sidecar waits for every regular container and for the sidecars
// declared after it. Every container runs its preStop hook at once; the
// wait comes after it and out of the same grace period. A nil *Ordering
// holds nothing back.
type Ordering struct {
	clock      clock.Clock
	mu         sync.Mutex
	terminated map[string]chan struct{}
	prereqs    map[string][]chan struct{}
}

// NewOrdering returns the Ordering of pod's running containers, or nil when
// pod is nil or has no sidecar.
func NewOrdering(pod *v1.Pod, running []string, clk clock.Clock) *Ordering {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	o := &Ordering{clock: clk, terminated: map[string]chan struct{}{}, prereqs: map[string][]chan struct{}{}}
	isRunning := map[string]bool{}
	for _, n := range running {
		isRunning[n] = true
	}
	done := func(name string) chan struct{} {
		ch := make(chan struct{})
		if !isRunning[name] {
			close(ch) // nothing waits for what does not run
		}
		o.terminated[name] = ch
		return ch
	}
	var regular []chan struct{}
	for _, c := range pod.Spec.Containers {
		regular = append(regular, done(c.Name))
	}
	later := ""
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		done(c.Name)
		if !podutil.IsRestartableInitContainer(c) {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], regular...)
		if later != "" {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], o.terminated[later])
		}
		later = c.Name
	}
	return o
}

func hasSidecar(pod *v1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if podutil.IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// WaitForTurn waits until the containers name waits for are stopped, for
// at most grace seconds on the clock (or until ctx ends), and returns how
// long it waited.
func (o *Ordering) WaitForTurn(ctx context.Context, name string, grace int64) time.Duration {
	if o == nil || grace <= 0 || len(o.prereqs[name]) == 0 {
		return 0
	}
	start := o.clock.Now()
	t := o.clock.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-t.C():
			return o.clock.Since(start)
		case <-ctx.Done():
			return o.clock.Since(start)
		}
	}
	return o.clock.Since(start)
}

// Terminated tells the containers waiting for name that it is stopped.
func (o *Ordering) Terminated(name string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch, ok := o.terminated[name]; ok {
		close(ch)
		delete(o.terminated, name)
	}
}

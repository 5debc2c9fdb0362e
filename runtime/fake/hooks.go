package fake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// HookRun records one lifecycle hook the runtime ran.
type HookRun struct {
	PodUID    types.UID
	Container string
	// Hook is "PostStart" or "PreStop".
	Hook string
	// Err is the hook's error, nil if it passed (or, for a preStop hook,
	// ran past the grace period).
	Err  error
	Time time.Time
}

// Hooks returns the lifecycle hooks run so far, in the order they ended.
func (r *Runtime) Hooks() []HookRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hookRuns)
}

func (r *Runtime) recordHook(uid types.UID, name, hook string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hookRuns = append(r.hookRuns, HookRun{PodUID: uid, Container: name, Hook: hook, Err: err, Time: r.clock.Now()})
}

// RecordsEvents reports whether Config.Recorder is set.
func (r *Runtime) RecordsEvents() bool { return r.rec != nil }

// containerEvent records an event about container name of pod; nothing
// for a pod without such a container (an orphan's).
func (r *Runtime) containerEvent(pod *v1.Pod, name, eventType, reason, msgFmt string, args ...any) {
	if r.rec == nil {
		return
	}
	if err := runtime.RecordEvent(r.rec, runtime.ContainerRef(pod, name), eventType, reason, msgFmt, args...); err != nil {
		r.log.Error(err, "Cannot record event", "reason", reason)
	}
}

// podEvent records an event about pod.
func (r *Runtime) podEvent(pod *v1.Pod, eventType, reason, msgFmt string, args ...any) {
	if r.rec == nil || pod == nil {
		return
	}
	if err := runtime.RecordEvent(r.rec, pod, eventType, reason, msgFmt, args...); err != nil {
		r.log.Error(err, "Cannot record event", "reason", reason)
	}
}

// podIP is the IP of pod's newest sandbox, where an httpGet hook without a
// host goes.
func (r *Runtime) podIP(_ context.Context, pod *v1.Pod) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[pod.UID]
	if !ok {
		return "", nil
	}
	if s := p.newestSandbox(); s != nil && len(s.ips) > 0 {
		return s.ips[0], nil
	}
	return "", nil
}

// stopSpec is what stopping a container needs of its spec, kept with the
// container as the CRI keeps it in annotations: its name, ports and preStop
// hook.
func stopSpec(c *v1.Container) *v1.Container {
	out := &v1.Container{Name: c.Name, Ports: slices.Clone(c.Ports)}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		out.Lifecycle = &v1.Lifecycle{PreStop: c.Lifecycle.PreStop.DeepCopy()}
	}
	return out
}

// hookPod is pod, or for an orphan a pod with only the identity the
// runtime knows, for the hooks' messages.
func hookPod(pod *v1.Pod, p *podState) *v1.Pod {
	if pod != nil {
		return pod
	}
	o := &v1.Pod{}
	o.Name, o.Namespace, o.UID = p.name, p.namespace, p.uid
	return o
}

// preStop records the Killing event of each of ctrs and runs their preStop
// hooks, in parallel as the kubelet's kills, each within grace; it returns
// the grace period left for each container's TERM. ctrs' specs must not
// change meanwhile (they do not: a container's spec is set once).
func (r *Runtime) preStop(ctx context.Context, pod *v1.Pod, p *podState, ctrs []*container, msgs []string, grace int64) []int64 {
	left := make([]int64, len(ctrs))
	var wg sync.WaitGroup
	for i, c := range ctrs {
		left[i] = grace
		msg := msgs[i]
		if msg == "" {
			msg = "Stopping container " + c.name
		}
		r.containerEvent(pod, c.name, v1.EventTypeNormal, runtime.EventKilling, "%s", msg)
		r.mu.Lock()
		run := c.spec != nil && c.spec.Lifecycle != nil && c.running()
		r.mu.Unlock()
		if !run {
			continue
		}
		wg.Go(func() {
			hp := hookPod(pod, p)
			l, failed, hmsg := r.hooks.PreStop(ctx, c.id, hp, c.spec, grace)
			left[i] = l
			var err error
			if failed {
				err = fmt.Errorf("%s", hmsg)
				r.containerEvent(pod, c.name, v1.EventTypeWarning, runtime.EventFailedPreStopHook, "PreStopHook failed")
			}
			r.recordHook(p.uid, c.name, "PreStop", err)
		})
	}
	wg.Wait()
	return left
}

// postStart runs c's postStart hook in ctr; on failure it kills ctr and
// returns the hook's message and an error wrapping
// runtime.ErrPostStartHook.
func (r *Runtime) postStart(ctx context.Context, pod *v1.Pod, p *podState, c *v1.Container, ctr *container) (string, error) {
	msg, err := r.hooks.Run(ctx, ctr.id, pod, c, c.Lifecycle.PostStart)
	r.recordHook(p.uid, c.Name, "PostStart", err)
	if err == nil {
		return "", nil
	}
	r.containerEvent(pod, c.Name, v1.EventTypeWarning, runtime.EventFailedPostStartHook, "PostStartHook failed")
	grace := runtime.EffectiveGracePeriod(pod, nil)
	if kerr := r.stopContainers(ctx, pod, p, []*container{ctr}, []string{"FailedPostStartHook"}, grace)[0]; kerr != nil {
		r.log.Error(kerr, "Cannot kill container after its postStart hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name)
	}
	return msg, fmt.Errorf("%w: %s", runtime.ErrPostStartHook, strings.TrimSpace(msg))
}

package procruntime

import (
	"context"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// SyncPod implements runtime.Runtime with the shared planner: it kills what
// the plan says to kill, makes a pretend sandbox, then starts containers.
func (r *Runtime) SyncPod(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, _ []v1.Secret, backoff *runtime.Backoff) runtime.PodSyncResult {
	var res runtime.PodSyncResult
	if st == nil {
		st = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	a := runtime.ComputePodActions(pod, st)
	grace := time.Duration(runtime.EffectiveGracePeriod(pod, nil)) * time.Second

	if a.KillPod {
		step := res.NewStep(runtime.KillPodSandbox, string(pod.UID))
		if err := r.KillPod(ctx, pod, runtime.Pod{ID: pod.UID}, nil); err != nil {
			step.Fail(runtime.ErrKillPodSandbox, err.Error())
			return res
		}
		if !a.CreateSandbox {
			return res
		}
	}
	for id, k := range a.ContainersToKill {
		step := res.NewStep(runtime.KillContainer, k.Name)
		if c := r.find(pod, id.ID); c != nil && c.state == runtime.ContainerStateRunning {
			if err := r.stop(ctx, c, grace); err != nil {
				step.Fail(runtime.ErrKillContainer, err.Error())
			}
		}
	}
	if a.CreateSandbox {
		step := res.NewStep(runtime.CreatePodSandbox, string(pod.UID))
		r.mu.Lock()
		p, ok := r.pods[pod.UID]
		if !ok {
			p = &procPod{uid: pod.UID, name: pod.Name, namespace: pod.Namespace}
			r.pods[pod.UID] = p
		}
		r.seq++
		p.sandbox = &runtime.SandboxStatus{
			ID: "sandbox-" + strconv.Itoa(r.seq), State: runtime.SandboxStateReady, Attempt: a.Attempt,
			CreatedAt: r.cfg.Clock.Now(), IPs: []string{"127.0.0.1"}, HostNetwork: pod.Spec.HostNetwork,
		}
		r.mu.Unlock()
		_ = step
		// A fresh sandbox starts from a status without the old containers'
		// sandbox, as the planner assumed.
	}
	for _, i := range a.EphemeralContainersToStart {
		ec := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		r.start(ctx, pod, &ec, st, backoff, res.NewStep(runtime.StartContainer, ec.Name))
	}
	for _, i := range a.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		step := res.NewStep(runtime.StartContainer, c.Name)
		r.start(ctx, pod, c, st, backoff, step)
		if step.Error != nil && !podutil.IsRestartableInitContainer(c) {
			return res
		}
	}
	for _, i := range a.ContainersToStart {
		c := &pod.Spec.Containers[i]
		r.start(ctx, pod, c, st, backoff, res.NewStep(runtime.StartContainer, c.Name))
	}
	return res
}

func (r *Runtime) find(pod *v1.Pod, id string) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pods[pod.UID]; ok {
		for _, c := range p.procs {
			if c.id == id {
				return c
			}
		}
	}
	return nil
}

package agent

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/status"
)

// Admission rejection reasons of the built-in handlers, shown in a rejected
// pod's status (aliases of package admission's).
const (
	ReasonOutOfPods                = admission.ReasonOutOfPods
	ReasonPrivilegedNotAllowed     = admission.ReasonPrivilegedNotAllowed
	ReasonHostNamespacesNotAllowed = admission.ReasonHostNamespacesNotAllowed
)

// HandlePodAdditions admits new pods and starts their workers, oldest first.
func (h *handler) HandlePodAdditions(_ context.Context, pods []*v1.Pod) {
	a := (*Agent)(h)
	podmanager.SortByCreation(pods)
	// Listed once per batch, on the first admission; what they use of the
	// node is summed once too (if a handler reads it) and kept up to date.
	// With usageOnly no handler reads the list itself, and the pods are
	// listed only when one reads the usage: an apiserver's watch brings
	// pods one per batch, and listing the node's pods for each costs
	// O(pods) on the sync loop per pod.
	var active []*v1.Pod
	var used *admission.Usage
	listed := false
	for _, pod := range pods {
		a.pods.AddOrUpdate(pod)
		run, mirror, wasMirror := a.pods.PodAndMirror(pod)
		if wasMirror {
			if run != nil {
				a.update(podworkers.SyncPodUpdate, run, mirror)
			}
			continue
		}
		if !a.workers.IsPodTerminationRequested(pod.UID) {
			switch {
			case listed:
			case a.usageOnly:
				// A fresh one for each pod until a handler reads it:
				// then the pods before this one are in the list.
				uid := pod.UID
				used = admission.NewUsageOf(func() []*v1.Pod { listed = true; return a.activePods(uid) })
			default:
				active, listed = a.activePods(pod.UID), true
				used = admission.NewUsage(active)
			}
			if r := admission.Admit(a.cfg.AdmitHandlers, &admission.PodAdmitAttributes{Pod: pod, OtherPods: active, OtherPodsUsage: used}); !r.Admit {
				a.reject(pod, r.Reason, r.Message)
				continue
			}
			if listed {
				if !a.usageOnly {
					active = append(active, pod)
				}
				used.Add(pod)
			}
		}
		a.update(podworkers.SyncPodCreate, run, mirror)
	}
}

// HandlePodUpdates hands changed pods (and graceful deletions) to their
// workers.
func (h *handler) HandlePodUpdates(_ context.Context, pods []*v1.Pod) {
	a := (*Agent)(h)
	for _, pod := range pods {
		a.pods.AddOrUpdate(pod)
		if run, mirror, _ := a.pods.PodAndMirror(pod); run != nil {
			a.update(podworkers.SyncPodUpdate, run, mirror)
		}
	}
}

// HandlePodRemoves kills pods gone from their source. A removed mirror pod
// only resyncs its static pod, whose mirror the status manager recreates.
func (h *handler) HandlePodRemoves(_ context.Context, pods []*v1.Pod) {
	a := (*Agent)(h)
	for _, pod := range pods {
		a.pods.Remove(pod)
		if podutil.IsMirrorPod(pod) {
			if run, _, _ := a.pods.PodAndMirror(pod); run != nil {
				a.update(podworkers.SyncPodUpdate, run, nil)
			}
			continue
		}
		if err := a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod,
			KillPodOptions: &podworkers.KillPodOptions{}}); err != nil {
			a.log.Error(err, "Cannot kill removed pod", "pod", podutil.FullName(pod))
		}
	}
}

// HandlePodReconcile stores pods whose status alone changed in the
// apiserver and has the status manager send its status again where
// another writer changed what the agent owns; a pod the apiserver reports terminal (evicted elsewhere) is
// synced so its worker can stop it, and one whose readiness gates' conditions
// changed (set by controllers) is synced so its Ready condition follows
// them, as the kubelet's.
func (h *handler) HandlePodReconcile(_ context.Context, pods []*v1.Pod) {
	a := (*Agent)(h)
	for _, pod := range pods {
		a.pods.AddOrUpdate(pod)
		if podutil.IsMirrorPod(pod) {
			continue
		}
		// Another writer (the node lifecycle controller's Ready False)
		// changed what the agent owns: the agent's status goes again.
		a.status.ReconcileAPIPod(pod)
		if p := pod.Status.Phase; p == v1.PodFailed || p == v1.PodSucceeded || status.NeedToReconcilePodReadiness(pod) {
			a.update(podworkers.SyncPodSync, pod, a.pods.MirrorOf(pod))
		}
	}
}

// HandlePodSyncs resyncs pods due in the work queue or changed on the
// runtime.
func (h *handler) HandlePodSyncs(_ context.Context, pods []*v1.Pod) {
	a := (*Agent)(h)
	for _, pod := range pods {
		if run, mirror, _ := a.pods.PodAndMirror(pod); run != nil {
			a.update(podworkers.SyncPodSync, run, mirror)
		}
	}
}

// HandlePodCleanups is housekeeping: it reconciles the workers with the
// desired pods, restarts desired pods the workers have forgotten (a UID
// created again), kills runtime pods nobody wants, and drops what is kept
// for pods that are gone.
func (h *handler) HandlePodCleanups(ctx context.Context) error {
	a := (*Agent)(h)
	desired := a.pods.Pods()
	known := a.workers.SyncKnownPods(desired)

	keep := make(map[types.UID]bool, len(desired)+len(known))
	for uid := range known {
		keep[uid] = true
	}
	for _, pod := range desired {
		keep[pod.UID] = true
		if _, ok := known[pod.UID]; ok || a.isTerminal(pod) {
			continue
		}
		a.update(podworkers.SyncPodCreate, pod, a.pods.MirrorOf(pod))
	}

	running, err := a.cfg.Runtime.GetPods(ctx, false)
	if err != nil {
		return fmt.Errorf("list running pods: %w", err)
	}
	for _, rp := range running {
		if keep[rp.ID] {
			continue
		}
		a.log.V(1).Info("Killing orphaned runtime pod", "uid", rp.ID, "pod", rp.Name, "namespace", rp.Namespace)
		if err := a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: rp,
			KillPodOptions: &podworkers.KillPodOptions{}}); err != nil {
			a.log.Error(err, "Cannot kill orphaned runtime pod", "uid", rp.ID)
		}
		keep[rp.ID] = true
	}
	a.status.RemoveOrphanedStatuses(keep)
	a.prober.CleanupPods(keep)
	a.backoff.GC()
	return nil
}

// PodCouldHaveRunningContainers implements status.PodDeletionSafety.
func (h *handler) PodCouldHaveRunningContainers(pod *v1.Pod) bool {
	return (*Agent)(h).workers.CouldHaveRunningContainers(pod.UID)
}

func (a *Agent) update(t podworkers.UpdateType, pod, mirror *v1.Pod) {
	if err := a.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: t, Pod: pod, MirrorPod: mirror}); err != nil {
		a.log.Error(err, "Cannot update pod worker", "pod", podutil.FullName(pod))
	}
}

// isTerminal reports whether the agent's status of pod (or, before the agent
// has one, the pod's own) is Succeeded or Failed.
func (a *Agent) isTerminal(pod *v1.Pod) bool {
	phase := pod.Status.Phase
	if st, ok := a.status.SharedPodStatus(pod.UID); ok {
		phase = st.Phase
	}
	return phase == v1.PodSucceeded || phase == v1.PodFailed
}

// activePods lists the pods that hold a slot on the node: desired, not
// terminal and not known terminated, other than except.
func (a *Agent) activePods(except types.UID) []*v1.Pod {
	pods := a.pods.Pods()
	out := pods[:0]
	for _, p := range pods {
		if p.UID != except && !a.isTerminal(p) && !a.workers.IsPodKnownTerminated(p.UID) {
			out = append(out, p)
		}
	}
	return out
}

// reject fails a pod that admission refused; its worker never starts.
func (a *Agent) reject(pod *v1.Pod, reason, msg string) {
	a.log.Info("Pod rejected", "pod", podutil.FullName(pod), "reason", reason, "message", msg)
	if a.cfg.Recorder != nil {
		a.cfg.Recorder.Eventf(pod, v1.EventTypeWarning, reason, "%s", msg)
	}
	st := pod.Status.DeepCopy()
	st.Phase, st.Reason, st.Message = v1.PodFailed, reason, "Pod was rejected: "+msg
	a.status.SetPodStatus(pod, *st)
}

package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The correctness rows, each a pod on node scripted by sim's annotations
// (which kwok ignores).
const (
	rowProbe    = "readiness probe: Ready only once it passes (ready-after 5s)"
	rowBackoff  = "restart back-off: a container exiting 1s after each start (45s)"
	rowGraceful = "graceful termination: containers stopped and reported before the pod is deleted"
)

func correctness(ctx context.Context, cs kubernetes.Interface, podInf cache.SharedIndexInformer, node string, logf func(string, ...any)) map[string]string {
	out := map[string]string{}
	if err := ensureNamespace(ctx, cs, "correct"); err != nil {
		out["setup"] = err.Error()
		return out
	}
	get := func(name string) *v1.Pod {
		obj, ok, _ := podInf.GetStore().GetByKey("correct/" + name)
		if !ok {
			return nil
		}
		return obj.(*v1.Pod)
	}
	mk := func(name string, ann map[string]string, probe bool) error {
		c := v1.Container{Name: "app", Image: "registry.local/app:1", Ports: []v1.ContainerPort{{ContainerPort: 8080}}}
		if probe {
			c.ReadinessProbe = &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
				HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
		}
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{c}, TerminationGracePeriodSeconds: ptr.To[int64](10)}}
		_, err := cs.CoreV1().Pods("correct").Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	// Seen on the informer: crash's waiting reasons, graceful's last
	// state before it was deleted.
	var mu sync.Mutex
	reasons := map[string]bool{}
	var gracefulLast *v1.Pod
	var gracefulGone time.Time
	h, _ := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			p := obj.(*v1.Pod)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case p.Namespace != "correct":
			case p.Name == "crash":
				for _, st := range p.Status.ContainerStatuses {
					if st.State.Waiting != nil {
						reasons[st.State.Waiting.Reason] = true
					}
				}
			case p.Name == "graceful":
				gracefulLast = p
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*v1.Pod); ok && p.Namespace == "correct" && p.Name == "graceful" {
				mu.Lock()
				gracefulGone = time.Now()
				mu.Unlock()
			}
		},
	})
	defer func() { _ = podInf.RemoveEventHandler(h) }()

	for _, err := range []error{
		mk("probe", map[string]string{"sim.nodekit.io/ready-after": "app=5s"}, true),
		mk("crash", map[string]string{"sim.nodekit.io/exit": "app=1s:1"}, false),
		mk("graceful", nil, false),
	} {
		if err != nil {
			out["setup"] = err.Error()
			return out
		}
	}
	began := time.Now()
	// probe
	_ = waitFor(ctx, 60*time.Second, "probe pod Ready", logf, func() (bool, string) {
		p := get("probe")
		return p != nil && podReady(p), "not Ready"
	})
	if p := get("probe"); p == nil || !podReady(p) {
		out[rowProbe] = "no: never Ready in 60s"
	} else {
		var started, ready time.Time
		for _, st := range p.Status.ContainerStatuses {
			if st.State.Running != nil {
				started = st.State.Running.StartedAt.Time
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady {
				ready = c.LastTransitionTime.Time
			}
		}
		d := ready.Sub(started)
		verdict := "yes"
		if d < 4*time.Second {
			verdict = "no"
		}
		out[rowProbe] = fmt.Sprintf("%s: Ready %.0fs after the container started", verdict, d.Seconds())
	}
	// back-off: what crash did in its first 45s
	sleep(ctx, time.Until(began.Add(45*time.Second)))
	if p := get("crash"); p != nil && len(p.Status.ContainerStatuses) > 0 {
		st := p.Status.ContainerStatuses[0]
		mu.Lock()
		crashLoop := reasons["CrashLoopBackOff"]
		mu.Unlock()
		verdict := "no"
		if st.RestartCount >= 2 && st.RestartCount <= 5 && crashLoop {
			verdict = "yes"
		}
		out[rowBackoff] = fmt.Sprintf("%s: %d restarts, CrashLoopBackOff seen: %v", verdict, st.RestartCount, crashLoop)
	} else {
		out[rowBackoff] = "no: no container status"
	}
	// graceful termination
	if p := get("graceful"); p == nil || p.Status.Phase != v1.PodRunning {
		out[rowGraceful] = "no: pod not Running"
	} else {
		del := time.Now()
		_ = cs.CoreV1().Pods("correct").Delete(ctx, "graceful", metav1.DeleteOptions{})
		_ = waitFor(ctx, 60*time.Second, "graceful pod gone", logf, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return !gracefulGone.IsZero(), "not deleted"
		})
		mu.Lock()
		last, gone := gracefulLast, gracefulGone
		mu.Unlock()
		stopped := last != nil && last.DeletionTimestamp != nil && len(last.Status.ContainerStatuses) > 0
		if stopped {
			for _, st := range last.Status.ContainerStatuses {
				if st.State.Terminated == nil {
					stopped = false
				}
			}
		}
		switch {
		case gone.IsZero():
			out[rowGraceful] = "no: not deleted in 60s"
		case stopped:
			out[rowGraceful] = fmt.Sprintf("yes: containers terminated (%s), pod deleted %.1fs after the request",
				last.Status.ContainerStatuses[0].State.Terminated.Reason, gone.Sub(del).Seconds())
		default:
			out[rowGraceful] = fmt.Sprintf("no: deleted %.1fs after the request with its containers still running", gone.Sub(del).Seconds())
		}
	}
	_ = cs.CoreV1().Pods("correct").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	return out
}

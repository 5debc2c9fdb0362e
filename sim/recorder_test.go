package sim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/sim"
)

// The agents' events are in the event log, with their node, and in the
// store's Events, as a controller test reads them.
func TestAgentEventsAreRecorded(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		spec func(*v1.PodSpec)
		// want are "<type> <reason> <fieldPath>: <message prefix>".
		want []string
	}{
		{"a container failing its liveness probe is killed", map[string]string{sim.ReadyAfterAnnotation: "1h"},
			func(s *v1.PodSpec) {
				s.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"alive"}}}, PeriodSeconds: 5}
			},
			[]string{"Warning Unhealthy spec.containers{app}: Liveness probe failed",
				"Normal Killing spec.containers{app}: Container app failed liveness probe, will be restarted"}},
		{"a pod beyond the node's cpu is rejected", nil,
			func(s *v1.PodSpec) {
				s.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")}
			},
			[]string{"Warning OutOfcpu : Node didn't have enough resource: cpu"}},
		{"a pod past its active deadline is stopped", nil,
			func(s *v1.PodSpec) { s.ActiveDeadlineSeconds = ptr.To[int64](30) },
			[]string{"Normal DeadlineExceeded : Pod was active on the node longer than the specified deadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t, sim.Config{}, "n1")
			run(t, cl, time.Second)
			p := pod("p", tt.ann)
			tt.spec(&p.Spec)
			create(t, cl, p)
			run(t, cl, 2*time.Minute)
			var logged []string
			for _, e := range cl.Events() {
				if e.Object == "default/p" && e.Source != "" {
					logged = append(logged, e.String())
				}
			}
			list, err := cl.Store().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=p"})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				head, msg, _ := strings.Cut(w, ": ")
				f := strings.Fields(head)
				typ, reason, path := f[0], f[1], ""
				if len(f) > 2 {
					path = f[2]
				}
				src := "n1"
				if path != "" {
					src += ", " + path
				}
				line := "Pod default/p event " + typ + " " + reason + " (" + src + "): " + msg
				if !containsPrefix(logged, line) {
					t.Errorf("no %q in the log: %q", line, logged)
				}
				found := false
				for _, e := range list.Items {
					if e.Type == typ && e.Reason == reason && e.InvolvedObject.FieldPath == path && strings.HasPrefix(e.Message, msg) {
						found = true
						if e.Source != (v1.EventSource{Component: "kubelet", Host: "n1"}) || e.Count < 1 || e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.UID == "" {
							t.Errorf("Event %s: source %+v, count %d, object %+v", e.Name, e.Source, e.Count, e.InvolvedObject)
						}
					}
				}
				if !found {
					t.Errorf("no Event %s %s %s %q in the store: %+v", typ, reason, path, msg, list.Items)
				}
			}
		})
	}
}

// containsPrefix: a log line (without its time) starts with prefix.
func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if _, rest, _ := strings.Cut(l, " "); strings.HasPrefix(rest, prefix) {
			return true
		}
	}
	return false
}

// An event repeated is one Event with a count, as client-go's recorder
// sends it. A readiness probe's failures stay out of the log: their
// number around a container's start races with its status.
func TestRepeatedEventsAreCounted(t *testing.T) {
	cl := newCluster(t, sim.Config{}, "n1")
	run(t, cl, time.Second)
	p := pod("p", map[string]string{sim.ReadyAfterAnnotation: "1h"})
	p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"ready"}}}, PeriodSeconds: 10}
	create(t, cl, p)
	run(t, cl, 5*time.Minute)
	for _, e := range cl.Events() {
		if e.Object == "default/p" && e.Reason == "Unhealthy" {
			t.Fatalf("a readiness probe's failure in the log: %v", e)
		}
	}
	list, err := cl.Store().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Unhealthy,involvedObject.fieldPath=spec.containers{app}"})
	if err != nil {
		t.Fatal(err)
	}
	// A failure every 10s for 5 minutes, and some at the start.
	if len(list.Items) != 1 || list.Items[0].Count < 30 || list.Items[0].Count > 35 {
		t.Fatalf("%d Unhealthy Events (%+v), want one counting about 30", len(list.Items), list.Items)
	}
	ev := list.Items[0]
	if !strings.HasPrefix(ev.Message, "Readiness probe failed") || ev.LastTimestamp.Sub(ev.FirstTimestamp.Time) < 4*time.Minute {
		t.Errorf("%q first %v, last %v: want readiness failures nearly 5 minutes apart", ev.Message, ev.FirstTimestamp, ev.LastTimestamp)
	}
	if got, err := cl.Store().Events("default").Get(context.Background(), ev.Name, metav1.GetOptions{}); err != nil || got.Count != ev.Count {
		t.Errorf("Get %s: %v, %v", ev.Name, got, err)
	}
}

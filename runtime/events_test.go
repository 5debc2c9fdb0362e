package runtime

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
)

func TestContainerRef(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u"
	pod.Spec.Containers = []v1.Container{{Name: "app"}}
	pod.Spec.InitContainers = []v1.Container{{Name: "init"}}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg"}}}
	for name, want := range map[string]string{
		"app": "spec.containers{app}", "init": "spec.initContainers{init}", "dbg": "spec.ephemeralContainers{dbg}", "none": "",
	} {
		ref := ContainerRef(pod, name)
		got := ""
		if ref != nil {
			got = ref.FieldPath
			if ref.Kind != "Pod" || ref.Name != "p" || ref.Namespace != "ns" || ref.UID != "u" {
				t.Errorf("%s: ref %+v", name, ref)
			}
		}
		if got != want {
			t.Errorf("%s: field path %q, want %q", name, got, want)
		}
	}
	if ContainerRef(nil, "app") != nil {
		t.Error("nil pod has a ref")
	}
}

type panicky struct{}

func (panicky) Eventf(apiruntime.Object, string, string, string, ...any) { panic("boom") }

func TestRecordEventRecoversAndSkipsNil(t *testing.T) {
	if err := RecordEvent(panicky{}, &v1.Pod{}, v1.EventTypeNormal, "R", "m"); err == nil {
		t.Fatal("a panicking recorder gave no error")
	}
	var ref *v1.ObjectReference
	if err := RecordEvent(panicky{}, ref, v1.EventTypeNormal, "R", "m"); err != nil {
		t.Fatalf("a nil reference reached the recorder: %v", err)
	}
	if err := RecordEvent(nil, &v1.Pod{}, v1.EventTypeNormal, "R", "m"); err != nil {
		t.Fatal(err)
	}
}

func TestKillMessage(t *testing.T) {
	ctx := context.Background()
	if KillMessage(ctx) != "" {
		t.Fatal("message without one set")
	}
	if got := KillMessage(WithKillMessage(ctx, "Container c failed liveness probe")); got != "Container c failed liveness probe" {
		t.Fatalf("KillMessage = %q", got)
	}
}

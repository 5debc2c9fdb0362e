package runtime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records an event about an object; client-go's
// record.EventRecorder satisfies it as it is.
type EventRecorder interface {
	Eventf(object apiruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// EventSource is implemented by runtimes that record the kubelet's
// runtime-manager events (the Event* reasons) on the pods they run. A
// caller that kills a container for a reason of its own (a failed
// liveness probe) then leaves the Killing event to the runtime and passes
// its message with WithKillMessage, so the event is recorded once.
type EventSource interface {
	// RecordsEvents reports whether the runtime has a recorder.
	RecordsEvents() bool
}

// The reasons of the events a runtime records, as the kubelet's
// (pkg/kubelet/events).
const (
	EventPulling             = "Pulling"
	EventPulled              = "Pulled"
	EventFailed              = "Failed" // a pull, a create or a start failed
	EventInspectFailed       = "InspectFailed"
	EventErrImageNeverPull   = "ErrImageNeverPull"
	EventBackOff             = "BackOff" // pull or crash-loop back-off
	EventCreated             = "Created"
	EventStarted             = "Started"
	EventKilling             = "Killing"
	EventFailedPostStartHook = "FailedPostStartHook"
	EventFailedPreStopHook   = "FailedPreStopHook"
	EventSandboxChanged      = "SandboxChanged"
	EventFailedCreateSandbox = "FailedCreatePodSandBox"
	EventFailedKillPod       = "FailedKillPod"
	EventExceededGracePeriod = "ExceededGracePeriod"
)

// ContainerRef is the reference events about container name of pod carry,
// as the kubelet's: the pod with the field path spec.containers{name},
// spec.initContainers{name} or spec.ephemeralContainers{name}. It is nil
// when pod has no container of that name.
func ContainerRef(pod *v1.Pod, name string) *v1.ObjectReference {
	if pod == nil {
		return nil
	}
	path := ""
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			path = "spec.containers{" + name + "}"
		}
	}
	for i := range pod.Spec.InitContainers {
		if path == "" && pod.Spec.InitContainers[i].Name == name {
			path = "spec.initContainers{" + name + "}"
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if path == "" && pod.Spec.EphemeralContainers[i].Name == name {
			path = "spec.ephemeralContainers{" + name + "}"
		}
	}
	if path == "" {
		return nil
	}
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: path}
}

// RecordEvent records an event on r, if r is not nil and object is not a
// nil pointer, and turns a panic of the recorder into an error, so a
// caller's faulty recorder cannot take down a sync.
func RecordEvent(r EventRecorder, object apiruntime.Object, eventtype, reason, messageFmt string, args ...any) (err error) {
	switch o := object.(type) {
	case nil:
		return nil
	case *v1.ObjectReference:
		if o == nil {
			return nil
		}
	case *v1.Pod:
		if o == nil {
			return nil
		}
	}
	if r == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("event recorder panicked: %v", p)
		}
	}()
	r.Eventf(object, eventtype, reason, messageFmt, args...)
	return nil
}

type killMessageKey struct{}

// WithKillMessage returns ctx carrying msg as the message of the Killing
// events a runtime records for the containers KillPod stops under ctx
// (default "Stopping container <name>"), as the kubelet's
// "Container c failed liveness probe, will be restarted".
func WithKillMessage(ctx context.Context, msg string) context.Context {
	return context.WithValue(ctx, killMessageKey{}, msg)
}

// KillMessage is the message WithKillMessage put in ctx, or "".
func KillMessage(ctx context.Context) string {
	s, _ := ctx.Value(killMessageKey{}).(string)
	return s
}

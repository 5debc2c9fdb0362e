package sim

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// recorder records the events of one component (a node's agent, the
// taint eviction controller) in the store and the cluster's event log.
// It satisfies podconfig.EventRecorder (and client-go's
// record.EventRecorder's Eventf).
type recorder struct {
	c *Cluster
	// source is the component: "kubelet" and its node for the agents.
	source v1.EventSource
	// next, if set, is told too (an agent.Config.Recorder of the test's).
	next interface {
		Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
	}
}

// Eventf records an event about obj, as client-go's record.EventRecorder.
func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.next != nil {
		r.next.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
	ref, err := refOf(obj)
	if err != nil {
		return // client-go's recorder drops it too
	}
	r.c.recordEvent(ref, eventtype, reason, fmt.Sprintf(messageFmt, args...), r.source)
}

// runtimeEvents takes a node runtime's events (the kubelet's
// runtime-manager events) to the node's current agent's recorder, as the
// kubelet's runtime manager records on the kubelet's, and to next (a
// fake.Config.Recorder of the test's), if set.
type runtimeEvents struct {
	n    *Node
	next interface {
		Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
	}
}

// Eventf records an event about obj.
func (r *runtimeEvents) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.next != nil {
		r.next.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
	r.n.mu.Lock()
	rec := r.n.rec
	r.n.mu.Unlock()
	if rec != nil {
		rec.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

// refOf is a reference to obj, as client-go's reference.GetReference for
// the objects nodekit records events about: pods, Nodes and references
// (a container's).
func refOf(obj runtime.Object) (*v1.ObjectReference, error) {
	switch o := obj.(type) {
	case *v1.ObjectReference:
		return o.DeepCopy(), nil
	case *v1.Pod:
		return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}, nil
	case *v1.Node:
		return &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	kind := gvk.Kind
	if kind == "" {
		t := fmt.Sprintf("%T", obj)
		kind = t[strings.LastIndex(t, ".")+1:]
	}
	return &v1.ObjectReference{Kind: kind, APIVersion: gvk.GroupVersion().String(), Namespace: m.GetNamespace(),
		Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}, nil
}

// recordEvent adds a recorded event to the store's Events and the log,
// where its Source is the node of an agent's event, else the component;
// but for a readiness probe's, which only the store gets (see
// readinessProbeEvent).
func (c *Cluster) recordEvent(ref *v1.ObjectReference, eventtype, reason, message string, src v1.EventSource) {
	c.store.mu.Lock()
	c.store.recordLocked(ref, eventtype, reason, message, src)
	c.store.mu.Unlock()
	if readinessProbeEvent(reason, message) {
		return
	}
	source := src.Host
	if source == "" {
		source = src.Component
	}
	object := ref.Name
	if ref.Namespace != "" {
		object = ref.Namespace + "/" + ref.Name
	}
	what := "event " + eventtype + " " + reason + " (" + source
	if ref.FieldPath != "" {
		what += ", " + ref.FieldPath
	}
	what += "): " + message
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noLog {
		return
	}
	c.recorded = append(c.recorded, Event{Time: c.clock.Now(), Kind: ref.Kind, Object: object, What: what,
		Type: eventtype, Reason: reason, Message: message, FieldPath: ref.FieldPath, Source: source})
	if c.vc == nil {
		c.flushLocked()
	}
}

// readinessProbeEvent: an event of a readiness probe (Unhealthy,
// ProbeWarning), which the log leaves out. As the kubelet's, the agent's
// prober runs a readiness probe at once whenever a status is made for a
// container not ready yet, and whether that probe sees the container's
// new status races with the status being stored; so how many such probes
// fail, and in which instant, differs between runs of a seed (by one
// around a container's start), which the log must not.
func readinessProbeEvent(reason, message string) bool {
	return (reason == "Unhealthy" || reason == "ProbeWarning") && strings.HasPrefix(message, "Readiness probe")
}

package sim

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// recorder records the events of one component (the taint eviction
// controller) in the cluster's event log.
type recorder struct {
	c *Cluster
	// source is the component's name.
	source string
}

// Eventf records an event about obj, as client-go's record.EventRecorder.
func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	ref, err := refOf(obj)
	if err != nil {
		return // client-go's recorder drops it too
	}
	r.c.recordEvent(ref, eventtype, reason, fmt.Sprintf(messageFmt, args...), r.source)
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

// recordEvent adds a recorded event to the log.
func (c *Cluster) recordEvent(ref *v1.ObjectReference, eventtype, reason, message, source string) {
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

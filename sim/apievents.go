package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

var eventsResource = schema.GroupResource{Resource: "events"}

// recordLocked stores a recorded event as client-go's recorder sends it:
// a new Event named <object>.<nanoseconds>, or the Count and LastTimestamp
// of the same one (same source, object, container, type, reason and
// message) raised; s.mu is held. Its UIDs come from a random source of
// their own, so that events recorded in any order leave the pods' UIDs and
// generated names as they were.
func (s *Store) recordLocked(ref *v1.ObjectReference, eventtype, reason, message string, source v1.EventSource) {
	now := metav1.NewTime(s.clock.Now())
	dedup := strings.Join([]string{source.Component, source.Host, ref.Kind, ref.Namespace, ref.Name,
		ref.FieldPath, string(ref.UID), ref.APIVersion, eventtype, reason, message}, "\x00")
	if k, ok := s.eventKeys[dedup]; ok {
		if old, ok := s.events[k]; ok {
			ev := old.DeepCopy()
			ev.Count++
			ev.LastTimestamp = now
			s.bump(&ev.ObjectMeta)
			s.events[k] = ev
			s.notify(watch.Modified, old, ev)
			return
		}
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &v1.Event{
		InvolvedObject: *ref, Reason: reason, Message: message, Type: eventtype, Source: source,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: source.Component, ReportingInstance: source.Host,
	}
	// The name is the recorder's, made unique: one instant may see several.
	for t := now.UnixNano(); ; t++ {
		ev.Name = fmt.Sprintf("%s.%x", ref.Name, t)
		if _, taken := s.events[key{ns, ev.Name}]; !taken {
			break
		}
	}
	ev.Namespace = ns
	s.eventMeta(&ev.ObjectMeta)
	s.events[key{ns, ev.Name}] = ev
	s.eventKeys[dedup] = key{ns, ev.Name}
	s.notify(watch.Added, nil, ev)
}

// eventMeta is meta for Events, with their own random source.
func (s *Store) eventMeta(m *metav1.ObjectMeta) {
	s.metaFrom(s.eventRng, m)
	m.Generation = 0
}

func (s *Store) createEvent(ns string, event *v1.Event) (*v1.Event, error) {
	if event.Name == "" {
		return nil, apierrors.NewBadRequest("event: name is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{ns, event.Name}
	if _, ok := s.events[k]; ok {
		return nil, apierrors.NewAlreadyExists(eventsResource, event.Name)
	}
	ev := event.DeepCopy()
	ev.Namespace = ns
	s.eventMeta(&ev.ObjectMeta)
	s.events[k] = ev
	s.notify(watch.Added, nil, ev)
	return ev.DeepCopy(), nil
}

// eventFields are an Event's selectable fields, as the apiserver's.
type eventFields struct{ e *v1.Event }

func (f eventFields) Has(field string) bool {
	_, ok := f.value(field)
	return ok
}

func (f eventFields) Get(field string) string {
	v, _ := f.value(field)
	return v
}

func (f eventFields) value(field string) (string, bool) {
	e := f.e
	switch field {
	case "metadata.name":
		return e.Name, true
	case "metadata.namespace":
		return e.Namespace, true
	case "involvedObject.kind":
		return e.InvolvedObject.Kind, true
	case "involvedObject.namespace":
		return e.InvolvedObject.Namespace, true
	case "involvedObject.name":
		return e.InvolvedObject.Name, true
	case "involvedObject.uid":
		return string(e.InvolvedObject.UID), true
	case "involvedObject.apiVersion":
		return e.InvolvedObject.APIVersion, true
	case "involvedObject.resourceVersion":
		return e.InvolvedObject.ResourceVersion, true
	case "involvedObject.fieldPath":
		return e.InvolvedObject.FieldPath, true
	case "reason":
		return e.Reason, true
	case "reportingComponent":
		return e.ReportingController, true
	case "source":
		return e.Source.Component, true
	case "type":
		return e.Type, true
	}
	return "", false
}

func (s *Store) listEvents(ns string, opts metav1.ListOptions) (*v1.EventList, error) {
	ls, fs, err := selectors(opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &v1.EventList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rv, 10)}}
	for k, e := range s.events {
		if (ns == "" || k.namespace == ns) && (ls.Empty() || ls.Matches(labels.Set(e.Labels))) && (fs.Empty() || fs.Matches(eventFields{e})) {
			out.Items = append(out.Items, *e.DeepCopy())
		}
	}
	// In the order they were first recorded, as a list of them reads.
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := &out.Items[i], &out.Items[j]
		if !a.FirstTimestamp.Equal(&b.FirstTimestamp) {
			return a.FirstTimestamp.Before(&b.FirstTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// EventClient is the store's core/v1 Events of one namespace ("" for
// all): the agents' and the cluster's controllers' events, deduplicated as
// client-go's recorder does (Count, LastTimestamp) but without its spam
// filter and its aggregation of similar messages.
type EventClient struct {
	s         *Store
	namespace string
}

// Events returns the Event client of a namespace; "" lists all.
func (s *Store) Events(namespace string) *EventClient {
	return &EventClient{s: s, namespace: namespace}
}

// Get returns an Event.
func (c *EventClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*v1.Event, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	e, ok := c.s.events[key{nsOrDefault(c.namespace), name}]
	if !ok {
		return nil, apierrors.NewNotFound(eventsResource, name)
	}
	return e.DeepCopy(), nil
}

// List lists Events matching opts' label and field selectors (the
// apiserver's: involvedObject.kind, .namespace, .name, .uid, .apiVersion,
// .resourceVersion, .fieldPath, reason, reportingComponent, source, type,
// metadata.name, metadata.namespace), by when they were first recorded.
func (c *EventClient) List(_ context.Context, opts metav1.ListOptions) (*v1.EventList, error) {
	return c.s.listEvents(c.namespace, opts)
}

// Create creates an Event, for a controller under test that records its
// own.
func (c *EventClient) Create(_ context.Context, e *v1.Event, _ metav1.CreateOptions) (*v1.Event, error) {
	ns := nsOrDefault(c.namespace)
	if e.Namespace != "" && e.Namespace != ns {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return c.s.createEvent(ns, e)
}

package simclient

import (
	"cmp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// historySize is how many events of one resource a watch can resume
// from; from an older resourceVersion it gets 410 Gone and relists, as
// after etcd's compaction.
const historySize = 4096

type nsName struct{ namespace, name string }

// event is one change of a resource: the object after it (on Deleted,
// the last state with the deletion's resourceVersion) and before it.
type event struct {
	typ      watch.EventType
	obj, old runtime.Object
	rv       uint64
	// initialEnd marks a bookmark as the end of a watch-list's initial
	// events.
	initialEnd bool
}

// table holds one resource's objects, its recent events and its watches.
// Objects in it are never changed: a write stores a new one. The server's
// mu guards it.
type table struct {
	res      *resource
	objs     map[nsName]runtime.Object
	history  []event
	histFrom uint64 // events after this are all in history
	lastRV   uint64
	watchers map[*watcher]struct{}
}

func newTable(r *resource) *table {
	return &table{res: r, objs: map[nsName]runtime.Object{}, watchers: map[*watcher]struct{}{}}
}

func rvOf(o runtime.Object) uint64 {
	m, err := meta.Accessor(o)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}

func keyOf(o runtime.Object) nsName {
	m, _ := meta.Accessor(o)
	return nsName{m.GetNamespace(), m.GetName()}
}

// apply records a change and tells the watches.
func (t *table) apply(typ watch.EventType, obj, old runtime.Object) {
	k := keyOf(obj)
	if typ == watch.Deleted {
		delete(t.objs, k)
	} else {
		t.objs[k] = obj
	}
	ev := event{typ: typ, obj: obj, old: old, rv: rvOf(obj)}
	t.lastRV = max(t.lastRV, ev.rv)
	t.history = append(t.history, ev)
	if len(t.history) >= 2*historySize {
		t.histFrom = t.history[len(t.history)-historySize-1].rv
		t.history = slices.Clone(t.history[len(t.history)-historySize:])
	}
	for w := range t.watchers {
		w.send(ev)
	}
}

// filter is a list's or watch's selection.
type filter struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
	fieldsOf  func(runtime.Object) fields.Set
}

func (f *filter) matches(o runtime.Object) bool {
	if o == nil {
		return false
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return false
	}
	if f.namespace != "" && m.GetNamespace() != f.namespace {
		return false
	}
	if !f.labels.Empty() && !f.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return f.fields.Empty() || f.fields.Matches(f.fieldsOf(o))
}

// list returns the selected objects by namespace and name.
func (t *table) list(f *filter) []runtime.Object {
	var out []runtime.Object
	for _, o := range t.objs {
		if f.matches(o) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b runtime.Object) int {
		ka, kb := keyOf(a), keyOf(b)
		return cmp.Or(cmp.Compare(ka.namespace, kb.namespace), cmp.Compare(ka.name, kb.name))
	})
	return out
}

// objectMeta is the metadata of a stored object.
func objectMeta(o runtime.Object) metav1.Object {
	m, _ := meta.Accessor(o)
	return m
}

package nodetest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/node/nodetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func labeled(name, v string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"v": v}}}
}

// event is what a test reads of a watch event.
type event struct {
	Type  watch.EventType
	Name  string
	Label string
	Code  int32 // an Error event's
}

// drain reads what the watch has delivered so far; closed reports whether
// it ended.
func drain(w watch.Interface) (got []event, closed bool) {
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return got, true
			}
			e := event{Type: ev.Type}
			switch o := ev.Object.(type) {
			case *v1.Node:
				e.Name, e.Label = o.Name, o.Labels["v"]
			case *metav1.Status:
				e.Code = o.Code
			}
			got = append(got, e)
		default:
			return got, false
		}
	}
}

func TestNodeWatch(t *testing.T) {
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	}
	tests := []struct {
		name string
		// before runs before the watch opens and returns its options.
		before func(f *nodetest.Fake) metav1.ListOptions
		// after runs once it is open.
		after      func(f *nodetest.Fake)
		want       []event
		wantClosed bool
	}{
		{
			name: "a watch from now sends the selected Node first, then its changes",
			before: func(f *nodetest.Fake) metav1.ListOptions {
				f.PutNode(labeled("n1", "a"))
				f.PutNode(labeled("n2", "a"))
				return byName("n1")
			},
			after: func(f *nodetest.Fake) {
				f.PutNode(labeled("n1", "b"))
				f.PutNode(labeled("n2", "b"))
				f.Delete("nodes", "n1")
			},
			want: []event{{Type: watch.Added, Name: "n1", Label: "a"}, {Type: watch.Modified, Name: "n1", Label: "b"},
				{Type: watch.Deleted, Name: "n1", Label: "b"}},
		},
		{
			name: "a watch from a resource version replays what came after it",
			before: func(f *nodetest.Fake) metav1.ListOptions {
				f.PutNode(labeled("n1", "a"))
				n, _ := f.Node("n1")
				f.PutNode(labeled("n1", "b"))
				opts := byName("n1")
				opts.ResourceVersion = n.ResourceVersion
				return opts
			},
			want: []event{{Type: watch.Modified, Name: "n1", Label: "b"}},
		},
		{
			name: "a watch from a compacted resource version ends with 410 Gone",
			before: func(f *nodetest.Fake) metav1.ListOptions {
				f.PutNode(labeled("n1", "a"))
				n, _ := f.Node("n1")
				f.PutNode(labeled("n1", "b"))
				f.Compact()
				opts := byName("n1")
				opts.ResourceVersion = n.ResourceVersion
				return opts
			},
			want:       []event{{Type: watch.Error, Code: 410}},
			wantClosed: true,
		},
		{
			name:       "CloseWatches ends a watch without an error",
			before:     func(*nodetest.Fake) metav1.ListOptions { return byName("n1") },
			after:      func(f *nodetest.Fake) { f.CloseWatches() },
			wantClosed: true,
		},
		{
			name:       "EndWatches ends it with the error's status",
			before:     func(*nodetest.Fake) metav1.ListOptions { return byName("n1") },
			after:      func(f *nodetest.Fake) { f.EndWatches(apierrors.NewResourceExpired("too old resource version")) },
			want:       []event{{Type: watch.Error, Code: 410}},
			wantClosed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := nodetest.New()
			opts := tt.before(f)
			w, err := f.Nodes().Watch(t.Context(), opts)
			require.NoError(t, err)
			defer w.Stop()
			if tt.after != nil {
				tt.after(f)
			}
			got, closed := drain(w)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantClosed, closed, "closed")
			if closed {
				assert.Zero(t, f.Watches(), "open watches")
			}
		})
	}
}

func TestNodeWatchEndsWithItsContext(t *testing.T) {
	f := nodetest.New()
	ctx, cancel := context.WithCancel(t.Context())
	w, err := f.Nodes().Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, f.Watches())
	cancel()
	for range w.ResultChan() {
	}
	assert.Zero(t, f.Watches())
	assert.Equal(t, 1, f.Count("nodes", nodetest.VerbWatch, ""))
}

func TestNodeList(t *testing.T) {
	f := nodetest.New()
	f.PutNode(labeled("n1", "a"))
	f.PutNode(labeled("n2", "a"))
	list, err := f.Nodes().List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=n2", ResourceVersion: "0"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, "n2", list.Items[0].Name)
	assert.Equal(t, "2", list.ResourceVersion, "the latest resource version")
	_, err = f.Nodes().List(t.Context(), metav1.ListOptions{FieldSelector: "spec.unschedulable=true"})
	assert.True(t, apierrors.IsBadRequest(err), "a field other than metadata.name: %v", err)
	a := f.Actions()
	assert.Equal(t, nodetest.Action{Verb: nodetest.VerbList, Resource: "nodes", ResourceVersion: "0", FieldSelector: "metadata.name=n2"}, a[0])
}

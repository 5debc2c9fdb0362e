package podconfigtest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRecorderKeepsEventsConcurrently(t *testing.T) {
	r := NewRecorder(0)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Eventf(&v1.Pod{}, v1.EventTypeWarning, "Reason", "pod %d", 1)
		}()
	}
	wg.Wait()
	events := r.Events()
	require.Len(t, events, 10)
	assert.Equal(t, "pod 1", events[0].Message)
}

func TestPodClientServesQueuedResultsInOrder(t *testing.T) {
	ctx := context.Background()
	c := NewPodClient(0)
	c.SetList(&v1.PodList{Items: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}})
	boom := errors.New("boom")
	c.FailList(boom)
	_, err := c.List(ctx, metav1.ListOptions{})
	assert.ErrorIs(t, err, boom, "queued error first")
	l, err := c.List(ctx, metav1.ListOptions{FieldSelector: "x"})
	require.NoError(t, err)
	l.Items[0].Name = "changed"
	l2, _ := c.List(ctx, metav1.ListOptions{})
	assert.Equal(t, "a", l2.Items[0].Name, "each List returns a copy")

	w := watch.NewFake()
	c.FailWatch(boom)
	c.AddWatcher(w)
	_, err = c.Watch(ctx, metav1.ListOptions{})
	assert.ErrorIs(t, err, boom)
	got, err := c.Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Same(t, w, got)
	_, err = c.Watch(ctx, metav1.ListOptions{})
	assert.ErrorIs(t, err, ErrNoWatcher)
	assert.Len(t, c.Calls(), 6)
	assert.Equal(t, "x", c.Calls()[1].Options.FieldSelector)
}

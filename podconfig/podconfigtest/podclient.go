package podconfigtest

import (
	"context"
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrNoWatcher is returned by PodClient.Watch when no watcher is queued.
var ErrNoWatcher = errors.New("podconfigtest: no watcher queued")

// Call is one List or Watch call a PodClient received.
type Call struct {
	Verb    string // "list" or "watch"
	Options metav1.ListOptions
}

// PodClient is a fake of the pod client the apiserver source takes (the
// List and Watch of client-go's CoreV1().Pods("")). List returns a deep copy
// of the list set with SetList, unless an error was queued with FailList;
// Watch returns the next watcher queued with AddWatcher (for example
// apimachinery's watch.NewFake()), or the next error queued with FailWatch.
// It is safe for concurrent use.
type PodClient struct {
	mu       sync.Mutex
	list     *v1.PodList
	listErrs []error
	watches  []watchResult
	calls    []Call
	notify   chan Call
}

type watchResult struct {
	w   watch.Interface
	err error
}

// NewPodClient returns a PodClient serving an empty list. If notify > 0,
// every call is also sent on Notify(), a channel of that capacity; the
// caller then waits until the test reads it.
func NewPodClient(notify int) *PodClient {
	c := &PodClient{list: &v1.PodList{}}
	if notify > 0 {
		c.notify = make(chan Call, notify)
	}
	return c
}

// SetList sets what List returns from now on.
func (c *PodClient) SetList(l *v1.PodList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = l.DeepCopy()
}

// FailList makes the next List call fail with err (errors queue up).
func (c *PodClient) FailList(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listErrs = append(c.listErrs, err)
}

// AddWatcher queues w for a Watch call.
func (c *PodClient) AddWatcher(w watch.Interface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watches = append(c.watches, watchResult{w: w})
}

// FailWatch queues err for a Watch call, in order with AddWatcher's.
func (c *PodClient) FailWatch(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watches = append(c.watches, watchResult{err: err})
}

// Calls returns the calls received so far.
func (c *PodClient) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Notify returns the channel of calls, or nil if notify was 0.
func (c *PodClient) Notify() <-chan Call { return c.notify }

func (c *PodClient) record(ctx context.Context, call Call) error {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	if c.notify != nil {
		select {
		case c.notify <- call:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// List returns the list, or a queued error.
func (c *PodClient) List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error) {
	if err := c.record(ctx, Call{Verb: "list", Options: opts}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.listErrs) > 0 {
		err := c.listErrs[0]
		c.listErrs = c.listErrs[1:]
		return nil, err
	}
	return c.list.DeepCopy(), nil
}

// Watch returns the next queued watcher or error.
func (c *PodClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if err := c.record(ctx, Call{Verb: "watch", Options: opts}); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.watches) == 0 {
		return nil, ErrNoWatcher
	}
	r := c.watches[0]
	c.watches = c.watches[1:]
	return r.w, r.err
}

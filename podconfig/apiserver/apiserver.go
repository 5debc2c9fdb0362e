package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podutil"
)

// PodListWatcher lists and watches pods; client-go's
// kubernetes.Interface.CoreV1().Pods("") satisfies it.
type PodListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Config configures a Source.
type Config struct {
	// Client lists and watches pods. Required.
	Client PodListWatcher
	// NodeName selects the pods bound to this node. Required.
	NodeName string
	// Filter, if set, keeps out the pods for which it returns false,
	// virtual-kubelet's PodEventFilterFunc: they are left out of a list,
	// and their ADDED and MODIFIED events are dropped (a DELETED event
	// always passes: a pod that ran is stopped when it is deleted). As
	// under virtual-kubelet, a pod that stops passing keeps the version the
	// agent last had until it is deleted (or until a relist after an
	// expired watch, which leaves it out); filter on what does not change
	// over a pod's life (spec.schedulerName, spec.runtimeClassName, a label
	// set at creation). It is called on the source's goroutine and must not
	// block or modify the pod. nil: every pod bound to the node.
	Filter func(*v1.Pod) bool
	// BackoffInitial is the first delay after a failed call; it doubles up to
	// BackoffMax. Defaults 1s and 30s.
	BackoffInitial, BackoffMax time.Duration
	// WatchTimeout asks the apiserver to end each watch after this long (it
	// is then resumed), so connections are recycled. Default 5m.
	WatchTimeout time.Duration
	// Clock times the back-off. Default the real clock.
	Clock clock.Clock
	// Log receives the source's logs. Default logr.Discard().
	Log logr.Logger
}

// Source lists and watches the node's pods; see the package doc.
type Source struct {
	c        Config
	selector string
}

// New validates c, fills its defaults and returns a Source. Bad config gets
// an error wrapping podconfig.ErrInvalidConfig.
func New(c Config) (*Source, error) {
	if c.Client == nil {
		return nil, fmt.Errorf("apiserver: Client is required: %w", podconfig.ErrInvalidConfig)
	}
	if c.NodeName == "" {
		return nil, fmt.Errorf("apiserver: NodeName is required: %w", podconfig.ErrInvalidConfig)
	}
	if c.BackoffInitial < 0 || c.BackoffMax < 0 || c.WatchTimeout < 0 {
		return nil, fmt.Errorf("apiserver: negative duration: %w", podconfig.ErrInvalidConfig)
	}
	if c.BackoffInitial == 0 {
		c.BackoffInitial = time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 30 * time.Second
	}
	if c.BackoffMax < c.BackoffInitial {
		c.BackoffMax = c.BackoffInitial
	}
	if c.WatchTimeout == 0 {
		c.WatchTimeout = 5 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Source{c: c, selector: fields.OneTermEqualSelector("spec.nodeName", c.NodeName).String()}, nil
}

// errExpired marks the end of a watch whose resourceVersion is too old.
var errExpired = errors.New("resource version expired")

func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// Run sends the node's pods on updates until ctx ends, then returns nil.
func (s *Source) Run(ctx context.Context, updates chan<- podconfig.PodUpdate) error {
	backoff := s.newBackoff()
	var rv string
	relist := true
	// delivered: the last watch delivered events.
	delivered := false
	for ctx.Err() == nil {
		if relist {
			list, err := s.c.Client.List(ctx, metav1.ListOptions{FieldSelector: s.selector})
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				s.c.Log.Error(err, "Listing pods failed", "node", s.c.NodeName)
				s.sleep(ctx, backoff.Step())
				continue
			}
			pods := make([]*v1.Pod, 0, len(list.Items))
			for i := range list.Items {
				if p := &list.Items[i]; s.mine(p) {
					pods = append(pods, p)
				}
			}
			if !send(ctx, updates, podconfig.PodUpdate{Pods: pods, Op: podconfig.SET, Source: podutil.ApiserverSource}) {
				break
			}
			rv, relist = list.ResourceVersion, false
			delivered = false // an empty watch right after a list backs off
			s.c.Log.V(2).Info("Listed pods", "count", len(pods), "resourceVersion", rv)
		}

		timeout := int64(s.c.WatchTimeout / time.Second)
		w, err := s.c.Client.Watch(ctx, metav1.ListOptions{
			FieldSelector: s.selector, ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
		})
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case isExpired(err):
				s.c.Log.V(2).Info("Watch resourceVersion expired, relisting", "resourceVersion", rv)
				relist = true
			default:
				s.c.Log.Error(err, "Watching pods failed", "node", s.c.NodeName)
				s.sleep(ctx, backoff.Step())
			}
			continue
		}
		events, err := s.consume(ctx, w, &rv, updates)
		afterDelivery := delivered
		delivered = events > 0
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errExpired):
			s.c.Log.V(2).Info("Watch resourceVersion expired, relisting", "resourceVersion", rv)
			relist = true
		case err != nil:
			s.c.Log.Error(err, "Watch of pods failed", "node", s.c.NodeName)
			s.sleep(ctx, backoff.Step())
		case events == 0 && afterDelivery:
			// A loaded apiserver closes a watcher that falls behind (its
			// buffer full: 10-15 times in the seconds 1,000 pods take to
			// arrive), and a watch resumed with a backlog to replay may
			// be closed before it sent anything: resume at once, as after
			// a watch that delivered, rather than stall every new pod of
			// the node for the back-off.
		case events == 0:
			// Empty twice in a row (or first thing after a list): maybe
			// a server refusing us in a loop; back off before resuming.
			s.sleep(ctx, backoff.Step())
		default:
			backoff = s.newBackoff()
		}
	}
	return nil
}

func (s *Source) newBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: s.c.BackoffInitial, Factor: 2, Cap: s.c.BackoffMax, Steps: math.MaxInt32}
}

// mine reports whether the pod is bound to this node (the field selector
// already ensures it with a real apiserver) and passes Filter.
func (s *Source) mine(p *v1.Pod) bool {
	if p.Spec.NodeName != s.c.NodeName {
		s.c.Log.Info("Ignoring pod bound to another node", "pod", p.Namespace+"/"+p.Name, "nodeName", p.Spec.NodeName)
		return false
	}
	if s.c.Filter != nil && !s.c.Filter(p) {
		s.c.Log.V(4).Info("Ignoring pod the filter keeps out", "pod", p.Namespace+"/"+p.Name)
		return false
	}
	return true
}

// consume sends each event of w as an update until w ends, ctx ends or an
// ERROR event arrives. It keeps *rv at the last resourceVersion seen and
// returns how many events moved it on (pod events, bookmarks with a
// new resourceVersion): the progress that lets the next watch start at once.
func (s *Source) consume(ctx context.Context, w watch.Interface, rv *string, updates chan<- podconfig.PodUpdate) (int, error) {
	defer w.Stop()
	n := 0
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return n, nil
		}
		var op podconfig.PodOperation
		switch ev.Type {
		case watch.Added:
			op = podconfig.ADD
		case watch.Modified:
			op = podconfig.UPDATE
		case watch.Deleted:
			op = podconfig.REMOVE
		case watch.Bookmark:
			// Progress only if it moves the resourceVersion: a server
			// that repeats one bookmark and closes must not be resumed
			// at once, again and again.
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != *rv {
				*rv = m.GetResourceVersion()
				n++
			}
			continue
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if isExpired(err) {
				return n, errExpired
			}
			return n, fmt.Errorf("watch error event: %w", err)
		default:
			s.c.Log.Info("Ignoring watch event of unknown type", "type", ev.Type)
			continue
		}
		n++
		pod, isPod := ev.Object.(*v1.Pod)
		if !isPod || pod == nil {
			return n, fmt.Errorf("watch event %s carries %T, not *v1.Pod", ev.Type, ev.Object)
		}
		*rv = pod.ResourceVersion
		if !s.mine(pod) && (op != podconfig.REMOVE || pod.Spec.NodeName != s.c.NodeName) {
			continue
		}
		if !send(ctx, updates, podconfig.PodUpdate{Pods: []*v1.Pod{pod}, Op: op, Source: podutil.ApiserverSource}) {
			return n, ctx.Err()
		}
	}
}

func (s *Source) sleep(ctx context.Context, d time.Duration) {
	t := s.c.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

func send(ctx context.Context, updates chan<- podconfig.PodUpdate, u podconfig.PodUpdate) bool {
	select {
	case updates <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

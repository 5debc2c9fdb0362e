package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// watcher is one WatchContainerEvents stream.
type watcher struct {
	ch     chan runtime.ContainerEvent
	closed bool
}

// WatchContainerEvents streams every change of a pod's status, each with
// the pod's runtime status (its APIStatus the provider's status), until ctx
// ends; the channel is closed then, or earlier if the consumer falls
// Config.EventBuffer changes behind. Opening a stream registers the
// provider's NotifyPods callback (notifications reach the stream at once)
// or, for a provider without it, polls its pods' statuses every PollPeriod
// while the stream is open.
func (r *Runtime) WatchContainerEvents(ctx context.Context) (<-chan runtime.ContainerEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &watcher{ch: make(chan runtime.ContainerEvent, r.cfg.EventBuffer)}
	r.mu.Lock()
	r.watchers = append(r.watchers, w)
	// Every status known so far opens the stream: a change made while no
	// stream was open (a CreatePod that failed before the agent's PLEG
	// subscribed, or during a reconnect) was told to nobody, and a relist
	// does not see it (a failed pod is not listed; a status-only change is
	// no container change).
	for _, rec := range r.pods {
		if rec.status != nil && !w.closed {
			r.sendLocked(w, r.eventLocked(rec))
		}
	}
	r.mu.Unlock()
	if r.notifier != nil {
		r.notifier.NotifyPods(ctx, r.notified)
		r.notifyingOnce.Do(func() { close(r.notifying) })
	}
	go func() {
		if r.notifier == nil {
			r.poll(ctx)
		} else {
			<-ctx.Done()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.dropWatcherLocked(w)
	}()
	return w.ch, nil
}

func (r *Runtime) dropWatcherLocked(w *watcher) {
	if w.closed {
		return
	}
	w.closed = true
	close(w.ch)
	for i, x := range r.watchers {
		if x == w {
			r.watchers = append(r.watchers[:i], r.watchers[i+1:]...)
			break
		}
	}
}

// emitLocked tells every stream that rec's status changed: started while
// the provider has the pod and it is not stopped, stopped otherwise.
func (r *Runtime) emitLocked(rec *record) {
	if len(r.watchers) == 0 {
		return
	}
	ev := r.eventLocked(rec)
	for i := 0; i < len(r.watchers); {
		if r.sendLocked(r.watchers[i], ev) {
			i++
		} // else sendLocked removed it from r.watchers
	}
}

// eventLocked is the event telling rec's current status.
func (r *Runtime) eventLocked(rec *record) runtime.ContainerEvent {
	typ := runtime.ContainerStartedEvent
	if rec.gone || (rec.status != nil && stopped(rec.status)) {
		typ = runtime.ContainerStoppedEvent
	}
	return runtime.ContainerEvent{ContainerID: runtime.ContainerID{Type: r.cfg.Type, ID: string(rec.uid)}, Type: typ,
		PodUID: rec.uid, CreatedAt: r.cfg.Clock.Now(), PodStatus: r.snapshotLocked(rec)}
}

// sendLocked hands ev to w without blocking, or closes w's stream if its
// consumer is Config.EventBuffer events behind, and reports which.
func (r *Runtime) sendLocked(w *watcher, ev runtime.ContainerEvent) bool {
	select {
	case w.ch <- ev:
		return true
	default:
		r.log.Error(nil, "Event stream consumer is stuck; closing its stream")
		r.dropWatcherLocked(w) // removes w from r.watchers
		return false
	}
}

// notified is the NotifyPods callback: pod carries its new status.
func (r *Runtime) notified(pod *v1.Pod) {
	if pod == nil {
		return
	}
	st := pod.Status.DeepCopy() // the provider's pod is read only
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recordLocked(pod.UID, pod.Namespace, pod.Name, pod.UID != "")
	if rec == nil || rec.gone {
		return
	}
	rec.known = true
	r.setStatusLocked(rec, st)
}

// poll asks the provider for the status of every pod it has that is not
// finished (or is being deleted), every PollPeriod, until ctx ends.
func (r *Runtime) poll(ctx context.Context) {
	t := r.cfg.Clock.NewTicker(r.cfg.PollPeriod)
	defer t.Stop()
	type name struct {
		uid      string
		ns, name string
	}
	var batch []name
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		batch = batch[:0]
		r.mu.Lock()
		for _, rec := range r.pods {
			if rec.known && !rec.gone && (rec.deleting || rec.status == nil || !terminal(rec.status)) {
				batch = append(batch, name{string(rec.uid), rec.ns, rec.name})
			}
		}
		r.mu.Unlock()
		for _, n := range batch {
			if ctx.Err() != nil {
				return
			}
			if err := r.refresh(ctx, types.UID(n.uid), n.ns, n.name); err != nil {
				r.log.V(1).Info("Cannot poll a pod's status", "pod", key(n.ns, n.name), "err", err)
			}
		}
	}
}

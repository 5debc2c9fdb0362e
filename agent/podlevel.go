package agent

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// ownerCacheUpdatePeriod is the evented PLEG's CacheUpdatePeriod on a
// status owner.
const ownerCacheUpdatePeriod = 20 * time.Millisecond

// setupStatusOwner prepares the agent for a runtime that owns its pods' API
// status (runtime.StatusOwner, package provider): its status changes arrive
// as container events, streamed by the evented PLEG over the generic one.
func (a *Agent) setupStatusOwner() error {
	if !ownsStatus(a.cfg.Runtime) {
		return nil
	}
	o := a.cfg.Runtime.(runtime.StatusOwner)
	// A provider often reports a change from within SyncPod (NotifyPods
	// called by CreatePod), so the change is older than the sync and the
	// worker's next sync waits for the cache to be declared current. The
	// runtime's memory is the truth and every change is an event, so the
	// cache is current whenever no event is pending: a waiting worker asks
	// for it (ownerCache), and it is declared often besides.
	e, err := pleg.NewEvented(pleg.EventedConfig{Generic: a.pleg, Events: o, Registerer: a.cfg.Registerer,
		StreamingRelistPeriod: a.cfg.StreamingRelistPeriod, CacheUpdatePeriod: ownerCacheUpdatePeriod, Lossless: true})
	if err != nil {
		return err
	}
	a.owner, a.evented = true, e
	return nil
}

// ownsStatus reports whether rt owns its pods' API status.
func ownsStatus(rt runtime.Runtime) bool {
	o, ok := rt.(runtime.StatusOwner)
	return ok && o.OwnsPodStatus()
}

// ownerCache is the pod workers' cache on a status owner: a worker about
// to wait for status newer than its last sync asks the evented PLEG to
// declare the cache current once the events already sent are handled: the
// sync's own change (a provider's NotifyPods from CreatePod) reaches the
// next sync at once, not after ownerCacheUpdatePeriod.
type ownerCache struct {
	runtime.Cache
	a *Agent
}

func (c ownerCache) GetNewerThan(ctx context.Context, uid types.UID, minTime time.Time) (*runtime.PodStatus, error) {
	c.a.evented.RequestCurrent()
	return c.Cache.GetNewerThan(ctx, uid, minTime)
}

// setupEvented puts the evented PLEG over the generic one when the runtime
// streams container events (and is not a status owner, which has its own),
// if Config.EventedPLEG: the kubelet's evented mode, events as they
// happen, with a relist every RelistPeriod (at most 2s) that declares the
// cache current, since the stream may drop events; a runtime that cannot
// stream (containerd 1.x) gets plain relisting at RelistPeriod.
func (a *Agent) setupEvented() error {
	ev, ok := a.cfg.Runtime.(runtime.ContainerEventer)
	if a.evented != nil || !ok || !a.cfg.EventedPLEG {
		return nil
	}
	// The stream may drop events (containerd's and fakecri's do for a
	// subscriber that lags): a relist every RelistPeriod (at most the
	// kubelet's 2s) finds what it missed and declares the cache current,
	// so pod workers waiting for newer status keep the relist mode's pace
	// and never act on status from before their sync.
	e, err := pleg.NewEvented(pleg.EventedConfig{Generic: a.pleg, Events: ev,
		StreamingRelistPeriod: a.cfg.StreamingRelistPeriod, CacheUpdatePeriod: min(a.cfg.RelistPeriod, pleg.DefaultCacheUpdatePeriod),
		Registerer: a.cfg.Registerer})
	if err != nil {
		return err
	}
	a.evented = e
	return nil
}

// runPLEG runs the evented PLEG if there is one, else the generic PLEG.
func (a *Agent) runPLEG(ctx context.Context) error {
	if a.evented != nil {
		return a.evented.Run(ctx)
	}
	return a.pleg.Run(ctx)
}

// ownedStatus is the API status of pod on a runtime that owns it: what the
// runtime reports, or the status the pod has until it reports one, with
// what the kubelet always sets filled in (the status manager adds the start
// time, transition times and the observed generation).
func (a *Agent) ownedStatus(pod *v1.Pod, rs *runtime.PodStatus, old *v1.PodStatus) v1.PodStatus {
	var st v1.PodStatus
	if rs != nil && rs.APIStatus != nil {
		st = *rs.APIStatus.DeepCopy()
	} else {
		st = *old.DeepCopy()
	}
	if st.Phase == "" {
		st.Phase = v1.PodPending
	}
	st.QOSClass = podutil.QOSClass(pod) // set at creation, immutable in the API
	if st.HostIP == "" && len(a.cfg.NodeIPs) > 0 {
		st.HostIP = a.cfg.NodeIPs[0]
		st.HostIPs = make([]v1.HostIP, len(a.cfg.NodeIPs))
		for i, ip := range a.cfg.NodeIPs {
			st.HostIPs[i] = v1.HostIP{IP: ip}
		}
	}
	return st
}

// Package pleg is the pod lifecycle event generator: it watches what the
// runtime runs and tells the sync loop which pods changed.
//
// GenericPLEG relists the runtime (GetPods with all=true) every relist
// period and compares each pod's containers and sandboxes with the listing it
// last acted on. A container that started gives ContainerStarted, one that
// exited ContainerDied, one that is gone ContainerRemoved (after
// ContainerDied if its exit was never seen). Every pod that changed is
// inspected with GetPodStatus and its status written to the runtime.Cache,
// stamped with the time the relist began; then its events are sent, each of
// a pod's but the last marked More (so a consumer syncs the pod once per
// relist, not as goroutines happen to run: PodLifecycleEvent.More). After the
// relist the cache's time is advanced (Cache.UpdateTime), which wakes pod
// workers blocked in GetNewerThan.
//
// Where it sits:
//
//	runtime ──GetPods/GetPodStatus──► pleg ──events──► syncloop ──► podworkers
//	                                    └──writes──► runtime.Cache ◄──reads──┘
//
// It behaves as the kubelet's GenericPLEG, including these details: a pod
// whose inspection fails gets the error in the cache, no events, and is
// inspected again at the next relist; a vanished pod is deleted from the
// cache; a pod's IPs are kept in the cache when a new status has none and no
// ready sandbox, so a finished pod's status does not lose them; the event
// channel is bounded and a send never blocks (what does not fit is dropped,
// counted and logged); Healthy fails once the last successful listing is
// older than the threshold.
//
// Beyond the kubelet, changed pods are inspected InspectParallelism at a time,
// each GetPodStatus bounded by InspectTimeout, so neither many changed pods
// nor one hung call stall the relist; a pod's events go out as soon as that
// pod is inspected. The relist period and threshold can be changed while
// running (SetRelistDuration). RequestRelist asks for a relist
// MinRelistInterval (100ms) after the last one rather than a period after,
// coalescing requests: the agent asks when it has started containers and
// when a pod worker waits for status newer than its last sync (a deletion,
// a spec change), which the kubelet leaves to the next periodic relist (up
// to 1s). Config.OnRelist receives per-relist figures
// (duration, pods and containers by state, events by type, dropped events).
//
// Metrics: given a prometheus.Registerer (Config.Registerer,
// EventedConfig.Registerer) the PLEGs keep the kubelet's metrics under its
// names, types and buckets: kubelet_pleg_relist_duration_seconds,
// kubelet_pleg_relist_interval_seconds, kubelet_pleg_last_seen_seconds,
// kubelet_pleg_discard_events, kubelet_running_pods,
// kubelet_running_containers{container_state} and
// kubelet_evented_pleg_connection_{success,error}_count and
// _latency_seconds. Without one nothing is registered anywhere.
//
// EventedPLEG builds on a GenericPLEG for runtimes that stream container
// events (runtime.ContainerEventer, the CRI's GetContainerEvents): events and
// the status they carry reach the channel and the cache as they happen. The
// generic PLEG still relists every CacheUpdatePeriod (2s) by default, since
// a CRI runtime drops events for a subscriber that lags and only a relist
// declares the cache current; with EventedConfig.Lossless (a runtime whose
// stream drops nothing) it relists slowly (5 min) as a safety net, as the
// kubelet's, and declares the cache current itself once the pending events
// are handled: every CacheUpdatePeriod and whenever a pod worker about to
// wait asks (RequestCurrent). It relists at its normal period while the stream is down until
// it is opened again, and after a relist that failed or could not inspect
// a pod (no event may come to refresh what it left stale).
//
// Usage: ExampleNew relists an in-memory runtime and reads the events (a
// test drives the PLEG so, with Relist and Watch, without Run); a program
// runs Run(ctx) on a goroutine instead. ExampleNewEvented wraps the generic
// PLEG for a streaming runtime and starts the wrapper, which runs both.
package pleg

// Package syncloop owns the main loop of a node agent, the kubelet's
// syncLoop: one goroutine that waits for the next thing to do and hands it
// to a Handler.
//
// Where it sits: podconfig's updates and the PLEG's events come in; the
// Handler (the agent) turns them into podworkers.UpdatePod calls and
// housekeeping. Each iteration takes one of:
//
//   - a config update: ADD → HandlePodAdditions; UPDATE and DELETE →
//     HandlePodUpdates; REMOVE → HandlePodRemoves; RECONCILE →
//     HandlePodReconcile (SET, podconfig's snapshot modes, is not
//     supported: New refuses a Config.Source not in Incremental mode);
//     the update's source is recorded in SourcesReady. A closed update
//     channel ends the loop;
//   - a PLEG event: any but ContainerRemoved syncs the pod if the agent
//     knows it, once per relist (at the pod's event without More: a
//     second request would make a sync of its own or not as the pod's
//     worker happened to start, and move its resyncs); ContainerDied also asks a Handler that is a ContainerCleaner
//     to remove the pod's dead containers;
//   - a sync tick (SyncPeriod, 1s): the pods DuePods hands out (put there
//     by the pod workers after each sync, so every pod is resynced about
//     every podworkers.Config.ResyncInterval, the kubelet's syncFrequency)
//     go to HandlePodSyncs;
//   - a housekeeping tick (HousekeepingPeriod, 2s): HandlePodCleanups, but
//     only once all sources are ready, with a warning if it takes over 1s.
//
// Of several ready at once, the loop takes a PLEG event first, then a
// config update, the sync tick and housekeeping, not a select's random
// pick, so that an agent on virtual time, where many arrive in one instant,
// does the same in every run.
//
// Before each iteration the loop asks RuntimeErrors; while the runtime is
// not usable it dispatches nothing and waits 100ms, doubling up to 5s, and
// starts over at 100ms once it is.
//
// RunOnce is the run-once mode: run the static pods of the first update
// until each is running, report per pod, and return.
//
// Usage: ExampleLoop_Run feeds a loop updates and prints what its Handler
// gets. In an agent, Config.Pods is the pod manager (package podmanager),
// PLEG the PLEG's Watch(), DuePods the pod workers' Queue, SourcesReady
// podconfig.NewSourcesReady(cfg.SeenAllSources).
package syncloop

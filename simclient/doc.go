// Package simclient serves the Kubernetes REST API of a sim.Cluster from
// memory, so that a controller's client-go or controller-runtime code runs
// on the simulated cluster unchanged and on its virtual time.
//
//	cl, _ := sim.New(sim.Config{Seed: 1})
//	srv, _ := simclient.New(cl, simclient.Config{Seed: 1})
//	defer srv.Close()                      // before cl.Close
//	cs, _ := srv.Clientset()               // or kubernetes.NewForConfig(srv.RESTConfig())
//	factory := informers.NewSharedInformerFactory(cs, 0)
//	// ... the controller under test on cs and factory ...
//	factory.Start(ctx.Done())
//	factory.WaitForCacheSync(ctx.Done())   // before the clock runs
//	cl.RunFor(ctx, time.Hour)
//
// Server is an http.RoundTripper: RESTConfig gives client-go the Server
// as its transport (no socket), JSON, and no client-side rate limit. What
// uses it works unchanged: the typed clientset, the dynamic client,
// informers and listers, controller-runtime's client, cache and manager
// (with discovery and a RESTMapper from /api and /apis).
//
// What it stores. Pods, Nodes, coordination/v1 Leases and core/v1
// Events are sim's Store's: a write goes to the Store (its defaults,
// scheduler, graceful deletion, the agents' watches) and the Store's feed
// (sim.Store.Observe) brings every change back, so a client reads and
// watches what the agents write. Every other kind of the Scheme
// (Config.Scheme, client-go's by default: apps, batch, core, policy, rbac
// ...) and the unstructured Config.Resources are kept here, with the
// apiserver's bookkeeping: UIDs, resourceVersions, creationTimestamp,
// generation raised by spec changes, status subresources, finalizers and
// deletionTimestamp, no new resourceVersion for an update that changes
// nothing.
//
// The API: get, list, watch, create, update, patch (JSON, merge,
// strategic merge for typed kinds, and apply as a merge patch that
// creates the object if absent: no field ownership), delete and
// deletecollection, with resourceVersion preconditions and conflicts,
// label selectors and the field selectors of the apiserver for pods,
// Nodes, Events, Secrets, Namespaces, ReplicationControllers and Jobs
// (metadata.name and metadata.namespace for every kind; another field is
// a bad request). Subresources: status; scale (autoscaling/v1) of
// Deployments, ReplicaSets, StatefulSets and ReplicationControllers;
// pods' binding, eviction (refused with 429 when a PodDisruptionBudget
// would be violated, counting Ready pods), and log (empty: the in-memory
// runtime keeps none). Watches replay the last 4096 changes of a
// resource and answer 410 Gone beyond; sendInitialEvents=true (client-go's
// watch-list, its default since 0.35) sends the objects, then a bookmark
// annotated k8s.io/initial-events-end.
//
// The garbage collector: after a deletion, an object none of whose owners
// is left is deleted (background propagation; pods gracefully, as any
// client's deletion), the dependents of an owner deleted with foreground
// propagation are deleted and the owner goes once none is left; the
// orphan policy removes the owner references of the Server's own objects.
//
// The namespace controller: a new Namespace gets the kubernetes finalizer
// and phase Active; deleting it makes it Terminating (deletionTimestamp,
// the finalizer kept), refuses new content in it (403, as the apiserver's
// NamespaceLifecycle admission), deletes its objects (pods gracefully)
// and, once none is left, removes the finalizer and with it the
// namespace. sim's Leases and Events in it are left and do not hold it.
//
// Virtual time. Nothing on the request path waits on the wall clock: a
// request is served by a goroutine writing into a pipe. Watches ignore
// timeoutSeconds (client-go re-watches after a wall-clock back-off when a
// watch ends in under a wall second, while virtual time runs on). What
// the client side still does on the wall clock is the caller's to set:
// give workqueues the cluster's clock (workqueue's Config.Clock, a
// controller-runtime manager's options) and a per-item rate limiter only
// (client-go's and controller-runtime's default ones add a token bucket on
// the wall clock), and wait for caches to sync before running the clock
// (WaitForCacheSync polls on the wall clock).
//
// Or run the test inside a testing/synctest bubble with the cluster on
// sim.Config{Clock: clock.RealClock{}}: the bubble makes the wall clock
// virtual for everything in it, client-go's and controller-runtime's
// timers too, and time.Sleep(time.Hour) runs the cluster for an hour
// (examples/replicaset's TestReplicaSetInSynctestBubble; not under -race,
// which go1.26 crashes in bubbles at times).
//
// Reproducibility: the UIDs and generated names of the Server's own
// objects are keyed by Config.Seed, the resource, the namespace and the
// name or generateName prefix, as sim's Store keys its pods', so
// controllers creating objects in one instant leave the run as it was.
//
// Where it differs from an apiserver: no admission, validation or
// defaulting beyond sim's for pods; no conversion between versions (each
// group version is its own store); no server-side apply field management;
// Nodes, Leases and Events cannot be deleted, Events not updated; no
// finalize subresource (a Namespace's spec.finalizers are the Server's,
// kept on updates) and no namespace status conditions; objects in a
// namespace that does not exist are accepted; resourceVersions of
// sim's kinds and of the Server's own kinds are separate sequences.
package simclient

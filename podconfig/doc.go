// Package podconfig is the kubelet's pod-config layer: it merges the pods of
// several sources (static manifest files, a manifest URL, the apiserver, or
// any source of your own) into one ordered stream of PodUpdates.
//
// Where it sits: sources -> PodConfig -> Updates() -> the sync loop
// (syncloop), which dispatches to the pod workers.
//
// Each source writes PodUpdates to its own channel (Channel), served by a
// goroutine of the PodConfig's, or merges them in its own goroutine
// (Sender). Per-source
// storage keyed by pod UID turns them into minimal changes: ADD, UPDATE and
// DELETE merge, REMOVE deletes, SET replaces the source's whole set (and
// marks the source as seen, see SeenAllSources and SourcesReady). Pods are
// compared as the kubelet compares them: on spec, labels, deletion timestamp
// and grace period, and annotations other than the config.* bookkeeping ones.
// A status-only change is a RECONCILE, a newly set deletion timestamp a
// DELETE (graceful deletion), anything else an UPDATE; identical pods produce
// nothing. New pods get the config.source and config.seen annotations. A pod
// whose name and namespace repeat within one update is dropped with a
// FailedValidation event; so is a pod without a UID (client-go's fake
// clientset creates such pods), reported once by that event and an error log
// while its source keeps sending it.
//
// Change detection fingerprints pods (their generated protobuf encoding,
// hashed) instead of comparing whole specs with reflect.DeepEqual, and only
// when there is something to compare: a new pod is stored as it came, and
// its fingerprints are taken when its source first sends a newer object for
// it. So a first SET of N pods costs no encoding, and a later SET of N
// unchanged pods N encodings and almost no allocation. The comparison is
// semantic where reflect.DeepEqual is not: nil and empty slices or maps are
// equal, and so are equal quantities written differently ("1000m" and "1").
//
// Ownership: a source hands its pods over when it sends them and must not
// modify them afterwards; a change comes as a new object, as decoders and
// informers give (the object sent before, sent again, is the stored pod
// and no change, as in the kubelet). The consumer receives the stored pods
// themselves, shared with later updates: the storage never modifies a
// stored pod (an update stores the new object), and no nodekit component
// modifies a pod it is given (the agent's TestPodsAreNeverModified runs
// pods through their whole life and checks). Treat them as read-only, as
// with an informer's cache, or set Options.CopyPods to get deep copies as
// the kubelet gives.
//
// Sources in subpackages: file (static pod manifests in a directory, fsnotify
// plus periodic resync), manifesturl (a Pod or PodList polled over HTTP) and
// apiserver (pods bound to the node, list then watch). Package staticpod
// decodes, defaults and validates manifests for the first two.
//
// Usage: ExampleNewPodConfig feeds a source's channel and reads the merged
// updates; a file source (package podconfig/file) runs on the channel of
// podutil.FileSource.
package podconfig

// Package podconfigtest holds public, thread-safe fakes for testing code
// built on podconfig and its sources:
//
//   - Recorder, an EventRecorder that keeps every event it is given;
//   - PodClient, a pod list/watch client for the apiserver source;
//   - WorkloadPod, a typical workload pod, for benchmarks and tests.
//
// Where they differ from the real thing: Recorder formats the message with
// fmt.Sprintf and does not aggregate or rate-limit as client-go's recorder
// does, and keeps the object pointer rather than an ObjectReference.
// PodClient does not evaluate field or label selectors (it records the
// ListOptions so a test can check them), returns whatever list it was given
// rather than a consistent snapshot, and serves watches only from the
// watchers queued with AddWatcher (a Watch call with none queued fails).
// For behaviour against a real kube-apiserver (resourceVersion semantics,
// bookmarks, 410 after compaction), test against one.
package podconfigtest

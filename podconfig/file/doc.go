// Package file is the pod source for static pod manifests on the node's disk
// (the kubelet's --pod-manifest-path / staticPodPath): a directory of
// manifests, one pod per file, or a single manifest file.
//
// Where it sits: manifest files -> Source -> podconfig.PodConfig channel
// (podutil.FileSource) -> the sync loop. Pods are decoded, defaulted and
// validated by podconfig/staticpod.
//
// The source reads the path at once and sends a SET (an empty one if the
// path does not exist, so the source still reports in), then follows
// changes with fsnotify (the directory, or the file's directory for a single
// file, so editors' rename-over writes are seen) and re-reads everything every
// check frequency (default 20 s) to catch what inotify cannot see, such as
// changes behind symlinks. It sends a SET whenever the set of pods changed.
// Files whose names start with a dot and subdirectories are skipped. A file
// that does not decode or validate gets a FailedValidation event on the node
// and a log line naming the file and the reason; the other files go through.
// As in the kubelet, a file that turns invalid keeps its last good pod until
// the next periodic re-read drops it, so a half-written file does not
// restart the pod. If the watch fails it is retried with back-off, on the
// injected clock.
//
// Usage:
//
//	src, err := file.New(file.Config{Path: "/etc/kubernetes/manifests", NodeName: node})
//	if err != nil { ... }
//	go src.Run(ctx, cfg.Channel(ctx, podutil.FileSource))
package file

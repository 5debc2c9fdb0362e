// Package kubelet is the kubelet's pod workers (pkg/kubelet/pod_workers.go
// of the pinned k8s.io/kubernetes), compiled on their own: run.sh passes an
// overlay (go build -overlay) that places the module's unmodified
// pod_workers.go beside this file, which only exports its constructor. The
// rest of package kubelet is not needed by the pod workers and is not built.
package kubelet

import (
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/util/queue"
)

// PodSyncer is the pod workers' syncer interface.
type PodSyncer = podSyncer

// NewPodWorkers returns the kubelet's pod workers with its default resync
// (1 minute, as -sync-frequency) and backoff (10 s) and a recorder that
// drops events.
func NewPodWorkers(s PodSyncer, wq queue.WorkQueue, cache kubecontainer.ROCache, am allocation.Manager) PodWorkers {
	return newPodWorkers(s, &record.FakeRecorder{}, wq, time.Minute, 10*time.Second, cache, am)
}

// NetworkNotReadyErrorMsg is pkg/kubelet/errors.go's, which pod_workers.go
// uses.
const NetworkNotReadyErrorMsg = "network is not ready"

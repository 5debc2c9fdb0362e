package cri

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/volume"
)

// VolumeManager sets up pods' volumes on the node; volume.Manager is the
// kubelet's.
type VolumeManager interface {
	// SetUp makes every volume of pod ready (and refreshes contents).
	SetUp(ctx context.Context, pod *v1.Pod) error
	// HostPath returns where volume vol of pod is on the host.
	HostPath(pod *v1.Pod, vol *v1.Volume) (string, error)
	// TearDown releases the volumes of the pod with uid; its containers
	// are gone.
	TearDown(uid types.UID) error
}

// volumeManager returns Config.Volumes, or one without API sources for a
// Manager built without New (tests).
func (m *Manager) volumeManager() VolumeManager {
	if m.cfg.Volumes != nil {
		return m.cfg.Volumes
	}
	v, _ := volume.New(volume.Config{PodsRoot: m.cfg.PodsRoot})
	return v
}

// setUpVolumes sets up pod's volumes before anything of it starts, as the
// kubelet waits for its volumes. When that fails, nothing that was to start
// starts: each such container's step fails with CreateContainerConfigError
// and the volumes' error, and the sync is retried. A pod that only keeps
// running keeps its last contents (the error is logged).
func (m *Manager) setUpVolumes(ctx context.Context, pod *v1.Pod, p *runtime.PodActions, res *runtime.PodSyncResult) {
	starts := p.CreateSandbox || len(p.ContainersToStart) > 0 || len(p.InitContainersToStart) > 0 || len(p.EphemeralContainersToStart) > 0
	if p.KillPod && !p.CreateSandbox {
		return
	}
	err := m.volumeManager().SetUp(ctx, pod)
	if err == nil {
		return
	}
	if !starts {
		m.log.V(1).Info("volumes not refreshed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return
	}
	err = fmt.Errorf("%w: %w", runtime.ErrCreateContainerConfig, err)
	msg := err.Error()
	for _, i := range p.EphemeralContainersToStart {
		res.NewStep(runtime.StartContainer, pod.Spec.EphemeralContainers[i].Name).Fail(err, msg)
	}
	for _, i := range p.InitContainersToStart {
		res.NewStep(runtime.InitContainer, pod.Spec.InitContainers[i].Name).Fail(err, msg)
	}
	for _, i := range p.ContainersToStart {
		res.NewStep(runtime.StartContainer, pod.Spec.Containers[i].Name).Fail(err, msg)
	}
	if p.CreateSandbox {
		// Kill what must go (a changed sandbox), create nothing yet.
		p.CreateSandbox = false
	}
	p.ContainersToStart, p.InitContainersToStart, p.EphemeralContainersToStart = nil, nil, nil
}

// ReleaseVolumes tears down the volumes of the pod with uid once it is
// terminated (the kubelet unmounts a terminated pod's volumes): tmpfs
// unmounted, volume directories and tokens dropped. Its logs and
// termination-message files stay until the pod is removed.
func (m *Manager) ReleaseVolumes(uid types.UID) error {
	return m.volumeManager().TearDown(uid)
}

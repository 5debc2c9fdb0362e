package cri

import (
	"context"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// purgeInitContainers removes every instance of the pod's init containers,
// with its log, once the pod was killed for a new sandbox, as the kubelet's
// purgeInitContainers: initialization starts over in the new sandbox, and
// an old "exited 0" instance must not stand for a new one that has not run
// (or waits on its image). Failures are logged; the next GC catches up.
func (m *Manager) purgeInitContainers(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus) {
	if len(pod.Spec.InitContainers) == 0 {
		return
	}
	names := make(map[string]bool, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		names[pod.Spec.InitContainers[i].Name] = true
	}
	for _, c := range status.ContainerStatuses {
		if !names[c.Name] {
			continue
		}
		m.log.V(4).Info("Removing init container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", c.ID.ID)
		if err := m.removeContainer(ctx, c.ID.ID); err != nil {
			m.log.Error(err, "Failed to remove init container", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "containerID", c.ID.ID)
		}
	}
}

// removeContainer removes a container's log files (the live one and its
// rotated ones) and then the container, log first as the kubelet does, so
// that a failure leaves the container to find again. Only logs under
// PodLogsRoot are removed.
func (m *Manager) removeContainer(ctx context.Context, id string) error {
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	st, err := m.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return wrapErr("ContainerStatus", err)
	}
	if p := st.GetStatus().GetLogPath(); p != "" && m.underLogsRoot(p) {
		if err := m.logs.clean(p); err != nil {
			return err
		}
	}
	if _, err := m.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		return wrapErr("RemoveContainer", err)
	}
	return nil
}

func (m *Manager) underLogsRoot(path string) bool {
	rel, err := filepath.Rel(m.cfg.PodLogsRoot, filepath.Clean(path))
	return err == nil && rel != "." && !filepath.IsAbs(rel) && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

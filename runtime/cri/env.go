package cri

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
)

// EnvResolver builds a container's environment; podenv.Resolver is the
// kubelet's. podIPs are the sandbox's, primary first.
type EnvResolver interface {
	Env(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]podenv.Var, error)
}

// envResolver returns Config.Env, or a resolver without API sources.
func (m *Manager) envResolver() EnvResolver {
	if m.cfg.Env != nil {
		return m.cfg.Env
	}
	return podenv.New(podenv.Config{})
}

// podIPs returns the IPs of the pod's sandbox when c's environment asks for
// them: from the status when the sandbox is the one it knows, else from the
// runtime (a sandbox just created). Only then is the runtime asked, so
// containers that do not need them cost no extra call.
func (m *Manager) podIPs(ctx context.Context, c *v1.Container, sandboxID string, st *runtime.PodStatus) []string {
	if !wantsPodIPs(c) {
		return nil
	}
	if len(st.SandboxStatuses) > 0 && st.SandboxStatuses[0].ID == sandboxID {
		return st.IPs
	}
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
	if err != nil {
		m.log.V(1).Info("no sandbox status for the pod's IPs", "sandbox", sandboxID, "err", err)
		return nil
	}
	n := resp.GetStatus().GetNetwork()
	if n.GetIp() == "" {
		return nil
	}
	ips := []string{n.GetIp()}
	for _, a := range n.GetAdditionalIps() {
		ips = append(ips, a.GetIp())
	}
	return ips
}

func wantsPodIPs(c *v1.Container) bool {
	for _, e := range c.Env {
		if f := e.ValueFrom; f != nil && f.FieldRef != nil && (f.FieldRef.FieldPath == "status.podIP" || f.FieldRef.FieldPath == "status.podIPs") {
			return true
		}
	}
	return false
}

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

// sandboxIPs gives the IPs of the pod's sandbox to the containers that need
// them (for the downward API, or the hosts file of a pod on the pod
// network): from the status when the sandbox is the one it knows, else from
// the runtime (a sandbox just created), asked at most once per sync. Only
// then is the runtime asked, so containers that do not need them cost no
// extra call.
type sandboxIPs struct {
	m    *Manager
	id   string
	st   *runtime.PodStatus
	ips  []string
	done bool
}

// forContainer is the sandbox's IPs if c needs them, else nil.
func (s *sandboxIPs) forContainer(ctx context.Context, pod *v1.Pod, c *v1.Container) []string {
	if !wantsPodIPs(c) && pod.Spec.HostNetwork {
		return nil
	}
	if !s.done {
		s.ips, s.done = s.get(ctx), true
	}
	return s.ips
}

func (s *sandboxIPs) get(ctx context.Context) []string {
	if len(s.st.SandboxStatuses) > 0 && s.st.SandboxStatuses[0].ID == s.id {
		return s.st.IPs
	}
	ctx, cancel := s.m.callCtx(ctx, 0)
	defer cancel()
	resp, err := s.m.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.id})
	if err != nil {
		s.m.log.V(1).Info("no sandbox status for the pod's IPs", "sandbox", s.id, "err", err)
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

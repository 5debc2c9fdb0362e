package cri

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// SyncPod brings the pod one step towards its spec, in the kubelet's order:
// compute the actions; kill the pod if its sandbox must be recreated (or
// nothing is left to run), else kill the unwanted containers; create the
// sandbox (attempt+1); start ephemeral containers, then the next init
// container(s), then regular containers. A nil backoff means the manager's
// Config.CrashLoopBackoff.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, pullSecrets []v1.Secret, backoff *runtime.Backoff) runtime.PodSyncResult {
	var res runtime.PodSyncResult
	if pod == nil {
		res.Fail(fmt.Errorf("cri SyncPod: nil pod: %w", runtime.ErrInvalidConfig))
		return res
	}
	if status == nil {
		status = &runtime.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	if backoff == nil {
		backoff = m.cfg.CrashLoopBackoff
	}
	if err := m.checkPod(pod); err != nil {
		// Nothing of the pod starts; every container reports why.
		forEachContainer(pod, func(c *v1.Container, ctype string) bool {
			action := runtime.StartContainer
			if ctype == containerTypeInit {
				action = runtime.InitContainer
			}
			res.NewStep(action, c.Name).Fail(err, err.Error())
			return true
		})
		return res
	}
	actions := runtime.ComputePodActions(pod, status)
	m.setUpVolumes(ctx, pod, &actions, &res)
	if actions.CreateSandbox {
		m.forgetKilled(pod.UID) // the pod lives again
		if actions.SandboxID != "" {
			m.podEvent(pod, v1.EventTypeNormal, runtime.EventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
		}
	}
	m.execute(ctx, pod, status, pullSecrets, backoff, actions, &res)
	return res
}

func (m *Manager) execute(ctx context.Context, pod *v1.Pod, status *runtime.PodStatus, pullSecrets []v1.Secret, backoff *runtime.Backoff, p runtime.PodActions, res *runtime.PodSyncResult) {
	if p.KillPod {
		kill := m.killPod(ctx, pod, status.RunningPod(m.name), nil)
		res.AddPodSyncResult(kill)
		if kill.Error() != nil {
			return
		}
		if p.CreateSandbox {
			m.purgeInitContainers(ctx, pod, status)
		}
	} else {
		for id, k := range p.ContainersToKill {
			step := res.NewStep(runtime.KillContainer, k.Name)
			m.log.V(1).Info("killing container", "pod", pod.Namespace+"/"+pod.Name, "container", k.Name, "reason", k.Reason)
			if err := m.killContainer(ctx, pod, id, k.Name, k.Message, nil, nil); err != nil {
				step.Fail(fmt.Errorf("%w: %w", runtime.ErrKillContainer, err), err.Error())
				return
			}
		}
	}
	sandboxID := p.SandboxID
	if !p.CreateSandbox && (sandboxID == "" || p.KillPod) {
		return // nothing to start in
	}
	if p.CreateSandbox {
		defer m.creatingSandbox(pod.UID)() // its new cgroup is not an orphan
	}
	// The sandbox's config (its DNS, with the MissingClusterDNS events,
	// hostname, ports...) is made only when a sandbox is created or a
	// container is about to start, as the kubelet's lazyStart: a sync that
	// starts nothing, or only finds containers in back-off, makes none.
	var sandbox *runtimeapi.PodSandboxConfig
	configFailed := false
	configure := func() bool {
		if sandbox != nil || configFailed {
			return !configFailed
		}
		var err error
		if sandbox, err = m.sandboxConfig(pod, p.Attempt); err != nil {
			// As the kubelet: a sandbox to create fails to be created, one
			// that runs fails to be configured for the containers to start.
			action, reason := runtime.ConfigPodSandbox, runtime.ErrConfigPodSandbox
			if p.CreateSandbox {
				action, reason = runtime.CreatePodSandbox, runtime.ErrCreatePodSandbox
			}
			res.NewStep(action, string(pod.UID)).Fail(fmt.Errorf("%w: %w", reason, err),
				fmt.Sprintf("Failed to generate sandbox config for pod %q: %v", pod.Namespace+"/"+pod.Name, err))
			configFailed = true
		}
		return !configFailed
	}
	if p.CreateSandbox {
		if !configure() {
			return
		}
		step := res.NewStep(runtime.CreatePodSandbox, string(pod.UID))
		id, err := m.createSandbox(ctx, sandbox)
		if err != nil {
			step.Fail(fmt.Errorf("%w: %w", runtime.ErrCreatePodSandbox, err), fmt.Sprintf("Failed to create pod sandbox: %v", err))
			m.podEvent(pod, v1.EventTypeWarning, runtime.EventFailedCreateSandbox, "Failed to create pod sandbox: %v", err)
			return
		}
		sandboxID = id
	}
	if sandboxID == "" || (p.KillPod && !p.CreateSandbox) {
		return // nothing to start in
	}
	ips := &sandboxIPs{m: m, id: sandboxID, st: status}
	start := func(action runtime.SyncAction, c *v1.Container, ctype string) error {
		if msg, err := runtime.CrashLoopBackOff(backoff, pod, c, status); err != nil {
			res.NewStep(action, c.Name).Fail(err, msg)
			m.recordContainer(pod, c.Name, "", v1.EventTypeWarning, runtime.EventBackOff,
				"Back-off restarting failed container %s in pod %s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)
			return err
		}
		if !configure() {
			return errNoSandboxConfig
		}
		step := res.NewStep(action, c.Name)
		if msg, err := m.startContainer(ctx, sandboxID, sandbox, pod, c, ctype, status, ips, pullSecrets); err != nil {
			step.Fail(err, msg)
			m.log.V(1).Info("container start failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
			return err
		}
		return nil
	}
	for _, i := range p.EphemeralContainersToStart {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		if err := start(runtime.StartContainer, &c, containerTypeEphemeral); errors.Is(err, errNoSandboxConfig) {
			return
		}
	}
	for _, i := range p.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		if err := start(runtime.InitContainer, c, containerTypeInit); err != nil {
			if podutil.IsRestartableInitContainer(c) && !errors.Is(err, errNoSandboxConfig) {
				continue
			}
			return
		}
	}
	for _, i := range p.ContainersToStart {
		if err := start(runtime.StartContainer, &pod.Spec.Containers[i], containerTypeRegular); errors.Is(err, errNoSandboxConfig) {
			return
		}
	}
}

// errNoSandboxConfig stops a sync's container starts once the sandbox's
// config could not be made (recorded as its own step).
var errNoSandboxConfig = errors.New("no sandbox config")

package cri

import (
	"context"
	"fmt"
	"net/url"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

var _ runtime.StreamURLer = (*Manager)(nil)

// GetExecURL asks the runtime (the CRI's Exec) for the URL of an exec
// session of req.Cmd in container req.ContainerID, served by the runtime's
// streaming server, as the kubelet's GetExec. With TTY, stderr is not asked
// for: the CRI forbids both, and the kubelet merges stderr into the
// terminal as well. A container the runtime does not know gives an error
// wrapping runtime.ErrNotFound; an empty ID one wrapping
// runtime.ErrInvalidContainerID.
func (m *Manager) GetExecURL(ctx context.Context, pod *v1.Pod, req runtime.ExecRequest) (*url.URL, error) {
	if len(req.Cmd) == 0 {
		return nil, fmt.Errorf("cri Exec in %s: no command", podRef(pod))
	}
	if err := checkStreams("Exec", pod, req); err != nil {
		return nil, err
	}
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.rt.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: req.ContainerID.ID, Cmd: req.Cmd,
		Tty: req.TTY, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr && !req.TTY,
	})
	if err != nil {
		return nil, wrapErr("Exec", err)
	}
	return streamURL("Exec", resp.Url)
}

// GetAttachURL asks the runtime (the CRI's Attach) for the URL of an attach
// session to container req.ContainerID; req.Cmd is ignored. Streams and
// errors are as GetExecURL's.
func (m *Manager) GetAttachURL(ctx context.Context, pod *v1.Pod, req runtime.ExecRequest) (*url.URL, error) {
	if err := checkStreams("Attach", pod, req); err != nil {
		return nil, err
	}
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	resp, err := m.rt.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: req.ContainerID.ID,
		Tty:         req.TTY, Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr && !req.TTY,
	})
	if err != nil {
		return nil, wrapErr("Attach", err)
	}
	return streamURL("Attach", resp.Url)
}

// GetPortForwardURL asks the runtime (the CRI's PortForward) for the URL of
// a port-forward session to the sandbox sandboxID. An empty sandboxID
// means the pod's newest sandbox, as the kubelet's GetPortForward finds it
// by the pod's UID (an error wrapping runtime.ErrNotFound if it has none).
// ports may be empty: the client names each stream's port.
func (m *Manager) GetPortForwardURL(ctx context.Context, pod *v1.Pod, sandboxID string, ports []int32) (*url.URL, error) {
	for _, p := range ports {
		if p <= 0 || p > 65535 {
			return nil, fmt.Errorf("cri PortForward to %s: port %d out of range", podRef(pod), p)
		}
	}
	ctx, cancel := m.callCtx(ctx, 0)
	defer cancel()
	if sandboxID == "" {
		if pod == nil || pod.UID == "" {
			return nil, fmt.Errorf("cri PortForward: neither a sandbox ID nor a pod UID")
		}
		sbs, err := m.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{LabelPodUID: string(pod.UID)}}})
		if err != nil {
			return nil, wrapErr("ListPodSandbox", err)
		}
		if len(sbs.Items) == 0 {
			return nil, fmt.Errorf("cri PortForward: %w: no sandbox of %s", runtime.ErrNotFound, podRef(pod))
		}
		sortSandboxesNewestFirst(sbs.Items)
		sandboxID = sbs.Items[0].Id
	}
	resp, err := m.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		return nil, wrapErr("PortForward", err)
	}
	return streamURL("PortForward", resp.Url)
}

// checkStreams refuses what the runtime would refuse less clearly.
func checkStreams(op string, pod *v1.Pod, req runtime.ExecRequest) error {
	if req.ContainerID.ID == "" {
		return fmt.Errorf("cri %s in %s: %w: empty", op, podRef(pod), runtime.ErrInvalidContainerID)
	}
	if !req.Stdin && !req.Stdout && !req.Stderr {
		return fmt.Errorf("cri %s in %s: one of stdin, stdout and stderr must be asked for", op, podRef(pod))
	}
	return nil
}

// streamURL parses the runtime's answer. The kubelet proxies to it as it
// is, so a URL the proxy cannot reach (empty, relative) is an error here,
// not a failed upgrade later.
func streamURL(op, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("cri %s: the runtime returned no URL", op)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("cri %s: the runtime returned a bad URL %q: %v", op, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cri %s: the runtime returned %q, want an absolute http(s) URL of its streaming server", op, raw)
	}
	return u, nil
}

func podRef(pod *v1.Pod) string {
	if pod == nil {
		return "a pod"
	}
	return "pod " + pod.Namespace + "/" + pod.Name
}

package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/server/streaming"
)

// installStreaming serves /exec, /attach, /portForward and /run, as the
// kubelet's auth-required handlers, each with and without the pod's UID.
func (s *Server) installStreaming() {
	c := s.cfg
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		if c.StreamURLs != nil || c.Streaming != nil {
			s.mux.HandleFunc(method+" /exec/{namespace}/{pod}/{container}", s.getExec)
			s.mux.HandleFunc(method+" /exec/{namespace}/{pod}/{uid}/{container}", s.getExec)
			s.mux.HandleFunc(method+" /attach/{namespace}/{pod}/{container}", s.getAttach)
			s.mux.HandleFunc(method+" /attach/{namespace}/{pod}/{uid}/{container}", s.getAttach)
		}
		if c.StreamURLs != nil || c.PortForward != nil {
			s.mux.HandleFunc(method+" /portForward/{namespace}/{pod}", s.getPortForward)
			s.mux.HandleFunc(method+" /portForward/{namespace}/{pod}/{uid}", s.getPortForward)
		}
	}
	if c.Exec != nil {
		s.mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", s.postRun)
		s.mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", s.postRun)
	}
}

// podByName is the kubelet's GetPodByName over the agent's pods.
func (s *Server) podByName(ns, name string) *v1.Pod {
	for _, p := range s.cfg.Pods.Pods() {
		if p.Namespace == ns && p.Name == name {
			return p
		}
	}
	return nil
}

// podFullName is the kubelet's name_namespace of a pod in its messages.
func podFullName(name, ns string) string { return name + "_" + ns }

// runningPod finds the pod among what the runtime runs, as the kubelet's
// FindPod: by UID when the request named one, else by name and namespace.
func (s *Server) runningPod(ctx context.Context, ns, name string, uid types.UID) (*runtime.Pod, error) {
	pods, err := s.cfg.RunningPods.GetPods(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if (uid != "" && p.ID == uid) || (uid == "" && p.Namespace == ns && p.Name == name) {
			return p, nil
		}
	}
	return nil, nil
}

// findContainer returns the ID of the running container the request names;
// found false when the runtime runs no such container (or no such pod).
func (s *Server) findContainer(ctx context.Context, r *http.Request) (id runtime.ContainerID, found bool, err error) {
	ns, name, uid := r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid"))
	rp, err := s.runningPod(ctx, ns, name, uid)
	if err != nil || rp == nil {
		return runtime.ContainerID{}, false, err
	}
	for _, c := range rp.Containers {
		if c.Name == r.PathValue("container") {
			return c.ID, true, nil
		}
	}
	return runtime.ContainerID{}, false, nil
}

// execTarget is the first part of the kubelet's getExec and getAttach: the
// streams asked for (400 without any), the pod (404 "pod does not exist")
// and its running container (500, as the kubelet's runtime lookup error).
// ok false: the client was answered.
func (s *Server) execTarget(w http.ResponseWriter, r *http.Request, attach bool) (pod *v1.Pod, id runtime.ContainerID, opts streaming.Options, ok bool) {
	opts, err := streaming.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, id, opts, false
	}
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	if pod = s.podByName(ns, name); pod == nil {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return nil, id, opts, false
	}
	id, found, err := s.findContainer(r.Context(), r)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, id, opts, false
	case !found && attach:
		http.Error(w, fmt.Sprintf("container %s not found in pod %s", container, podFullName(name, ns)), http.StatusInternalServerError)
		return nil, id, opts, false
	case !found:
		http.Error(w, fmt.Sprintf("container not found (%q)", container), http.StatusInternalServerError)
		return nil, id, opts, false
	}
	return pod, id, opts, true
}

// getExec serves /exec/{namespace}/{pod}[/{uid}]/{container}?command=...:
// in process through Config.Streaming, or proxied to the URL the runtime's
// own streaming server gives (Config.StreamURLs). An empty command is a
// 400 here (the apiserver never sends one; the kubelet would fail the
// session instead).
func (s *Server) getExec(w http.ResponseWriter, r *http.Request) {
	cmd := r.URL.Query()[streaming.CommandParam]
	if len(cmd) == 0 {
		http.Error(w, fmt.Sprintf("missing required %q parameter", streaming.CommandParam), http.StatusBadRequest)
		return
	}
	pod, id, opts, ok := s.execTarget(w, r, false)
	if !ok {
		return
	}
	if s.cfg.StreamURLs != nil {
		u, err := s.cfg.StreamURLs.GetExecURL(r.Context(), pod, runtime.ExecRequest{
			ContainerID: id, Cmd: cmd, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, TTY: opts.TTY,
		})
		s.proxyStream(w, r, u, err)
		return
	}
	s.streams.ServeExec(w, r, opts, func(ctx context.Context, io runtime.AttachIO) error {
		return s.cfg.Streaming.Exec(ctx, pod, id, cmd, io)
	})
}

// getAttach serves /attach/{namespace}/{pod}[/{uid}]/{container}. A
// runtime's streaming server gets the container spec's TTY, as the
// kubelet's GetAttach: a process's terminal cannot change after it started.
func (s *Server) getAttach(w http.ResponseWriter, r *http.Request) {
	pod, id, opts, ok := s.execTarget(w, r, true)
	if !ok {
		return
	}
	fullName := podFullName(pod.Name, pod.Namespace)
	if uid := types.UID(r.PathValue("uid")); uid != "" && pod.UID != uid {
		http.Error(w, fmt.Sprintf("pod %s not found", fullName), http.StatusInternalServerError)
		return
	}
	spec := containerSpec(pod, r.PathValue("container"))
	if spec == nil {
		http.Error(w, fmt.Sprintf("container %s not found in pod %s", r.PathValue("container"), fullName), http.StatusInternalServerError)
		return
	}
	if s.cfg.StreamURLs != nil {
		u, err := s.cfg.StreamURLs.GetAttachURL(r.Context(), pod, runtime.ExecRequest{
			ContainerID: id, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, TTY: spec.TTY,
		})
		s.proxyStream(w, r, u, err)
		return
	}
	s.streams.ServeAttach(w, r, opts, func(ctx context.Context, io runtime.AttachIO) error {
		return s.cfg.Streaming.Attach(ctx, pod, id, io)
	})
}

func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if c := &pod.Spec.EphemeralContainers[i]; c.Name == name {
			return (*v1.Container)(&c.EphemeralContainerCommon)
		}
	}
	return nil
}

// getPortForward serves /portForward/{namespace}/{pod}[/{uid}] as the
// kubelet's: bad ports 400, an unknown pod 404 ("pod does not exist", or
// "pod not found" for another UID), a pod the runtime does not run 500.
func (s *Server) getPortForward(w http.ResponseWriter, r *http.Request) {
	ports, err := streaming.PortForwardPorts(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ns, name, uid := r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid"))
	pod := s.podByName(ns, name)
	if pod == nil {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	if uid != "" && pod.UID != uid {
		http.Error(w, "pod not found", http.StatusNotFound)
		return
	}
	rp, err := s.runningPod(r.Context(), ns, name, uid)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if rp == nil || rp.IsEmpty() {
		http.Error(w, fmt.Sprintf("pod not found (%q)", podFullName(name, ns)), http.StatusInternalServerError)
		return
	}
	if s.cfg.StreamURLs != nil {
		u, err := s.cfg.StreamURLs.GetPortForwardURL(r.Context(), pod, sandboxID(rp), ports)
		s.proxyStream(w, r, u, err)
		return
	}
	s.streams.ServePortForward(w, r, pod.Name, string(pod.UID), ports, func(ctx context.Context, port int32, stream io.ReadWriteCloser) error {
		return s.cfg.PortForward.PortForward(ctx, pod, port, stream)
	})
}

// sandboxID is the pod's ready sandbox, else its newest, as the CRI
// runtime manager's GetPortForward picks it.
func sandboxID(p *runtime.Pod) string {
	for _, sb := range p.Sandboxes {
		if sb.State == runtime.ContainerStateRunning {
			return sb.ID.ID
		}
	}
	if len(p.Sandboxes) > 0 {
		return p.Sandboxes[0].ID.ID
	}
	return ""
}

// postRun serves POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...:
// the command (split on spaces, as the kubelet's legacy parameter) runs to
// its end through Config.Exec and its stdout then stderr are the body;
// a non-zero exit is a 500 with the CRI client's "command '...' exited
// with N: <stderr>".
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	if s.podByName(ns, name) == nil {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	id, found, err := s.findContainer(r.Context(), r)
	if err == nil && !found {
		err = fmt.Errorf("container not found (%q)", container)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	stdout, stderr, code, err := s.cfg.Exec.ExecSync(r.Context(), id, cmd, 0)
	if err == nil && code != 0 {
		err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := append(stdout, stderr...)
	if len(out) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json") // sic, as the kubelet's
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(out); err != nil {
		s.log.Error(err, "Writing the output of /run failed")
	}
}

// proxyStream proxies the client's upgrade request to u, the runtime's own
// streaming server, as the kubelet's proxyStream does (an upgrade is
// required; a failed backend is a 500). The runtime's error for u is a 404
// when it wraps runtime.ErrNotFound, else a 500.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, u *url.URL, err error) {
	if err == nil && u == nil {
		err = errors.New("the runtime returned no streaming URL")
	}
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, runtime.ErrNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
		return
	}
	proxy.NewUpgradeAwareHandler(u, nil, false, true, proxyResponder{s}).ServeHTTP(w, r)
}

type proxyResponder struct{ s *Server }

func (p proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	p.s.log.Error(err, "Error while proxying request", "path", r.URL.Path)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

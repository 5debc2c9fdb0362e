package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
)

var (
	errDecode  = errors.New(`{"message": "Unable to decode query."}`)
	errInvalid = errors.New(`{"message": "Invalid request."}`)
)

// getContainerLogs serves /containerLogs/{namespace}/{pod}/{container} as
// the kubelet does: the query is a v1.PodLogOptions (plus the legacy
// "tail"), undecodable values give 400 and invalid ones 422 with the
// kubelet's JSON messages; an unknown pod or container 404; a container
// without logs to show 400 with the kubelet's reason. The body streams,
// flushed after every write, so `kubectl logs -f` sees lines as they come;
// it ends with the request's context when the client goes away.
func (s *Server) getContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errInvalid) {
			code = http.StatusUnprocessableEntity
		}
		http.Error(w, err.Error(), code)
		return
	}
	var pod *v1.Pod
	for _, p := range s.cfg.Pods.Pods() {
		if p.Namespace == ns && p.Name == podName {
			pod = p
			break
		}
	}
	if pod == nil {
		http.Error(w, fmt.Sprintf("pod %q does not exist", podName), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, podName), http.StatusNotFound)
		return
	}
	id, err := logContainerID(pod.Name, &pod.Status, container, opts.Previous)
	if err == nil && id.IsEmpty() {
		id, err = s.runningLogContainer(r, pod, container)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fw := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
	}
	w.Header().Set("Content-Type", "text/plain")
	if err := s.cfg.Logs.GetContainerLogs(r.Context(), pod, id, opts, fw, fw); err != nil && r.Context().Err() == nil {
		if !fw.wrote {
			code := http.StatusBadRequest
			if errors.Is(err, runtime.ErrNotFound) {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		s.log.Error(err, "Streaming container logs failed", "pod", ns+"/"+podName, "container", container)
	}
}

// flushWriter flushes after every write so a followed log streams.
type flushWriter struct {
	w     http.ResponseWriter
	f     http.Flusher
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	f.wrote = true
	n, err := f.w.Write(p)
	if f.f != nil {
		f.f.Flush()
	}
	return n, err
}

// parseLogOptions decodes the query as the kubelet decodes v1.PodLogOptions
// and validates it as the apiserver does.
func parseLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	if tail := q.Get("tail"); tail != "" { // the legacy name of tailLines
		q["tailLines"] = []string{tail}
		if tail == "all" {
			delete(q, "tailLines")
		}
	}
	opts := &v1.PodLogOptions{
		Follow:     queryBool(q, "follow"),
		Previous:   queryBool(q, "previous"),
		Timestamps: queryBool(q, "timestamps"),
	}
	for _, f := range []struct {
		name string
		dst  **int64
	}{{"tailLines", &opts.TailLines}, {"limitBytes", &opts.LimitBytes}, {"sinceSeconds", &opts.SinceSeconds}} {
		v, ok := q[f.name]
		if !ok || len(v) == 0 || v[0] == "" {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return nil, errDecode
		}
		*f.dst = &n
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, errDecode
		}
		opts.SinceTime = &metav1.Time{Time: t}
	}
	switch {
	case opts.TailLines != nil && *opts.TailLines < 0,
		opts.LimitBytes != nil && *opts.LimitBytes < 1,
		opts.SinceSeconds != nil && *opts.SinceSeconds < 1,
		opts.SinceSeconds != nil && opts.SinceTime != nil:
		return nil, errInvalid
	}
	return opts, nil
}

// queryBool decodes a boolean parameter as apimachinery does: absent, "0"
// and "false" in any case are false, anything else (even empty) true.
func queryBool(q url.Values, name string) bool {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && !strings.EqualFold(v[0], "false")
}

func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// logContainerID picks the container instance whose logs to show, with
// the kubelet's reasons when there is none (validateContainerLogStatus).
func logContainerID(podName string, st *v1.PodStatus, name string, previous bool) (runtime.ContainerID, error) {
	var cs *v1.ContainerStatus
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is not available", name, podName)
	}
	last, state := cs.LastTerminationState.Terminated, cs.State
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return runtime.ContainerID{}, fmt.Errorf("previous terminated container %q in pod %q not found", name, podName)
		}
		id = last.ContainerID
	case state.Running != nil:
		if cs.ContainerID == "" {
			// A provider's status need not carry IDs: the caller asks
			// the runtime.
			return runtime.ContainerID{}, nil
		}
		id = cs.ContainerID
	case state.Terminated != nil:
		id = state.Terminated.ContainerID
		if id == "" && last != nil {
			id = last.ContainerID
		}
		if id == "" {
			return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is terminated", name, podName)
		}
	case last != nil:
		if last.ContainerID == "" {
			return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is terminated", name, podName)
		}
		id = last.ContainerID
	case state.Waiting != nil:
		switch reason := state.Waiting.Reason; reason {
		case runtime.ErrImagePull.Error():
			return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", name, podName)
		case runtime.ErrImagePullBackOff.Error():
			return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", name, podName)
		default:
			return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is waiting to start: %v", name, podName, reason)
		}
	default:
		return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", name, podName)
	}
	cid, err := runtime.ParseContainerID(id)
	if err != nil {
		return runtime.ContainerID{}, fmt.Errorf("container %q in pod %q: %w", name, podName, err)
	}
	return cid, nil
}

// runningLogContainer is the running container name of pod as the runtime
// lists it, for a status without container IDs (a virtual-kubelet
// provider's, which the kubelet's would always have).
func (s *Server) runningLogContainer(r *http.Request, pod *v1.Pod, name string) (runtime.ContainerID, error) {
	unavailable := fmt.Errorf("container %q in pod %q is not available", name, pod.Name)
	if s.cfg.RunningPods == nil {
		return runtime.ContainerID{}, unavailable
	}
	rp, err := s.runningPod(r.Context(), pod.Namespace, pod.Name, pod.UID)
	if err != nil {
		return runtime.ContainerID{}, err
	}
	if rp != nil {
		for _, c := range rp.Containers {
			if c.Name == name {
				return c.ID, nil
			}
		}
	}
	return runtime.ContainerID{}, unavailable
}

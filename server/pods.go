package server

import (
	"encoding/json"
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// getPods serves /pods: the pods the agent runs as a v1 PodList, as the
// kubelet's.
func (s *Server) getPods(w http.ResponseWriter, _ *http.Request) {
	s.writePodList(w, s.cfg.Pods.Pods())
}

// getRunningPods serves /runningpods/: what the runtime runs, as pods with
// only their identity and containers' names and images (the kubelet's
// ToAPIPod).
func (s *Server) getRunningPods(w http.ResponseWriter, r *http.Request) {
	rps, err := s.cfg.RunningPods.GetPods(r.Context(), false)
	if err != nil {
		s.log.Error(err, "Listing running pods failed")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	pods := make([]*v1.Pod, 0, len(rps))
	for _, rp := range rps {
		p := &v1.Pod{}
		p.UID, p.Name, p.Namespace = rp.ID, rp.Name, rp.Namespace
		for _, c := range rp.Containers {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
		}
		pods = append(pods, p)
	}
	s.writePodList(w, pods)
}

func (s *Server) writePodList(w http.ResponseWriter, pods []*v1.Pod) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	data, err := json.Marshal(&list)
	if err != nil {
		s.log.Error(err, "Encoding pods failed")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

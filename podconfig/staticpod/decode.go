package staticpod

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Errors, wrapped with detail; branch with errors.Is.
var (
	// ErrDecode: the manifest is not a v1 Pod (or PodList where allowed).
	ErrDecode = errors.New("staticpod: cannot decode manifest")
	// ErrInvalid: the pod decoded but may not run as a static pod.
	ErrInvalid = errors.New("staticpod: invalid static pod")
)

// Decode parses one YAML or JSON document holding a v1 Pod, or, if allowList,
// a v1 PodList. apiVersion must be "v1" and kind "Pod" (or "PodList"); the
// JSON field names are case-sensitive, as in the apiserver. The pods are
// returned as decoded, without defaults.
func Decode(data []byte, allowList bool) ([]*v1.Pod, error) {
	js, err := utilyaml.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	var tm metav1.TypeMeta
	if err := utiljson.Unmarshal(js, &tm); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if tm.APIVersion != "v1" {
		return nil, fmt.Errorf("%w: apiVersion %q, want \"v1\"", ErrDecode, tm.APIVersion)
	}
	switch {
	case tm.Kind == "Pod":
		pod := &v1.Pod{}
		if err := utiljson.Unmarshal(js, pod); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDecode, err)
		}
		pod.TypeMeta = metav1.TypeMeta{} // as in objects from a typed client
		return []*v1.Pod{pod}, nil
	case tm.Kind == "PodList" && allowList:
		list := &v1.PodList{}
		if err := utiljson.Unmarshal(js, list); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDecode, err)
		}
		pods := make([]*v1.Pod, len(list.Items))
		for i := range list.Items {
			list.Items[i].TypeMeta = metav1.TypeMeta{}
			pods[i] = &list.Items[i]
		}
		return pods, nil
	}
	want := `"Pod"`
	if allowList {
		want = `"Pod" or "PodList"`
	}
	return nil, fmt.Errorf("%w: kind %q, want %s", ErrDecode, tm.Kind, want)
}

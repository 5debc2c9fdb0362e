package staticpod

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// Manifest is one pod of a manifest and what strict decoding found in its
// part of the manifest.
type Manifest struct {
	Pod *v1.Pod
	// Warnings name the unknown and duplicate fields, as the apiserver's
	// field validation warns of them (`unknown field
	// "spec.containers[0].comand"`). They do not stop the pod: the fields are
	// dropped (the first of duplicates is overridden), as the kubelet drops
	// them.
	Warnings []string
}

// DecodeStrict is Decode that also reports the unknown and duplicate fields
// of each pod. Only what Decode rejects is an error.
func DecodeStrict(data []byte, allowList bool) ([]Manifest, error) {
	pods, err := Decode(data, allowList)
	if err != nil {
		return nil, err
	}
	out := make([]Manifest, len(pods))
	for i, p := range pods {
		out[i].Pod = p
	}
	for _, w := range strictWarnings(data) {
		if i, rest, ok := listItem(w); ok {
			if i < len(out) {
				out[i].Warnings = append(out[i].Warnings, rest)
			}
			continue
		}
		for i := range out { // not about one item: about all
			out[i].Warnings = append(out[i].Warnings, w)
		}
	}
	return out, nil
}

// Prepare is Prepare(m.Pod, o). When the pod is invalid and the manifest
// has unknown fields, the error names them: a misspelled "containres" is
// why spec.containers is missing.
func (m Manifest) Prepare(o Origin) error {
	err := Prepare(m.Pod, o)
	if err == nil {
		return nil
	}
	var unknown []string
	for _, w := range m.Warnings {
		if strings.HasPrefix(w, "unknown field") {
			unknown = append(unknown, w)
		}
	}
	if len(unknown) == 0 {
		return err
	}
	return fmt.Errorf("%w (the manifest has %s)", err, strings.Join(unknown, ", "))
}

// strictWarnings decodes data strictly, as the apiserver does with
// fieldValidation=Warn, and returns what that found: unknown fields and
// duplicate fields (JSON or YAML keys).
func strictWarnings(data []byte) []string {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(v1.SchemeGroupVersion, &v1.Pod{}, &v1.PodList{})
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	_, _, err := s.Decode(data, nil, nil)
	var se interface{ Errors() []error }
	if err == nil || !errors.As(err, &se) || !runtime.IsStrictDecodingError(err) {
		return nil
	}
	var out []string
	for _, e := range se.Errors() {
		msg := e.Error()
		// YAML duplicates come as one error with a line per key.
		if rest, ok := strings.CutPrefix(msg, "yaml: unmarshal errors:"); ok {
			for _, l := range strings.Split(rest, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					out = append(out, "duplicate field: "+l)
				}
			}
			continue
		}
		out = append(out, msg)
	}
	return out
}

var itemField = regexp.MustCompile(`^(unknown|duplicate) field "items\[(\d+)\]\.(.*)"$`)

// listItem splits a warning about a PodList item into the item's index and
// the warning about the pod.
func listItem(w string) (int, string, bool) {
	m := itemField.FindStringSubmatch(w)
	if m == nil {
		return 0, "", false
	}
	i, err := strconv.Atoi(m[2])
	if err != nil {
		return 0, "", false
	}
	return i, fmt.Sprintf("%s field %q", m[1], m[3]), true
}

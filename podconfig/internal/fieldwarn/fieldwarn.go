// Package fieldwarn reports the unknown or duplicate fields of a static
// pod's manifest, for podconfig's file and manifest-URL sources.
package fieldwarn

import (
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/safeevent"
	"github.com/nodekit/nodekit/podconfig"
)

// Record records one Warning event on pod listing warnings (from
// staticpod.DecodeStrict) and logs them; nothing without warnings.
func Record(r podconfig.EventRecorder, log logr.Logger, pod *v1.Pod, location string, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	ref := pod.Name
	if pod.Namespace != "" {
		ref = pod.Namespace + "/" + pod.Name
	}
	log.Info("Manifest has unknown or duplicate fields; they are ignored", "pod", ref, "location", location, "warnings", warnings)
	if err := safeevent.Eventf(r, pod, v1.EventTypeWarning, podconfig.ReasonFieldValidationWarning,
		"Manifest %s: %s; ignored", location, strings.Join(warnings, "; ")); err != nil {
		log.Error(err, "Recording event")
	}
}

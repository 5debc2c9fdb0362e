package podconfig

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records an event about an object. client-go's
// record.EventRecorder satisfies it as it is.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// ReasonFailedValidation is the event reason for a pod that a source or the
// mux rejected, as in the kubelet.
const ReasonFailedValidation = "FailedValidation"

// ReasonFieldValidationWarning is the Warning event reason for a static pod
// whose manifest has unknown or duplicate fields: the pod runs without them,
// as the apiserver's fieldValidation=Warn would have it.
const ReasonFieldValidationWarning = "FieldValidationWarning"

// WarnFields records one Warning event on pod listing warnings (from
// staticpod.DecodeStrict) and logs them; nothing without warnings.
func WarnFields(r EventRecorder, log logr.Logger, pod *v1.Pod, location string, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	log.Info("Manifest has unknown or duplicate fields; they are ignored", "pod", klogRef(pod), "location", location, "warnings", warnings)
	if err := SafeEventf(r, pod, v1.EventTypeWarning, ReasonFieldValidationWarning,
		"Manifest %s: %s; ignored", location, strings.Join(warnings, "; ")); err != nil {
		log.Error(err, "Recording event")
	}
}

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, string, string, string, ...interface{}) {}

// SafeEventf calls r.Eventf (nothing if r is nil) and turns a panic in the
// recorder into an error, so a caller's faulty recorder cannot take down
// the goroutine that reports. The sources and the agent record events
// through it; a custom source or agent with a caller's recorder should too.
func SafeEventf(r EventRecorder, object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) (err error) {
	if r == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("podconfig: event recorder panicked: %v", p)
		}
	}()
	r.Eventf(object, eventtype, reason, messageFmt, args...)
	return nil
}

package podconfig

import (
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

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, string, string, string, ...interface{}) {}

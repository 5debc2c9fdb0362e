package podconfig

import (
	"fmt"

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

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, string, string, string, ...interface{}) {}

// SafeEventf calls r.Eventf and turns a panic in the recorder into an error,
// so a faulty recorder cannot take down the goroutine that reports.
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

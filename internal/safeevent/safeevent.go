// Package safeevent records Kubernetes events through a caller's recorder
// without letting a faulty recorder take down the goroutine that reports.
package safeevent

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// Recorder records an event about an object; client-go's
// record.EventRecorder and podconfig.EventRecorder satisfy it.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Eventf calls r.Eventf (nothing if r is nil) and turns a panic in the
// recorder into an error. The config sources and the agent record events
// through it.
func Eventf(r Recorder, object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) (err error) {
	if r == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("safeevent: event recorder panicked: %v", p)
		}
	}()
	r.Eventf(object, eventtype, reason, messageFmt, args...)
	return nil
}

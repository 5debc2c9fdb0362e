package podconfigtest

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// Event is one recorded event.
type Event struct {
	Object  runtime.Object
	Type    string
	Reason  string
	Message string
}

// Recorder is a fake EventRecorder (and satisfies client-go's
// record.EventRecorder's Eventf). Its zero value is ready; it is safe for
// concurrent use. If C is non-nil each event is also sent on it.
type Recorder struct {
	C chan Event

	mu     sync.Mutex
	events []Event
}

// NewRecorder returns a Recorder that also sends events on a channel of the
// given capacity (0 for none).
func NewRecorder(buffer int) *Recorder {
	r := &Recorder{}
	if buffer > 0 {
		r.C = make(chan Event, buffer)
	}
	return r
}

// Eventf records an event.
func (r *Recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	e := Event{Object: object, Type: eventtype, Reason: reason, Message: fmt.Sprintf(messageFmt, args...)}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.C != nil {
		r.C <- e
	}
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

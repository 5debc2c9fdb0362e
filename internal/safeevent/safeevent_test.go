package safeevent_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodekit/nodekit/internal/safeevent"
)

type recorder struct {
	panics bool
	got    []string
}

func (r *recorder) Eventf(_ runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	if r.panics {
		panic("recorder broke")
	}
	r.got = append(r.got, eventtype+" "+reason)
}

func TestSafeEventf(t *testing.T) {
	pod := &v1.Pod{}
	if err := safeevent.Eventf(nil, pod, v1.EventTypeNormal, "R", "m"); err != nil {
		t.Errorf("nil recorder: %v, want nil", err)
	}
	r := &recorder{}
	if err := safeevent.Eventf(r, pod, v1.EventTypeWarning, "R", "m %d", 1); err != nil || len(r.got) != 1 || r.got[0] != "Warning R" {
		t.Errorf("recorded %v, err %v; want one Warning R event", r.got, err)
	}
	err := safeevent.Eventf(&recorder{panics: true}, pod, v1.EventTypeNormal, "R", "m")
	if err == nil || !strings.Contains(err.Error(), "recorder broke") {
		t.Errorf("a panicking recorder: %v, want an error carrying the panic", err)
	}
}

package podworkerstest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/podworkers/podworkerstest"
	"github.com/nodekit/nodekit/runtime"
)

func TestSyncerRecordsAndProgramsResults(t *testing.T) {
	s := &podworkerstest.Syncer{}
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "1", Name: "p"}}
	boom := errors.New("boom")
	waited := s.WaitCalls(3)

	if term, err := s.SyncPod(ctx, podworkers.SyncPodCreate, pod, nil, nil); term || err != nil {
		t.Fatalf("default SyncPod = %v, %v", term, err)
	}
	s.SetTerminal("1")
	s.SetError(podworkerstest.SyncTerminatingPod, "1", boom)
	if term, _ := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil, nil); !term {
		t.Error("SetTerminal had no effect")
	}
	grace := int64(7)
	if err := s.SyncTerminatingPod(ctx, pod, nil, &grace, nil); !errors.Is(err, boom) {
		t.Errorf("SetError had no effect: %v", err)
	}
	<-waited
	s.SetError(podworkerstest.SyncTerminatingPod, "1", nil)
	if err := s.SyncTerminatingPod(ctx, pod, nil, &grace, nil); err != nil {
		t.Errorf("cleared error still returned: %v", err)
	}
	want := []podworkerstest.Method{podworkerstest.SyncPod, podworkerstest.SyncPod, podworkerstest.SyncTerminatingPod, podworkerstest.SyncTerminatingPod}
	if got := s.Methods("1"); !reflect.DeepEqual(got, want) {
		t.Errorf("methods %v, want %v", got, want)
	}
	if c := s.CallsFor("1")[2]; c.GracePeriod != 7 || c.UpdateType != podworkers.SyncPodSync {
		t.Errorf("call %+v", c)
	}
	if len(s.CallsFor("2")) != 0 {
		t.Error("calls of another pod")
	}
}

func TestCacheAnswersAtOnce(t *testing.T) {
	c := podworkerstest.NewCache()
	st := &runtime.PodStatus{ID: "1"}
	c.Set("1", st, nil, time.Unix(1, 0))
	got, err := c.GetNewerThan(context.Background(), "1", time.Unix(100, 0))
	if err != nil || got != st {
		t.Fatalf("GetNewerThan = %v, %v", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.GetNewerThan(ctx, "1", time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ended context: %v", err)
	}
}

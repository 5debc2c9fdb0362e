package syncloop_test

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/syncloop"
)

func TestRunOnce(t *testing.T) {
	clk := &afterClock{FakeClock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	var mu sync.Mutex
	attempts := map[types.UID]int{}
	boom := errors.New("image pull failed")
	run := func(_ context.Context, p *v1.Pod) (bool, error) {
		mu.Lock()
		attempts[p.UID]++
		n := attempts[p.UID]
		mu.Unlock()
		switch p.UID {
		case "runs":
			return true, nil
		case "third-time":
			return n == 3, nil
		case "fails":
			return false, boom
		case "panics":
			panic("runner bug")
		}
		return false, nil // "never" runs
	}
	updates := make(chan podconfig.PodUpdate, 1)
	pods := []*v1.Pod{pod("runs"), pod("third-time"), pod("never"), pod("fails"), pod("panics")}
	updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: pods, Source: "file"}

	results, err := syncloop.RunOnce(context.Background(), updates, run, syncloop.RunOnceConfig{Clock: clk, MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(pods) {
		t.Fatalf("%d results for %d pods", len(results), len(pods))
	}
	for i, tc := range []struct {
		name  string
		check func(error) bool
	}{
		{"a pod running at once succeeds", func(err error) bool { return err == nil }},
		{"a pod running after retries succeeds", func(err error) bool { return err == nil }},
		{"a pod never running fails after the retries", func(err error) bool { return errors.Is(err, syncloop.ErrPodNotRunning) }},
		{"a pod whose sync fails reports the error", func(err error) bool { return errors.Is(err, boom) }},
		{"a panicking runner is an error", func(err error) bool { return err != nil }},
	} {
		if results[i].Pod != pods[i] || !tc.check(results[i].Err) {
			t.Errorf("%s: result %+v", tc.name, results[i])
		}
	}
	if attempts["never"] != 4 || attempts["fails"] != 1 || attempts["third-time"] != 3 {
		t.Errorf("attempts %v", attempts)
	}
	got := clk.Delays()
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	s := time.Second
	// third-time waits 1s, 2s; never waits 1s, 2s, 4s
	if want := []time.Duration{s, s, 2 * s, 2 * s, 4 * s}; !reflect.DeepEqual(got, want) {
		t.Errorf("retry delays %v, want %v", got, want)
	}
}

func TestRunOnceWithoutManifest(t *testing.T) {
	clk := &afterClock{FakeClock: clocktesting.NewFakeClock(time.Unix(0, 0))}
	run := func(context.Context, *v1.Pod) (bool, error) { return true, nil }
	if _, err := syncloop.RunOnce(context.Background(), make(chan podconfig.PodUpdate), run, syncloop.RunOnceConfig{Clock: clk}); !errors.Is(err, syncloop.ErrNoManifest) {
		t.Errorf("no update: %v", err)
	}
	closed := make(chan podconfig.PodUpdate)
	close(closed)
	if _, err := syncloop.RunOnce(context.Background(), closed, run, syncloop.RunOnceConfig{Clock: clk}); !errors.Is(err, syncloop.ErrNoManifest) {
		t.Errorf("closed channel: %v", err)
	}
	if _, err := syncloop.RunOnce(context.Background(), closed, nil, syncloop.RunOnceConfig{}); !errors.Is(err, syncloop.ErrInvalidConfig) {
		t.Errorf("nil runner: %v", err)
	}
}

func TestRunOnceEndsWithContext(t *testing.T) {
	updates := make(chan podconfig.PodUpdate, 1)
	updates <- podconfig.PodUpdate{Op: podconfig.ADD, Pods: []*v1.Pod{pod("slow")}}
	ctx, cancel := context.WithCancel(context.Background())
	run := func(context.Context, *v1.Pod) (bool, error) {
		cancel() // the agent shuts down while the pod is not running yet
		return false, nil
	}
	results, err := syncloop.RunOnce(ctx, updates, run, syncloop.RunOnceConfig{Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || !errors.Is(results[0].Err, context.Canceled) {
		t.Fatalf("results %+v", results)
	}
}

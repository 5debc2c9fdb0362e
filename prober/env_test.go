package prober

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/runtime"
)

// fakeStatus is a StatusProvider the test edits.
type fakeStatus struct {
	mu sync.Mutex
	m  map[types.UID]*v1.PodStatus
}

func (f *fakeStatus) SharedPodStatus(uid types.UID) (*v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[uid]
	return s, ok
}

func (f *fakeStatus) set(uid types.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[uid] = &s
}

// fakeRunner answers exec probes by the command's first word: exit code
// from codes (0 if absent), or a hang past the timeout.
type fakeRunner struct {
	mu    sync.Mutex
	codes map[string]int
	hang  map[string]bool
	calls map[string]int
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{codes: map[string]int{}, hang: map[string]bool{}, calls: map[string]int{}}
}

func (f *fakeRunner) ExecSync(ctx context.Context, _ runtime.ContainerID, cmd []string, timeout time.Duration) ([]byte, []byte, int, error) {
	f.mu.Lock()
	f.calls[cmd[0]]++
	code, hang := f.codes[cmd[0]], f.hang[cmd[0]]
	f.mu.Unlock()
	if hang {
		return nil, nil, 0, fmt.Errorf("%q: %w", strings.Join(cmd, " "), runtime.ErrExecTimeout)
	}
	return []byte("out"), nil, code, nil
}

func (f *fakeRunner) setCode(cmd string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes[cmd] = code
}

func (f *fakeRunner) called(cmd string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[cmd]
}

type event struct{ reason, message, fieldPath string }

type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Eventf(obj k8sruntime.Object, _, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	path := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		path = ref.FieldPath
	}
	r.events = append(r.events, event{reason, fmt.Sprintf(format, args...), path})
}

func (r *recorder) list() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// env is a Manager on a fake clock inside a synctest bubble.
type env struct {
	t      *testing.T
	clk    *clocktesting.FakeClock
	status *fakeStatus
	runner *fakeRunner
	rec    *recorder
	m      *Manager

	mu      sync.Mutex
	updates []Update // read from m.Updates()
}

// withEnv runs f in a bubble with a running Manager, stopped afterwards;
// opts adjust the Manager's Config.
func withEnv(t *testing.T, f func(e *env), opts ...func(*Config)) {
	synctest.Test(t, func(t *testing.T) {
		e := &env{t: t, clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
			status: &fakeStatus{m: map[types.UID]*v1.PodStatus{}}, runner: newFakeRunner(), rec: &recorder{}}
		c := Config{Status: e.status, Runner: e.runner, Recorder: e.rec, Clock: e.clk,
			Jitter: func(time.Duration) time.Duration { return 0 }}
		for _, o := range opts {
			o(&c)
		}
		m, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		e.m = m
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = m.Run(ctx) }()
		go func() {
			for {
				select {
				case u := <-m.Updates():
					e.mu.Lock()
					e.updates = append(e.updates, u)
					e.mu.Unlock()
				case <-ctx.Done():
					return
				}
			}
		}()
		defer func() { cancel(); <-done }() // also after a t.Fatal in f
		synctest.Wait()
		f(e)
	})
}

// received returns the updates read so far.
func (e *env) received() []Update {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Update(nil), e.updates...)
}

// step moves the clock and lets every worker do what is due.
func (e *env) step(d time.Duration) {
	e.clk.Step(d)
	synctest.Wait()
}

func (e *env) result(t ProbeType, cid string) Result {
	id, _ := runtime.ParseContainerID(cid)
	r, ok := e.m.Result(t, id)
	if !ok {
		return 255
	}
	return r
}

// running sets the container's status: running since the current time
// (minus age), with the given Started.
func (e *env) running(pod *v1.Pod, name, cid string, age time.Duration, started bool) {
	e.status.set(pod.UID, v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1", ContainerStatuses: []v1.ContainerStatus{{
		Name: name, ContainerID: cid, Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(e.clk.Now().Add(-age))}},
	}}})
	synctest.Wait()
}

func execProbe(cmd string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}}, PeriodSeconds: 1}
}

func podWith(uid string, c v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{c}, RestartPolicy: v1.RestartPolicyAlways}}
}

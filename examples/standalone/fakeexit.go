package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
)

// exitAnnotation tells the in-memory runtime, which runs no commands, when
// containers of the pod exit: "name=duration[:code],...", e.g. "job=3s" or
// "migrate=1s:0,check=5s:2". The code defaults to 0.
const exitAnnotation = "fake.nodekit.io/exit"

// defaultInitExit is how long an init container not named in exitAnnotation
// runs on the in-memory runtime before it exits 0, so that pods with init
// containers start without an annotation.
const defaultInitExit = time.Second

type exit struct {
	after time.Duration
	code  int
}

// parseExits reads exitAnnotation.
func parseExits(s string) (map[string]exit, error) {
	out := map[string]exit{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, rest, ok := strings.Cut(item, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=duration[:code]", item)
		}
		after, code, hasCode := strings.Cut(rest, ":")
		d, err := time.ParseDuration(after)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q: bad duration %q", item, after)
		}
		e := exit{after: d}
		if hasCode {
			if e.code, err = strconv.Atoi(code); err != nil || e.code < 0 || e.code > 255 {
				return nil, fmt.Errorf("%q: bad exit code %q", item, code)
			}
		}
		out[name] = e
	}
	return out, nil
}

// scripted is the in-memory runtime with exits taken from each pod's
// exitAnnotation. The fake programs behaviour per container name across all
// pods; scripted keeps it per pod by making due containers exit when the pod
// is read (GetPods, GetPodStatus), so an exit shows at the next relist.
type scripted struct {
	*fake.Runtime
	clock clock.PassiveClock

	mu        sync.Mutex
	exits     map[types.UID]map[string]exit
	execFails map[types.UID]map[string]exit
}

func newScripted(rt *fake.Runtime, clk clock.PassiveClock) *scripted {
	return &scripted{Runtime: rt, clock: clk, exits: map[types.UID]map[string]exit{}, execFails: map[types.UID]map[string]exit{}}
}

// SyncPod learns the pod's exits, then syncs it. A bad annotation fails the
// pod's containers with CreateContainerConfigError and starts nothing.
func (s *scripted) SyncPod(ctx context.Context, pod *v1.Pod, st *runtime.PodStatus, secrets []v1.Secret, backoff *runtime.Backoff) runtime.PodSyncResult {
	exits, err := parseExits(pod.Annotations[exitAnnotation])
	annotation := exitAnnotation
	var fails map[string]exit
	if err == nil {
		annotation = execFailAnnotation
		fails, err = parseExits(pod.Annotations[execFailAnnotation])
	}
	if err != nil {
		var res runtime.PodSyncResult
		msg := fmt.Sprintf("annotation %s: %v", annotation, err)
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				res.NewStep(runtime.StartContainer, c.Name).Fail(runtime.ErrCreateContainerConfig, msg)
			}
		}
		return res
	}
	s.learnExecFails(pod.UID, fails)
	for _, c := range pod.Spec.InitContainers {
		sidecar := podutil.IsRestartableInitContainer(&c)
		if _, ok := exits[c.Name]; !ok && !sidecar {
			exits[c.Name] = exit{after: defaultInitExit}
		}
	}
	s.mu.Lock()
	if len(exits) == 0 {
		delete(s.exits, pod.UID)
	} else {
		s.exits[pod.UID] = exits
	}
	s.mu.Unlock()
	return s.Runtime.SyncPod(ctx, pod, st, secrets, backoff)
}

// GetPods makes due containers exit first.
func (s *scripted) GetPods(ctx context.Context, all bool) ([]*runtime.Pod, error) {
	s.mu.Lock()
	uids := make([]types.UID, 0, len(s.exits))
	for uid := range s.exits {
		uids = append(uids, uid)
	}
	s.mu.Unlock()
	for _, uid := range uids {
		if err := s.exitDue(ctx, uid); err != nil {
			return nil, err
		}
	}
	return s.Runtime.GetPods(ctx, all)
}

// GetPodStatus makes the pod's due containers exit first.
func (s *scripted) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, error) {
	if err := s.exitDue(ctx, uid); err != nil {
		return nil, err
	}
	return s.Runtime.GetPodStatus(ctx, uid, name, namespace)
}

func (s *scripted) exitDue(ctx context.Context, uid types.UID) error {
	s.mu.Lock()
	exits := s.exits[uid]
	s.mu.Unlock()
	if exits == nil {
		return nil
	}
	st, err := s.Runtime.GetPodStatus(ctx, uid, "", "")
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, c := range st.ContainerStatuses {
		e, ok := exits[c.Name]
		if !ok || c.State != runtime.ContainerStateRunning || now.Before(c.StartedAt.Add(e.after)) {
			continue
		}
		// A container that stopped meanwhile is not an error.
		_ = s.ExitContainer(uid, c.Name, e.code, "")
	}
	return nil
}

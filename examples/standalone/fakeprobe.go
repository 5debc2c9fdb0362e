package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// execFailAnnotation tells the in-memory runtime, which runs no commands,
// when exec probes (every command run in a container) start failing:
// "name=duration[:code],...", e.g. "app=20s": commands in container app exit
// 1 once it has run 20s, until it is restarted. The code defaults to 1.
// Unnamed containers' commands succeed.
const execFailAnnotation = "fake.nodekit.io/exec-fail"

// ExecSync fails commands as the pod's execFailAnnotation says, else runs
// them on the in-memory runtime.
func (s *scripted) ExecSync(ctx context.Context, id runtime.ContainerID, cmd []string, timeout time.Duration) ([]byte, []byte, int, error) {
	s.mu.Lock()
	uids := make([]types.UID, 0, len(s.execFails))
	for uid := range s.execFails {
		uids = append(uids, uid)
	}
	s.mu.Unlock()
	for _, uid := range uids {
		st, err := s.Runtime.GetPodStatus(ctx, uid, "", "")
		if err != nil {
			return nil, nil, 0, err
		}
		for _, c := range st.ContainerStatuses {
			if c.ID != id {
				continue
			}
			s.mu.Lock()
			e, ok := s.execFails[uid][c.Name]
			s.mu.Unlock()
			if ok && !s.clock.Now().Before(c.StartedAt.Add(e.after)) {
				return nil, []byte(fmt.Sprintf("failing since %s after start (%s)", e.after, execFailAnnotation)), e.code, nil
			}
		}
	}
	return s.Runtime.ExecSync(ctx, id, cmd, timeout)
}

// learnExecFails records pod uid's execFailAnnotation (already parsed).
func (s *scripted) learnExecFails(uid types.UID, fails map[string]exit) {
	for name, e := range fails {
		if e.code == 0 {
			e.code = 1
			fails[name] = e
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(fails) == 0 {
		delete(s.execFails, uid)
		return
	}
	s.execFails[uid] = fails
}

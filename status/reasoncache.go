package status

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
)

// ReasonCache remembers, per pod and container, why the container last
// failed to start ("CrashLoopBackOff", "ErrImagePull", ...), as the kubelet's
// reason cache does. The agent feeds it the result of every SyncPod with
// Update; GeneratePodStatus reads it to show such containers as waiting with
// that reason. It is safe for concurrent use.
type ReasonCache struct {
	mu   sync.Mutex
	pods map[types.UID]map[string]startFailure
}

type startFailure struct{ reason, message string }

// NewReasonCache returns an empty ReasonCache.
func NewReasonCache() *ReasonCache {
	return &ReasonCache{pods: map[types.UID]map[string]startFailure{}}
}

// Update records the container start steps of one SyncPod: a failed step
// sets the container's reason (runtime.Reason of the step's error, or
// "RunContainerError" for an error without a known reason), a successful
// one clears it. Other steps are ignored.
func (c *ReasonCache) Update(uid types.UID, result runtime.PodSyncResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range result.SyncResults {
		if r == nil || (r.Action != runtime.StartContainer && r.Action != runtime.InitContainer) {
			continue
		}
		if r.Error == nil {
			if m := c.pods[uid]; m != nil {
				delete(m, r.Target)
				if len(m) == 0 {
					delete(c.pods, uid)
				}
			}
			continue
		}
		reason := runtime.Reason(r.Error)
		if reason == "" {
			reason = runtime.ErrRunContainer.Error()
		}
		msg := r.Message
		if msg == "" && reason != r.Error.Error() {
			msg = r.Error.Error()
		}
		m := c.pods[uid]
		if m == nil {
			m = map[string]startFailure{}
			c.pods[uid] = m
		}
		m[r.Target] = startFailure{reason: reason, message: msg}
	}
}

// Get returns the reason and message of the container's last failed start.
func (c *ReasonCache) Get(uid types.UID, container string) (reason, message string, ok bool) {
	if c == nil {
		return "", "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.pods[uid][container]
	return f.reason, f.message, ok
}

// Remove forgets a pod; call it when the pod is gone.
func (c *ReasonCache) Remove(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

package agent

import (
	"errors"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime/fake"
)

// releasingRuntime is the fake runtime plus ReleaseVolumes, as runtime/cri
// has, recording the pods whose volumes were released.
type releasingRuntime struct {
	*fake.Runtime
	mu       sync.Mutex
	released map[types.UID]int
	fail     bool
}

func (r *releasingRuntime) ReleaseVolumes(uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released[uid]++
	if r.fail {
		r.fail = false
		return errors.New("unmount busy")
	}
	return nil
}

func (r *releasingRuntime) count(uid types.UID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released[uid]
}

func TestTerminatedPodReleasesItsVolumes(t *testing.T) {
	f, _ := fake.New(fake.Config{})
	rt := &releasingRuntime{Runtime: f, released: map[types.UID]int{}, fail: true}
	r := start(t, fastConfig(rt))
	keep, gone := newPod("keep", v1.RestartPolicyAlways, "c"), newPod("gone", v1.RestartPolicyAlways, "c")
	r.set(keep, gone)
	waitFor(t, "both running", func() bool {
		return runningContainers(t, rt, keep.UID) == 1 && runningContainers(t, rt, gone.UID) == 1
	})
	r.set(keep)
	waitFor(t, "the removed pod's volumes released after a failed first try", func() bool { return rt.count(gone.UID) >= 2 })
	if rt.count(keep.UID) != 0 {
		t.Fatal("the running pod's volumes were released")
	}
}

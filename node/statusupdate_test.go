package node_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

// kubeletStatusTries is the kubelet's nodeStatusUpdateRetry: how many
// times one status update is tried in a row.
const kubeletStatusTries = 5

// nodeCall is one call on the Nodes during a status update: a read (with
// the resourceVersion it asked for) or a status update, at an offset from
// the computation.
type nodeCall struct {
	verb string
	rv   string // a read's: "0" from the apiserver's cache, "" from storage
	at   time.Duration
}

var (
	readCached = nodeCall{verb: nodetest.VerbGet, rv: "0"}
	readStored = nodeCall{verb: nodetest.VerbGet, rv: ""}
	update     = nodeCall{verb: nodetest.VerbUpdate}
)

func at(c nodeCall, d time.Duration) nodeCall { c.at = d; return c }

// TestStatusUpdateRetries: a status update is the kubelet's
// updateNodeStatus. Each computation takes the Node as the apiserver's
// cache has it: the watched one, or, for a client that cannot watch, one
// read with resourceVersion "0"; an update that fails, whatever the error,
// is tried again at once from the Node read from storage, up to five times
// in all, calling OnRepeatedHeartbeatFailure from the second failure on;
// then the next computation comes.
func TestStatusUpdateRetries(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd down"))
	conflict := apierrors.NewConflict(nodesGR, "n1", errors.New("the object has been modified"))
	forbidden := apierrors.NewForbidden(nodesGR, "n1", errors.New("not yet allowed"))
	const period = 10 * time.Second // UpdateFrequency
	tests := []struct {
		name string
		// unwatched uses a client that cannot watch.
		unwatched bool
		// unchanged leaves the status as it is: nothing to send.
		unchanged  bool
		updateErrs []error
		getErrs    []error
		// hangs is how many status updates hang until the request timeout
		// (1s) ends them.
		hangs int
		want  []nodeCall
		// runFor is how long the test watches from the computation; 0:
		// until just short of the next one.
		runFor   time.Duration
		repeated int
	}{
		{
			name:      "without a watch an unchanged status is computed from the Node read from the apiserver's cache",
			unwatched: true, unchanged: true,
			want: []nodeCall{readCached},
		},
		{
			name:      "with a watch it is computed from the watched Node: no read",
			unchanged: true,
		},
		{
			name:      "without a watch a changed status is written onto the Node read from the cache",
			unwatched: true,
			want:      []nodeCall{readCached, update},
		},
		{
			name: "with a watch onto the watched Node",
			want: []nodeCall{update},
		},
		{
			name:       "a 500 is tried again at once from the Node read from storage",
			updateErrs: []error{internal},
			want:       []nodeCall{update, readStored, update},
		},
		{
			name:       "so is a conflict",
			unwatched:  true,
			updateErrs: []error{conflict},
			want:       []nodeCall{readCached, update, readStored, update},
		},
		{
			name:       "and a refusal: only five in a row end Run",
			updateErrs: []error{forbidden},
			want:       []nodeCall{update, readStored, update},
		},
		{
			name:      "a failed read is tried again from storage",
			unwatched: true,
			getErrs:   []error{internal},
			want:      []nodeCall{readCached, readStored, update},
		},
		{
			name:       "five failures in a row wait for the next computation",
			updateErrs: repeatErr(internal, kubeletStatusTries),
			want: []nodeCall{update, readStored, update, readStored, update, readStored, update, readStored, update,
				at(update, period)},
			runFor:   period,
			repeated: kubeletStatusTries - 1,
		},
		{
			name:  "a hanging apiserver: each try ends with the request timeout",
			hangs: 2,
			want: []nodeCall{update, at(readStored, time.Second), at(update, time.Second),
				at(readStored, 2*time.Second), at(update, 2*time.Second)},
			repeated: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				pleg := &health{}
				var repeated atomic.Int32
				e := start(t, api, func(c *node.Config) {
					if tt.unwatched {
						c.Nodes = nodesOnly{api.Nodes()}
					}
					c.HealthChecks = []node.HealthCheck{{Name: "PLEG", Check: pleg.check}}
					c.OnRepeatedHeartbeatFailure = func() { repeated.Add(1) }
					c.RequestTimeout = time.Second
				})
				advance(time.Second) // Ready: computed every 10s from now on
				for _, err := range tt.updateErrs {
					api.InjectError("nodes", nodetest.VerbUpdate, err)
				}
				for _, err := range tt.getErrs {
					api.InjectError("nodes", nodetest.VerbGet, err)
				}
				if !tt.unchanged {
					pleg.set(errors.New("stuck"))
				}
				t0 := time.Now().Add(period - time.Second)
				var mu sync.Mutex
				var got []nodeCall
				hangs := tt.hangs
				api.SetHook(func(ctx context.Context, a nodetest.Action) error {
					if a.Resource != "nodes" || a.Verb == nodetest.VerbList || a.Verb == nodetest.VerbWatch {
						return nil
					}
					mu.Lock()
					got = append(got, nodeCall{a.Verb, a.ResourceVersion, time.Since(t0)})
					hang := a.Subresource == "status" && hangs > 0
					if hang {
						hangs--
					}
					mu.Unlock()
					if hang {
						<-ctx.Done()
						return apierrors.NewTimeoutError("request timed out", 1)
					}
					return nil
				})
				runFor := tt.runFor
				if runFor == 0 {
					runFor = period - time.Millisecond
				}
				advance(period - time.Second) // the computation
				advance(runFor)
				mu.Lock()
				assert.Equal(t, tt.want, got)
				mu.Unlock()
				assert.Equal(t, int32(tt.repeated), repeated.Load(), "OnRepeatedHeartbeatFailure calls")
				if !tt.unchanged {
					assert.Equal(t, v1.ConditionFalse, cond(e.node(), v1.NodeReady).Status, "sent")
				}
				select {
				case err := <-e.done:
					e.cancel()
					e.cancel = nil
					t.Fatalf("Run returned: %v", err)
				default:
				}
			})
		})
	}
}

// TestOthersStatusChangesAreCorrected: a Ready condition the node
// lifecycle controller set to Unknown while the node was unreachable is set
// back at the next computation, as the kubelet's status update sets it
// back: it compares the status with the Node as the apiserver has it (the
// watched Node, or one read from the cache), not with the status it sent
// last, which would leave the Node Unknown until the next report (5m).
func TestOthersStatusChangesAreCorrected(t *testing.T) {
	for _, tt := range []struct {
		name      string
		unwatched bool
	}{
		{"with a watch", false},
		{"without a watch", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				e := start(t, api, func(c *node.Config) {
					if tt.unwatched {
						c.Nodes = nodesOnly{api.Nodes()}
					}
				})
				advance(time.Second)
				n := e.node()
				for i := range n.Status.Conditions {
					if c := &n.Status.Conditions[i]; c.Type == v1.NodeReady {
						c.Status, c.Reason, c.Message = v1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
						c.LastTransitionTime = metav1.Now()
					}
				}
				api.PutNode(n)
				updates := statusUpdates(api)
				advance(10 * time.Second)
				assert.Equal(t, v1.ConditionTrue, cond(e.node(), v1.NodeReady).Status, "Ready again within a computation")
				assert.Equal(t, updates+1, statusUpdates(api))
			})
		})
	}
}

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

// kubeletLeaseUpdates is the kubelet's lease controller's maxUpdateRetries:
// renewals attempted in a row before it reads the Lease again, and again
// after that before it waits for the next interval.
const kubeletLeaseUpdates = 5

// leaseCall is one call on the Leases, at an offset from the renewal.
type leaseCall struct {
	verb string
	at   time.Duration
}

func leaseCalls(verb string, n int, at time.Duration) []leaseCall {
	out := make([]leaseCall, n)
	for i := range out {
		out[i] = leaseCall{verb, at}
	}
	return out
}

// TestLeaseRenewalRetries: a renewal is retried as the kubelet's lease
// controller retries it (component-helpers/apimachinery/lease): up to five
// updates in a row, reading the Lease again after a conflict, then a read
// and five more updates, then the next interval.
func TestLeaseRenewalRetries(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd down"))
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "n1", errors.New("the object has been modified"))
	const renew = 10 * time.Second // RenewInterval: a quarter of the default 40s
	tests := []struct {
		name       string
		updateErrs []error
		getErrs    []error
		want       []leaseCall
		// runFor is how long the test watches after the first attempt;
		// 0: until just short of the next interval.
		runFor time.Duration
		// renewedAt is when the Lease was renewed, from the first attempt.
		renewedAt time.Duration
		// repeated is how often OnRepeatedHeartbeatFailure was called.
		repeated int
	}{
		{
			name:       "a failed renewal is retried at once from the same lease, up to five attempts",
			updateErrs: repeatErr(internal, kubeletLeaseUpdates-1),
			want:       leaseCalls(nodetest.VerbUpdate, kubeletLeaseUpdates, 0),
			renewedAt:  0,
			repeated:   kubeletLeaseUpdates - 2,
		},
		{
			name:       "after five failed attempts the lease is read and renewed with five more",
			updateErrs: repeatErr(internal, 2*kubeletLeaseUpdates-1),
			want: append(append(leaseCalls(nodetest.VerbUpdate, kubeletLeaseUpdates, 0),
				leaseCall{nodetest.VerbGet, 0}), leaseCalls(nodetest.VerbUpdate, kubeletLeaseUpdates, 0)...),
			renewedAt: 0,
			repeated:  (kubeletLeaseUpdates - 1) + (kubeletLeaseUpdates - 2),
		},
		{
			name:       "a renewal that fails ten times waits for the next interval",
			updateErrs: repeatErr(internal, 2*kubeletLeaseUpdates),
			want: append(append(append(leaseCalls(nodetest.VerbUpdate, kubeletLeaseUpdates, 0),
				leaseCall{nodetest.VerbGet, 0}), leaseCalls(nodetest.VerbUpdate, kubeletLeaseUpdates, 0)...),
				leaseCall{nodetest.VerbUpdate, renew}),
			runFor:    renew,
			renewedAt: renew,
			repeated:  2 * (kubeletLeaseUpdates - 1),
		},
		{
			name:       "a conflict reads the lease again before the next attempt",
			updateErrs: []error{conflict, conflict},
			want: []leaseCall{{nodetest.VerbUpdate, 0}, {nodetest.VerbGet, 0}, {nodetest.VerbUpdate, 0},
				{nodetest.VerbGet, 0}, {nodetest.VerbUpdate, 0}},
			renewedAt: 0,
		},
		{
			name:       "a conflict whose read fails backs off before the next attempt",
			updateErrs: []error{conflict},
			getErrs:    []error{internal, internal},
			want: []leaseCall{{nodetest.VerbUpdate, 0}, {nodetest.VerbGet, 0},
				{nodetest.VerbGet, 200 * time.Millisecond}, {nodetest.VerbGet, 600 * time.Millisecond},
				{nodetest.VerbUpdate, 600 * time.Millisecond}},
			renewedAt: 600 * time.Millisecond,
		},
		{
			name:       "a conflict on every attempt reads the lease five times, then once more",
			updateErrs: repeatErr(conflict, kubeletLeaseUpdates),
			want: append(interleave(kubeletLeaseUpdates), leaseCall{nodetest.VerbGet, 0},
				leaseCall{nodetest.VerbUpdate, 0}),
			renewedAt: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				var repeated atomic.Int32
				start(t, api, func(c *node.Config) {
					c.OnRepeatedHeartbeatFailure = func() { repeated.Add(1) }
				})
				for _, err := range tt.updateErrs {
					api.InjectError("leases", nodetest.VerbUpdate, err)
				}
				for _, err := range tt.getErrs {
					api.InjectError("leases", nodetest.VerbGet, err)
				}
				t0 := time.Now().Add(renew)
				var mu sync.Mutex
				var got []leaseCall
				api.SetHook(func(_ context.Context, a nodetest.Action) error {
					if a.Resource == "leases" {
						mu.Lock()
						got = append(got, leaseCall{a.Verb, time.Since(t0)})
						mu.Unlock()
					}
					return nil
				})
				runFor := tt.runFor
				if runFor == 0 {
					runFor = renew - time.Millisecond
				}
				advance(renew)  // the renewal
				advance(runFor) // its retries and back-off (and the next interval if the case says so)
				mu.Lock()
				assert.Equal(t, tt.want, got)
				mu.Unlock()
				l, _ := api.Lease("n1")
				assert.Equal(t, tt.renewedAt, l.Spec.RenewTime.Sub(t0), "renewed at, from the first attempt")
				assert.Equal(t, int32(tt.repeated), repeated.Load(), "OnRepeatedHeartbeatFailure calls")
			})
		})
	}
}

func repeatErr(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// interleave is n updates, each followed by a read.
func interleave(n int) []leaseCall {
	var out []leaseCall
	for range n {
		out = append(out, leaseCall{nodetest.VerbUpdate, 0}, leaseCall{nodetest.VerbGet, 0})
	}
	return out
}

package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// maxLeaseUpdates is how many renewals are attempted in a row before the
// Lease is read again, and again after that before waiting for the next
// interval: the kubelet's lease controller's maxUpdateRetries.
const maxLeaseUpdates = 5

// leaseLoop renews the Lease every RenewInterval, counted from the end of
// the last renewal, as the kubelet's lease controller.
func (c *Controller) leaseLoop(ctx context.Context) {
	for {
		c.syncLease(ctx)
		if !c.sleep(ctx, c.cfg.RenewInterval) {
			return
		}
	}
}

// syncLease renews the Lease as the kubelet's lease controller does: up to
// maxLeaseUpdates attempts from the last Lease written, without a read;
// when they all fail, it reads the Lease (creating it if missing, with
// back-off while that fails) and, unless it created it, makes up to
// maxLeaseUpdates attempts from that one. A failure after that waits for
// the next interval.
func (c *Controller) syncLease(ctx context.Context) {
	if c.lease != nil {
		err := c.retryUpdateLease(ctx, c.lease)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.cfg.Log.V(2).Info("Failed to renew the lease from the last one written; reading it again", "err", err)
	}
	lease, created := c.ensureLease(ctx)
	if lease == nil {
		return
	}
	c.lease = lease
	if !created {
		if err := c.retryUpdateLease(ctx, lease); err != nil && ctx.Err() == nil {
			c.cfg.Log.Error(err, "Failed to renew the lease, will retry", "in", c.cfg.RenewInterval)
		}
	}
}

// retryUpdateLease makes up to maxLeaseUpdates attempts to renew base,
// one after the other, as the kubelet's lease controller: a conflict reads
// the Lease again (ensureLease, with its back-off) and the next attempt
// renews that one; any other error is retried at once from the same base,
// calling OnRepeatedHeartbeatFailure from the second failure on.
func (c *Controller) retryUpdateLease(ctx context.Context, base *coordinationv1.Lease) error {
	var err error
	for i := range maxLeaseUpdates {
		if err = c.updateLease(ctx, base); err == nil || ctx.Err() != nil {
			return err
		}
		c.cfg.Log.V(2).Info("Failed to renew the lease", "attempt", i+1, "err", err)
		if apierrors.IsConflict(err) {
			if base, _ = c.ensureLease(ctx); base == nil {
				return ctx.Err() // ended while reading
			}
			continue
		}
		if i > 0 && c.cfg.OnRepeatedHeartbeatFailure != nil {
			c.cfg.OnRepeatedHeartbeatFailure()
		}
	}
	return fmt.Errorf("failed %d attempts to renew the lease: %w", maxLeaseUpdates, err)
}

// ensureLease reads the Lease, creating it if missing, retrying with
// back-off until that works or ctx ends (nil).
func (c *Controller) ensureLease(ctx context.Context) (*coordinationv1.Lease, bool) {
	var wait time.Duration
	for {
		lease, created, err := c.tryEnsureLease(ctx)
		if err == nil {
			return lease, created
		}
		wait = nextBackoff(wait, backoffInitial, backoffMax)
		c.cfg.Log.Error(err, "Failed to ensure the lease exists, will retry", "in", wait)
		if !c.sleep(ctx, wait) {
			return nil, false
		}
	}
}

func (c *Controller) tryEnsureLease(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	lease, err := c.cfg.Leases.Get(cctx, c.cfg.NodeName, metav1.GetOptions{})
	if err == nil {
		return lease, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, err
	}
	lease, err = c.cfg.Leases.Create(cctx, c.newLease(nil), metav1.CreateOptions{})
	if err != nil {
		return nil, false, err
	}
	return lease, true, nil
}

// updateLease writes a renewed copy of base.
func (c *Controller) updateLease(ctx context.Context, base *coordinationv1.Lease) error {
	cctx, cancel := c.callCtx(ctx)
	defer cancel()
	lease, err := c.cfg.Leases.Update(cctx, c.newLease(base), metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	if lease == nil {
		return errors.New("lease update returned no lease")
	}
	c.lease = lease
	return nil
}

// newLease returns a new Lease (base nil) or a copy of base, held by the
// node, renewed now and owned by the Node (so it goes with it).
func (c *Controller) newLease(base *coordinationv1.Lease) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.NodeName, Namespace: c.cfg.LeaseNamespace}}
	} else {
		l = base.DeepCopy()
	}
	l.Spec.HolderIdentity = ptr.To(c.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(c.cfg.LeaseDuration.Seconds()))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(c.cfg.Clock.Now()))
	if n := c.current(); n != nil && n.UID != "" {
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
		}
	}
	return l
}

package node

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime/fake"
)

func benchController(b *testing.B, clk clock.Clock) (*Controller, *nodetest.Fake) {
	b.Helper()
	return benchControllerOn(b, clk, nil)
}

// benchControllerOn is benchController reading machine (nil: the host).
func benchControllerOn(b *testing.B, clk clock.Clock, machine MachineInfo) (*Controller, *nodetest.Fake) {
	b.Helper()
	api := nodetest.New()
	rt, err := fake.New(fake.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, img := range []string{"busybox:1", "nginx:1", "pause:3.10"} {
		if _, err := rt.PullImage(context.Background(), img, nil); err != nil {
			b.Fatal(err)
		}
	}
	ctl, err := New(Config{
		NodeName: "bench", Nodes: api.Nodes(), Leases: api.Leases(), Runtime: rt,
		HealthChecks: []HealthCheck{{Name: "PLEG", Check: func() error { return nil }}},
		Capacity:     v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
		Clock:        clk,
		Machine:      machine,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := ctl.tryRegister(context.Background()); err != nil {
		b.Fatal(err)
	}
	return ctl, api
}

// BenchmarkStatusComputation is one periodic computation of an unchanged
// status (machine info, runtime status, version and cached images from
// the in-memory runtime, a health check, conditions) and its comparison
// with the last one sent: what a node does every 10s. On "host" the
// machine info is read from /proc, /sys and /etc (HostMachine, kubenode's);
// on "static" it is a Machine value (sim's).
func BenchmarkStatusComputation(b *testing.B) {
	for _, bc := range []struct {
		name    string
		machine MachineInfo
	}{{"host", nil}, {"static", Machine{NumCores: 4, MemoryCapacity: 8 << 30, EphemeralStorageCapacity: 100 << 30}}} {
		b.Run(bc.name, func(b *testing.B) {
			ctl, _ := benchControllerOn(b, nil, bc.machine)
			ctx := context.Background()
			base := ctl.current()
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				st := ctl.computeStatus(ctx, &base.Status, now)
				if statusChanged(&base.Status, st) {
					b.Fatal("status changed")
				}
			}
		})
	}
}

// BenchmarkLeaseRenewal is one renewal of the Lease from the last one
// written, against nodetest's in-memory apiserver (whose copies are part of
// the cost).
func BenchmarkLeaseRenewal(b *testing.B) {
	ctl, _ := benchController(b, nil)
	ctx := context.Background()
	ctl.syncLease(ctx)
	b.ReportAllocs()
	for b.Loop() {
		ctl.syncLease(ctx)
	}
}

// BenchmarkIdleHour drives one node through an hour in which nothing
// changes, on a fake clock, with the status computed every UpdateFrequency
// and the Lease renewed every RenewInterval, as Run's loops do, and reports
// the apiserver requests it made: with the Node watched (the watch marked
// open, its own requests not counted: a list at start, a watch every 5 to
// 10 minutes against an apiserver) and without a watch.
func BenchmarkIdleHour(b *testing.B) {
	for _, bc := range []struct {
		name    string
		watched bool
	}{{"watched", true}, {"unwatched", false}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var lease, status, gets, other int
			for b.Loop() {
				clk := clocktesting.NewFakeClock(time.Now())
				ctl, api := benchController(b, clk)
				ctl.setWatching(bc.watched)
				ctl.syncLease(ctx)
				api.ClearActions()
				for range time.Hour / (10 * time.Second) {
					clk.Step(10 * time.Second)
					if err := ctl.syncStatus(ctx); err != nil {
						b.Fatal(err)
					}
					ctl.syncLease(ctx)
				}
				lease = api.Count("leases", nodetest.VerbUpdate, "")
				status = api.Count("nodes", nodetest.VerbUpdate, "status")
				gets = api.Count("nodes", nodetest.VerbGet, "")
				other = len(api.Actions()) - lease - status - gets
			}
			b.ReportMetric(float64(lease), "lease-updates/node/h")
			b.ReportMetric(float64(status), "status-updates/node/h")
			b.ReportMetric(float64(gets), "node-gets/node/h")
			b.ReportMetric(float64(other), "other-requests/node/h")
		})
	}
}

// BenchmarkStatusPatch is the building of one status patch (the kubelet's
// two-way merge of old and new status) for a heartbeat: every condition's
// heartbeat time moved, nothing else.
func BenchmarkStatusPatch(b *testing.B) {
	ctl, _ := benchController(b, nil)
	ctx := context.Background()
	old := ctl.current()
	n := old.DeepCopy()
	n.Status = *ctl.computeStatus(ctx, &old.Status, time.Now().Add(time.Minute))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := statusPatch(old, n); err != nil {
			b.Fatal(err)
		}
	}
}

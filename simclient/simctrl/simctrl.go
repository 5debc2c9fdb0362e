// Package simctrl runs controller-runtime managers on a simulated
// cluster's virtual time: the manager options that keep it off the wall
// clock and off sockets, and controllers' workqueues on the cluster's
// clock that tell when the controllers are ready.
//
//	q := simctrl.NewQueues(cl.Clock())
//	mgr, _ := ctrl.NewManager(srv.RESTConfig(), simctrl.ManagerOptions(scheme))
//	r.SetupWithManager(mgr)                // builder.WithOptions(q.Options())
//	go mgr.Start(ctx)
//	q.WaitReady(ctx, 1)                    // the controller's workers wait for work
//	cl.RunFor(ctx, time.Hour)
//
// Why: controller-runtime's priority queue and its default rate limiter
// read the wall clock, and a controller starts on it (its sources' sync
// is polled every 100 ms of wall time), while a virtual hour can pass in
// that time. Kept apart from package simclient so that client-go users do
// not build controller-runtime.
package simctrl

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ManagerOptions are a manager's options for a simulated cluster: no
// metrics or health listener (no socket), the plain workqueue instead of
// the priority queue (which reads the wall clock), and no check that
// controller names are unique in the process (a test builds many
// managers).
func ManagerOptions(scheme *runtime.Scheme) manager.Options {
	return manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{UsePriorityQueue: ptr.To(false), SkipNameValidation: ptr.To(true)},
	}
}

// Queues makes the workqueues of controllers on a cluster's clock.
type Queues struct {
	clock clock.WithTicker

	mu    sync.Mutex
	ready int
	wake  chan struct{}
}

// NewQueues makes workqueues on clk (sim.Cluster.Clock()).
func NewQueues(clk clock.WithTicker) *Queues {
	return &Queues{clock: clk, wake: make(chan struct{})}
}

// Options are a controller's options: a per-item exponential rate
// limiter (5 ms to 1000 s, as controller-runtime's without its token
// bucket on the wall clock) and a workqueue on the cluster's clock.
func (q *Queues) Options() controller.Options {
	return controller.Options{
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second),
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return &readyQueue{
				TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rl,
					workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, Clock: q.clock}),
				q: q,
			}
		},
	}
}

// WaitReady waits (on the wall clock) until n controllers built with
// Options have a worker asking for work: their sources have synced. Run
// the cluster's clock only then.
func (q *Queues) WaitReady(ctx context.Context, n int) error {
	for {
		q.mu.Lock()
		ready, wake := q.ready, q.wake
		q.mu.Unlock()
		if ready >= n {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (q *Queues) started() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ready++
	close(q.wake)
	q.wake = make(chan struct{})
}

// readyQueue tells its Queues when a worker first asks for work.
type readyQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	q    *Queues
	once sync.Once
}

func (r *readyQueue) Get() (reconcile.Request, bool) {
	r.once.Do(r.q.started)
	return r.TypedRateLimitingInterface.Get()
}

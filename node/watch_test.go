package node_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
)

// The fake's Nodes can be watched, as client-go's can.
var _ node.NodeWatcher = (*nodetest.NodeClient)(nil)

// nodesOnly hides the fake's List and Watch: a client that cannot watch.
type nodesOnly struct{ node.NodeClient }

// shortWatches is the fake's Nodes whose every watch ends at once without
// an event.
type shortWatches struct{ *nodetest.NodeClient }

func (c shortWatches) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if _, err := c.NodeClient.Watch(ctx, opts); err != nil {
		return nil, err
	}
	return watch.NewEmptyWatch(), nil
}

func nodeCalls(api *nodetest.Fake, verb string) int { return api.Count("nodes", verb, "") }

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

// TestOthersChangesToTheNodeAreSeen: what others change of the Node (a
// label, a taint, an extended resource) is in SharedNode as soon as the
// watch delivers it, without a status update or a read, as in the
// kubelet's node informer; admission reads the Node there.
func TestOthersChangesToTheNodeAreSeen(t *testing.T) {
	dongle := v1.ResourceName("example.com/dongle")
	tests := []struct {
		name   string
		change func(*v1.Node)
		seen   func(*v1.Node) bool
	}{
		{"a label another writer added",
			func(n *v1.Node) { n.Labels["disk"] = "ssd" },
			func(n *v1.Node) bool { return n.Labels["disk"] == "ssd" }},
		{"a taint the node lifecycle controller added",
			func(n *v1.Node) {
				n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute})
			},
			func(n *v1.Node) bool { return hasTaint(n, v1.TaintNodeUnreachable) }},
		{"an extended resource a device plugin's helper patched",
			func(n *v1.Node) {
				n.Status.Capacity[dongle] = resource.MustParse("4")
				n.Status.Allocatable[dongle] = resource.MustParse("4")
			},
			func(n *v1.Node) bool { q, ok := n.Status.Allocatable[dongle]; return ok && q.Value() == 4 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				e := start(t, api, nil)
				advance(time.Second) // Ready, sent
				api.ClearActions()
				n := e.node()
				tt.change(n)
				api.PutNode(n)
				synctest.Wait()
				assert.True(t, tt.seen(e.ctl.SharedNode()), "SharedNode has the change")
				assert.True(t, tt.seen(e.ctl.Node()), "Node has the change")
				assert.Empty(t, api.Actions(), "no call made it known")
			})
		})
	}
}

// call is a list or watch call, with when it came after the watch ended.
type call struct {
	verb string
	at   time.Duration
}

// TestNodeWatchResumes: as client-go's reflector, a watch the apiserver
// ends is resumed at once from the last resource version seen; after an
// error (an Error event such as 410 Gone, a failed list or watch, a watch
// ended at once without an event) the Node is listed again, at the last
// resource version seen, after a back-off from 800ms doubling to 30s.
func TestNodeWatchResumes(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd down"))
	gone := apierrors.NewResourceExpired("too old resource version")
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	tests := []struct {
		name string
		// short makes every watch end at once without an event, from the
		// start: there is no end.
		short bool
		// end ends the watch, which has lasted 2s, and injects failures.
		end func(api *nodetest.Fake)
		// calls are the list and watch calls in the next 2 minutes.
		calls []call
	}{
		{
			name:  "a watch the apiserver ends is resumed at once",
			end:   func(api *nodetest.Fake) { api.CloseWatches() },
			calls: []call{{nodetest.VerbWatch, 0}},
		},
		{
			name: "a watch ended by 410 Gone is listed again after 800ms",
			end: func(api *nodetest.Fake) {
				api.Compact()
				api.EndWatches(gone)
			},
			calls: []call{{nodetest.VerbList, sec(0.8)}, {nodetest.VerbWatch, sec(0.8)}},
		},
		{
			name: "failed lists back off from 800ms doubling to 30s",
			end: func(api *nodetest.Fake) {
				for range 7 {
					api.InjectError("nodes", nodetest.VerbList, internal)
				}
				api.EndWatches(internal)
			},
			calls: []call{
				{nodetest.VerbList, sec(0.8)}, {nodetest.VerbList, sec(2.4)}, {nodetest.VerbList, sec(5.6)},
				{nodetest.VerbList, sec(12)}, {nodetest.VerbList, sec(24.8)}, {nodetest.VerbList, sec(50.4)},
				{nodetest.VerbList, sec(80.4)}, {nodetest.VerbList, sec(110.4)}, {nodetest.VerbWatch, sec(110.4)},
			},
		},
		{
			name: "a failed watch is listed again after the back-off",
			end: func(api *nodetest.Fake) {
				api.InjectError("nodes", nodetest.VerbWatch, internal)
				api.CloseWatches()
			},
			calls: []call{{nodetest.VerbWatch, 0}, {nodetest.VerbList, sec(0.8)}, {nodetest.VerbWatch, sec(0.8)}},
		},
		{
			name:  "watches that end at once without an event back off",
			short: true,
			calls: []call{
				{nodetest.VerbList, sec(0.8)}, {nodetest.VerbWatch, sec(0.8)}, {nodetest.VerbList, sec(2.4)}, {nodetest.VerbWatch, sec(2.4)},
				{nodetest.VerbList, sec(5.6)}, {nodetest.VerbWatch, sec(5.6)}, {nodetest.VerbList, sec(12)}, {nodetest.VerbWatch, sec(12)},
				{nodetest.VerbList, sec(24.8)}, {nodetest.VerbWatch, sec(24.8)}, {nodetest.VerbList, sec(50.4)}, {nodetest.VerbWatch, sec(50.4)},
				{nodetest.VerbList, sec(80.4)}, {nodetest.VerbWatch, sec(80.4)}, {nodetest.VerbList, sec(110.4)}, {nodetest.VerbWatch, sec(110.4)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := nodetest.New()
				e := start(t, api, func(c *node.Config) {
					if tt.short {
						c.Nodes = shortWatches{api.Nodes()}
					}
					// Nothing writes (no status update, no Lease): the
					// Node's resource version stays the last the watch saw.
					c.UpdateFrequency, c.ReportFrequency, c.Leases = time.Hour, time.Hour, nil
				})
				if !tt.short {
					advance(2 * time.Second)
				}
				last := e.ctl.SharedNode().ResourceVersion
				t0 := time.Now()
				var mu sync.Mutex
				var got []call
				var rvs []string
				api.SetHook(func(_ context.Context, a nodetest.Action) error {
					if a.Verb == nodetest.VerbList || a.Verb == nodetest.VerbWatch {
						mu.Lock()
						got = append(got, call{a.Verb, time.Since(t0)})
						rvs = append(rvs, a.ResourceVersion)
						mu.Unlock()
					}
					return nil
				})
				if tt.end != nil {
					tt.end(api)
				}
				advance(2 * time.Minute)
				mu.Lock()
				assert.Equal(t, tt.calls, got)
				for _, rv := range rvs {
					assert.Equal(t, last, rv, "from the last resource version seen")
				}
				mu.Unlock()
				if !tt.short {
					require.Equal(t, 1, api.Watches(), "watching again")
					n := e.node()
					n.Labels["disk"] = "ssd"
					api.PutNode(n)
					synctest.Wait()
					assert.Equal(t, "ssd", e.ctl.SharedNode().Labels["disk"], "changes are seen again")
				}
			})
		})
	}
}

// TestNodeWatchEndsWithRun: the watch, and its goroutine, end with Run's
// context (goleak checks the rest in TestMain; synctest would not return
// with a goroutine of its bubble blocked).
func TestNodeWatchEndsWithRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		e := start(t, api, nil)
		require.Equal(t, 1, api.Watches(), "the Node is watched")
		assert.Equal(t, 1, nodeCalls(api, nodetest.VerbList))
		require.NoError(t, e.stop())
		assert.Zero(t, api.Watches(), "no watch after Run returned")
	})
}

// TestClientWithoutWatch: a NodeClient without List and Watch has no
// watch; the Node is read from the apiserver's cache at each computation
// (every UpdateFrequency), as the kubelet reads it, so what others change
// is seen within one, without a status update.
func TestClientWithoutWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := nodetest.New()
		e := start(t, api, func(c *node.Config) { c.Nodes = nodesOnly{api.Nodes()} })
		advance(time.Second)
		api.ClearActions()
		n := e.node()
		n.Labels["disk"] = "ssd"
		api.PutNode(n)
		advance(time.Second)
		assert.Empty(t, e.ctl.SharedNode().Labels["disk"], "not seen before the next computation")
		advance(9 * time.Second)
		assert.Equal(t, "ssd", e.ctl.SharedNode().Labels["disk"], "seen with the computation's read")
		assert.Equal(t, []nodetest.Action{{Verb: nodetest.VerbGet, Resource: "nodes", Name: "n1", ResourceVersion: "0"}},
			nodeActions(api), "one read from the cache, no status update, no list or watch")
	})
}

// nodeActions are the recorded calls on Nodes, without their errors.
func nodeActions(api *nodetest.Fake) []nodetest.Action {
	var out []nodetest.Action
	for _, a := range api.Actions() {
		if a.Resource == "nodes" {
			a.Err = nil
			out = append(out, a)
		}
	}
	return out
}

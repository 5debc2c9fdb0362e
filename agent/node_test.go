package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodekit/nodekit/node"
	"github.com/nodekit/nodekit/node/nodetest"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/fake"
	"github.com/nodekit/nodekit/status"
	"github.com/nodekit/nodekit/status/statustest"
)

func nodeReady(api *nodetest.Fake) (v1.NodeCondition, bool) {
	n, ok := api.Node("n1")
	if !ok {
		return v1.NodeCondition{}, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c, true
		}
	}
	return v1.NodeCondition{}, false
}

func TestAgentRegistersNodeAndReportsReadiness(t *testing.T) {
	dir := t.TempDir()
	manifest := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\nspec:\n  containers:\n  - name: web\n    image: nginx\n"
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	api := nodetest.New()
	pods := statustest.New()
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Sources, c.StaticPodPath = nil, dir
	c.MaxPods = 7
	c.NodeIPs = []string{"192.0.2.10"}
	c.StatusClient = func(ns string) status.PodClient { return pods.Pods(ns) }
	c.Node = &node.Config{Nodes: api.Nodes(), Leases: api.Leases(), UpdateFrequency: 50 * time.Millisecond,
		LeaseDuration: 4 * time.Second}
	r := start(t, c)

	waitFor(t, "node Ready", func() bool {
		rc, ok := nodeReady(api)
		return ok && rc.Status == v1.ConditionTrue
	})
	n, _ := api.Node("n1")
	if q := n.Status.Capacity[v1.ResourcePods]; q.Value() != 7 {
		t.Errorf("pods capacity %s, want MaxPods 7", q.String())
	}
	if a := n.Status.Addresses; len(a) != 2 || a[0].Address != "192.0.2.10" || a[0].Type != v1.NodeInternalIP {
		t.Errorf("addresses %v, want InternalIP from NodeIPs first", a)
	}
	if r.a.Node() == nil {
		t.Fatal("Agent.Node is nil with Config.Node")
	}

	t.Run("mirror pods are owned by the registered Node", func(t *testing.T) {
		waitFor(t, "mirror pod", func() bool { _, ok := pods.Pod("default", "static-web-n1"); return ok })
		mp, _ := pods.Pod("default", "static-web-n1")
		if len(mp.OwnerReferences) != 1 || mp.OwnerReferences[0].UID != n.UID || mp.OwnerReferences[0].Kind != "Node" {
			t.Fatalf("mirror owner references %+v, want the Node %s", mp.OwnerReferences, n.UID)
		}
		if got := api.Count("nodes", nodetest.VerbGet, ""); got != 0 {
			t.Errorf("%d Node GETs; the owner comes from the registered Node", got)
		}
	})

	t.Run("runtime not ready makes the node NotReady with the runtime's reason", func(t *testing.T) {
		rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: false, Reason: "Down", Message: "socket gone"})
		waitFor(t, "node NotReady", func() bool {
			rc, _ := nodeReady(api)
			return rc.Status == v1.ConditionFalse &&
				strings.Contains(rc.Message, "container runtime not ready: RuntimeReady=false reason:Down message:socket gone")
		})
		rt.SetCondition(runtime.RuntimeCondition{Type: runtime.RuntimeReady, Status: true})
		waitFor(t, "node Ready again", func() bool { rc, _ := nodeReady(api); return rc.Status == v1.ConditionTrue })
	})

	t.Run("the lease is renewed and stops with the agent", func(t *testing.T) {
		waitFor(t, "a lease renewal", func() bool { return api.Count("leases", nodetest.VerbUpdate, "") > 0 })
		r.stop()
		n := len(api.Actions())
		time.Sleep(1500 * time.Millisecond) // more than a renewal interval
		if got := len(api.Actions()); got != n {
			t.Fatalf("%d calls after the agent stopped", got-n)
		}
	})
}

func TestAgentStopsWhenTheNodeIsRefused(t *testing.T) {
	api := nodetest.New()
	api.InjectError("nodes", nodetest.VerbCreate, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1",
		errors.New(`User "system:node:n2" cannot create resource "nodes"`)))
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Node = &node.Config{Nodes: api.Nodes()}
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), `cannot create resource "nodes"`) {
		t.Fatalf("Run = %v, want the apiserver's refusal", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended")
	}
}

func TestAgentNodeConfigErrors(t *testing.T) {
	rt, _ := fake.New(fake.Config{})
	c := fastConfig(rt)
	c.Node = &node.Config{}
	if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Node without Nodes: %v, want ErrInvalidConfig", err)
	}
	c.Node = &node.Config{Nodes: nodetest.New().Nodes(), MaxImages: 1, Labels: map[string]string{"bad key": "x"}}
	if _, err := New(c); !errors.Is(err, node.ErrInvalidConfig) {
		t.Errorf("bad label: %v, want node.ErrInvalidConfig", err)
	}
}

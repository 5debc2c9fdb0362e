package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// request is what the fake apiserver saw.
type request struct{ method, path, query, body string }

// fakeAPIServer answers every request with reply (JSON) and records it.
func fakeAPIServer(t *testing.T, reply any) (*rest.Config, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, r.URL.RawQuery, string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: 50, Burst: 100}, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), seen...)
	}
}

func TestClientsReachTheirGroupsPaths(t *testing.T) {
	ctx := context.Background()
	list := func(o metav1.ListOptions) metav1.ListOptions { o.FieldSelector = "spec.nodeName!="; return o }
	tests := []struct {
		name  string
		reply any
		call  func(*clientset) error
		want  request // body: a substring of the request's body
	}{
		{"the pod informer lists bound pods in /api/v1 with its field selector", &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := listWatch(c.Pods("").List, c.Pods("").Watch, func(o *metav1.ListOptions) { *o = list(*o) }).ListWithContext(ctx, metav1.ListOptions{})
				return err
			}, request{method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%21%3D"}},
		{"a pod's status is patched through its subresource", &v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := c.Pods("ns").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
				return err
			}, request{method: "PATCH", path: "/api/v1/namespaces/ns/pods/p/status"}},
		{"a Node's pod CIDR is patched on the Node", &v1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := c.Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, []byte(`{"spec":{"podCIDR":"10.0.0.0/24"}}`), metav1.PatchOptions{})
				return err
			}, request{method: "PATCH", path: "/api/v1/nodes/n1", body: "podCIDR"}},
		{"the Lease is in coordination.k8s.io", map[string]any{"kind": "Lease", "apiVersion": "coordination.k8s.io/v1"},
			func(c *clientset) error {
				_, err := c.Leases(v1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{})
				return err
			}, request{method: "GET", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}},
		{"an event is created in its own namespace", &v1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := eventSink{c: c, ctx: ctx}.Create(&v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Reason: "Started"})
				return err
			}, request{method: "POST", path: "/api/v1/namespaces/ns/events", body: "Started"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, seen := fakeAPIServer(t, tt.reply)
			c, err := newClients(cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			got := seen()
			if len(got) != 1 {
				t.Fatalf("%d requests %v, want 1", len(got), got)
			}
			if g := got[0]; g.method != tt.want.method || g.path != tt.want.path || !strings.Contains(g.query, tt.want.query) || !strings.Contains(g.body, tt.want.body) {
				t.Errorf("request %+v, want %+v", g, tt.want)
			}
		})
	}
}

func TestSchemeHasOnlyCoreAndCoordination(t *testing.T) {
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range s.PrioritizedVersionsAllGroups() {
		if gv.Group != "" && gv.Group != "coordination.k8s.io" {
			t.Errorf("scheme has group %q: every group in it is linked into the binary", gv.Group)
		}
	}
	for _, k := range []string{"Pod", "Node"} {
		if !s.Recognizes(v1.SchemeGroupVersion.WithKind(k)) {
			t.Errorf("scheme does not know %s: the event recorder cannot refer to it", k)
		}
	}
}

func TestServerVersionFailsWhenNoAPIServerAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }))
	t.Cleanup(srv.Close)
	c, err := newClients(&rest.Config{Host: srv.URL}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.serverVersion(context.Background()); err == nil {
		t.Error("serverVersion: no error from a 503")
	}
}

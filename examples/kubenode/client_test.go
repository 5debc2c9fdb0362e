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

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	tests := []struct {
		name  string
		reply any
		call  func(*clientset) error
		want  request // body: a substring of the request's body
	}{
		{"pods are listed in /api/v1 with the field selector as a query", &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
				return err
			}, request{method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Dn1"}},
		{"a pod's status is patched through its subresource", &v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := c.Pods("ns").Patch(ctx, "p", "application/merge-patch+json", []byte(`{}`), metav1.PatchOptions{}, "status")
				return err
			}, request{method: "PATCH", path: "/api/v1/namespaces/ns/pods/p/status"}},
		{"the Lease is in coordination.k8s.io", map[string]any{"kind": "Lease", "apiVersion": "coordination.k8s.io/v1"},
			func(c *clientset) error {
				_, err := c.Leases(v1.NamespaceNodeLease).Get(ctx, "n1", metav1.GetOptions{})
				return err
			}, request{method: "GET", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"}},
		{"a token is asked of the service account's token subresource", map[string]any{"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1"},
			func(c *clientset) error {
				_, err := c.ServiceAccounts("ns").CreateToken(ctx, "sa", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"aud"}}}, metav1.CreateOptions{})
				return err
			}, request{method: "POST", path: "/api/v1/namespaces/ns/serviceaccounts/sa/token", body: "aud"}},
		{"an event is created in its own namespace", &v1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := eventSink{c: c, ctx: ctx}.Create(&v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, Reason: "Started"})
				return err
			}, request{method: "POST", path: "/api/v1/namespaces/ns/events", body: "Started"}},
		{"an event is patched by name in its namespace", &v1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}},
			func(c *clientset) error {
				_, err := eventSink{c: c, ctx: ctx}.Patch(&v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}, []byte(`{"count":2}`))
				return err
			}, request{method: "PATCH", path: "/api/v1/namespaces/ns/events/e", body: `"count":2`}},
		{"the server's version is read from /version", map[string]any{"major": "1"},
			func(c *clientset) error { return c.serverVersion(ctx) },
			request{method: "GET", path: "/version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, seen := fakeAPIServer(t, tt.reply)
			c, err := newClients(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.call(c); err != nil {
				t.Fatalf("call: %v", err)
			}
			got := seen()
			if len(got) != 1 {
				t.Fatalf("got %d requests, want 1: %+v", len(got), got)
			}
			g := got[0]
			if g.method != tt.want.method || g.path != tt.want.path || tt.want.query != "" && g.query != tt.want.query || !strings.Contains(g.body, tt.want.body) {
				t.Errorf("request %+v, want %+v", g, tt.want)
			}
		})
	}
}

func TestSchemeHasOnlyTheNodesGroups(t *testing.T) {
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range s.PrioritizedVersionsAllGroups() {
		switch gv.Group {
		case "", "coordination.k8s.io", "certificates.k8s.io", "authentication.k8s.io", "authorization.k8s.io":
		default:
			t.Errorf("scheme has group %q: every group in it is linked into the binary", gv.Group)
		}
	}
	if !s.Recognizes(v1.SchemeGroupVersion.WithKind("Pod")) {
		t.Error("scheme does not know Pod: the event recorder cannot refer to pods")
	}
}

func TestServerVersionFailsWhenNoAPIServerAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }))
	t.Cleanup(srv.Close)
	c, err := newClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.serverVersion(context.Background()); err == nil {
		t.Error("serverVersion: no error from a 503")
	}
}

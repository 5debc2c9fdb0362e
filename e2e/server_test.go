package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/server"
)

type noPods struct{}

func (noPods) Pods() []*corev1.Pod { return nil }

// The server's auth in the kubelet's webhook mode against a real
// apiserver: a service account's token is reviewed (TokenReview) and each
// request's node subresource checked with RBAC (SubjectAccessReview),
// through client-go's typed clients as they are.
func TestServerWebhookAuthOnTheAPIServer(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	ctx := t.Context()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "scraper",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Pods: noPods{}, Auth: &server.Auth{
		Authenticator: server.WebhookAuthenticator(cs.AuthenticationV1().TokenReviews()),
		Authorizer:    server.WebhookAuthorizer(cs.AuthorizationV1().SubjectAccessReviews()),
		NodeName:      "n1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	get := func(token, path string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("not-a-token", "/pods"); code != http.StatusUnauthorized {
		t.Errorf("a token the apiserver does not know: %d, want 401", code)
	}
	if code := get(tr.Status.Token, "/pods"); code != http.StatusForbidden {
		t.Errorf("a service account without a grant: %d, want 403", code)
	}

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-pods-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/pods"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-node-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: "default"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for get(tr.Status.Token, "/pods") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("granted get nodes/pods, /pods still refused after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := get(tr.Status.Token, "/containerLogs/default/x/y"); code != http.StatusForbidden {
		t.Errorf("logs need nodes/proxy, which the grant lacks: %d, want 403", code)
	}
}

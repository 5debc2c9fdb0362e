package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/internal/testenv"
)

// kubenode started as the README's join example (its defaults: the API on
// all interfaces over TLS with a self-signed certificate, client
// certificates of the kubeconfig's CA, bearer tokens by TokenReview,
// SubjectAccessReview authorization, no anonymous requests), asked
// directly and through the apiserver's nodes/proxy and pods/log, as
// `kubectl logs` and a metrics scraper do. The status codes and messages
// are the kubelet's.
func TestKubenodeAPIAuthorization(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	ctx := t.Context()
	bin := buildKubenode(t)
	cfg := c.RESTConfig()
	const node = "auth-node"
	port := testenv.FreePort(t)
	certDir := t.TempDir()
	startKubenode(t, bin, "-kubeconfig", writeKubeconfig(t, cfg, cfg.Host, ""), "-node-name", node,
		"-node-ip", "127.0.0.1", "-port", strconv.Itoa(port), "-healthz-port", "0", "-cert-dir", certDir)
	waitNode(t, cs, node, time.Minute, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))

	// A service account bound to a ClusterRole allowing get nodes/proxy
	// (nodes are cluster-scoped, so a namespaced Role cannot).
	_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "node-proxy"}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-proxy"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	must(t, err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "node-proxy"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-proxy"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "node-proxy", Namespace: "default"}}}, metav1.CreateOptions{})
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "node-proxy",
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	must(t, err)
	saToken := tr.Status.Token
	// The grant must be in the RBAC cache before the node first asks: a
	// refusal is kept 30s, as the kubelet's.
	waitAllowed(t, cs, "system:serviceaccount:default:node-proxy", node)

	cert := func(user string, groups ...string) tls.Certificate {
		certPEM, keyPEM, err := c.ClientCert(user, groups...)
		must(t, err)
		kp, err := tls.X509KeyPair(certPEM, keyPEM)
		must(t, err)
		return kp
	}
	eve := cert("eve")
	nodeID := cert("system:node:"+node, "system:nodes")
	admin := cert("kubernetes-admin", "system:masters")

	// A pod on the node, whose logs `kubectl logs` reads.
	_, err = cs.CoreV1().Pods("default").Create(ctx, testPod("logged", node), metav1.CreateOptions{})
	must(t, err)
	waitPod(t, cs, "default", "logged", func(p *corev1.Pod) string { return checkRunning(p, "") })
	logsPath := "/containerLogs/default/logged/c"

	base := "https://127.0.0.1:" + strconv.Itoa(port)
	for _, tc := range []struct {
		name  string
		cert  *tls.Certificate
		token string
		path  string
		code  int
		body  string // "" any
	}{
		{"no credentials: 401", nil, "", "/pods", http.StatusUnauthorized, "Unauthorized\n"},
		{"a token the apiserver does not know: 401", nil, "not-a-token", "/pods", http.StatusUnauthorized, "Unauthorized\n"},
		{"a certificate of a user without RBAC: 403 naming the subresources tried", &eve, "", "/pods", http.StatusForbidden,
			"Forbidden (user=eve, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"},
		{"a certificate of a user without RBAC, logs: 403", &eve, "", logsPath, http.StatusForbidden,
			"Forbidden (user=eve, verb=get, resource=nodes, subresource(s)=[proxy])\n"},
		{"metrics need nodes/metrics, not nodes/proxy: 403", nil, saToken, "/metrics", http.StatusForbidden,
			"Forbidden (user=system:serviceaccount:default:node-proxy, verb=get, resource=nodes, subresource(s)=[metrics])\n"},
		{"a service account allowed nodes/proxy: 200", nil, saToken, "/pods", http.StatusOK, ""},
		{"a service account allowed nodes/proxy reads logs: 200", nil, saToken, logsPath, http.StatusOK, ""},
		// RBAC grants the nodes' own identities no nodes/proxy (the node
		// authorizer's rules have none either)
		{"the node's own identity: 403", &nodeID, "", "/pods", http.StatusForbidden,
			"Forbidden (user=system:node:" + node + ", verb=get, resource=nodes, subresource(s)=[pods proxy])\n"},
		{"a system:masters certificate: 200", &admin, "", logsPath, http.StatusOK, ""},
		{"a system:masters certificate, exec's path: authorized by nodes/proxy", &admin, "", "/exec/default/logged/c?command=true", 0, ""},
	} {
		t.Run("direct: "+tc.name, func(t *testing.T) {
			var certs []tls.Certificate
			if tc.cert != nil {
				certs = []tls.Certificate{*tc.cert}
			}
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}} //nolint:gosec // the node's self-signed certificate
			defer tr.CloseIdleConnections()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+tc.path, nil)
			must(t, err)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
			must(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.code == 0 {
				if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
					t.Errorf("%d %q: want past authorization", resp.StatusCode, b)
				}
				return
			}
			if resp.StatusCode != tc.code || (tc.body != "" && string(b) != tc.body) {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}

	// Through the apiserver's nodes/proxy: it authorizes nodes/proxy
	// itself, then would ask the node with its kubelet client certificate;
	// but it proxies to no loopback address ("address not allowed", 400),
	// and this node's is. So only its authorization is seen here; pods/log
	// below goes all the way to the node.
	proxy := func(cs kubernetes.Interface, path string) (int, string) {
		var code int
		body, _ := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy" + path).Do(ctx).StatusCode(&code).Raw()
		return code, string(body)
	}
	eveCS := clientFor(t, cfg, func(rc *rest.Config) {
		certPEM, keyPEM, err := c.ClientCert("eve")
		must(t, err)
		rc.CertData, rc.KeyData = certPEM, keyPEM
	})
	saCS := clientFor(t, cfg, func(rc *rest.Config) { rc.CertData, rc.KeyData, rc.BearerToken = nil, nil, saToken })
	for name, cs := range map[string]kubernetes.Interface{"admin": cs, "the service account allowed nodes/proxy": saCS} {
		if code, body := proxy(cs, "/pods"); code != http.StatusBadRequest || !strings.Contains(body, "address not allowed") {
			t.Errorf("nodes/proxy as %s: %d %s, want past the apiserver's authorization to its refusal of a loopback node", name, code, body)
		}
	}
	if code, body := proxy(eveCS, "/pods"); code != http.StatusForbidden || !strings.Contains(body, `cannot get resource \"nodes/proxy\"`) {
		t.Errorf("nodes/proxy as eve: %d %s, want the apiserver's 403", code, body)
	}

	// `kubectl logs`: pods/log, which the apiserver serves from the
	// node's /containerLogs, asking it with its kubelet client certificate
	// (system:masters), which the node verifies against the kubeconfig's
	// CA and authorizes with a SubjectAccessReview.
	if _, err := cs.CoreV1().Pods("default").GetLogs("logged", &corev1.PodLogOptions{Container: "c"}).DoRaw(ctx); err != nil {
		t.Errorf("pods/log through the apiserver: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(certDir, "kubelet.*")); len(matches) != 2 {
		t.Errorf("-cert-dir holds %v, want kubelet.crt and kubelet.key", matches)
	}

	t.Run("a node whose client CA did not sign the apiserver's certificate refuses its pods/log with 401", func(t *testing.T) {
		const other = "auth-node-3"
		startKubenode(t, bin, "-kubeconfig", writeKubeconfig(t, cfg, cfg.Host, ""), "-node-name", other,
			"-node-ip", "127.0.0.1", "-port", strconv.Itoa(testenv.FreePort(t)), "-healthz-port", "0", "-cert-dir", t.TempDir(),
			"-client-ca-file", filepath.Join(certDir, "kubelet.crt")) // a CA of its own: the first node's certificate
		waitNode(t, cs, other, time.Minute, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))
		_, err := cs.CoreV1().Pods("default").Create(ctx, testPod("unlogged", other), metav1.CreateOptions{})
		must(t, err)
		waitPod(t, cs, "default", "unlogged", func(p *corev1.Pod) string { return checkRunning(p, "") })
		_, err = cs.CoreV1().Pods("default").GetLogs("unlogged", &corev1.PodLogOptions{Container: "c"}).DoRaw(ctx)
		// the apiserver passes the node's 401 on (the admin is no stranger
		// to the apiserver itself, as the first node's logs show)
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("pods/log: %v, want the node's 401", err)
		}
	})

	t.Run("a second node on the same port stops at start, naming it", func(t *testing.T) {
		k := startKubenode(t, bin, "-kubeconfig", writeKubeconfig(t, cfg, cfg.Host, ""), "-node-name", "auth-node-2",
			"-node-ip", "127.0.0.1", "-port", strconv.Itoa(port), "-healthz-port", "0", "-cert-dir", t.TempDir())
		if code := k.wait(t, time.Minute); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		out := k.stderr.String()
		if want := "-port 0.0.0.0:" + strconv.Itoa(port); !strings.Contains(out, want) || !strings.Contains(out, "address already in use") {
			t.Errorf("stderr does not name %q in use:\n%s", want, out)
		}
		if strings.Contains(out, `"Serving"`) || strings.Contains(out, "Serving ") {
			t.Errorf("stderr says Serving before the bind failed:\n%s", out)
		}
	})
}

// clientFor is a clientset for a copy of cfg changed by mod.
func clientFor(t *testing.T, cfg *rest.Config, mod func(*rest.Config)) *kubernetes.Clientset {
	t.Helper()
	rc := rest.CopyConfig(cfg)
	mod(rc)
	cs, err := kubernetes.NewForConfig(rc)
	must(t, err)
	t.Cleanup(func() { closeIdle(rc) })
	return cs
}

// waitAllowed waits until RBAC allows user get nodes/proxy on node.
func waitAllowed(t *testing.T, cs kubernetes.Interface, user, node string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: node}}}, metav1.CreateOptions{})
		must(t, err)
		if sar.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still not allowed get nodes/proxy after 30s", user)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// -rotate-server-certificates: the node asks for its serving certificate
// with a CertificateSigningRequest for kubernetes.io/kubelet-serving, as
// the kubelet's server TLS bootstrap, fails handshakes until it is issued,
// then serves the issued certificate, which a client trusting the
// cluster's CA verifies, and keeps it in -cert-dir. The test approves and
// signs, as an approver and the controller-manager's signer would.
func TestKubenodeServingCertificateFromTheAPIServer(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 50, 100)
	ctx := t.Context()
	bin := buildKubenode(t)
	cfg := c.RESTConfig()
	const node = "csr-node"
	port := testenv.FreePort(t)
	certDir := t.TempDir()
	startKubenode(t, bin, "-kubeconfig", writeKubeconfig(t, cfg, cfg.Host, ""), "-node-name", node,
		"-node-ip", "127.0.0.1", "-port", strconv.Itoa(port), "-healthz-port", "0", "-cert-dir", certDir,
		"-rotate-server-certificates")

	var csr *certificatesv1.CertificateSigningRequest
	deadline := time.Now().Add(time.Minute)
	for csr == nil {
		list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		must(t, err)
		for i := range list.Items {
			if list.Items[i].Spec.SignerName == certificatesv1.KubeletServingSignerName {
				csr = &list.Items[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no CertificateSigningRequest for kubernetes.io/kubelet-serving within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	must(t, err)
	if req.Subject.CommonName != "system:node:"+node || len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes" {
		t.Errorf("subject %v, want system:node:%s in system:nodes", req.Subject, node)
	}
	if !slices.Contains(req.DNSNames, node) || !slices.ContainsFunc(req.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) {
		t.Errorf("DNS names %v, IPs %v: want the node's name and IP", req.DNSNames, req.IPAddresses)
	}
	if want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}; !slices.Equal(csr.Spec.Usages, want) {
		t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.CAData)
	get := func() error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://127.0.0.1:" + strconv.Itoa(port) + "/pods")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("status %d, want 401 without credentials", resp.StatusCode)
		}
		return nil
	}
	if err := get(); err == nil {
		t.Error("a handshake succeeded before the certificate was issued")
	}

	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "E2E", Message: "approved by the test"})
	csr, err = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	must(t, err)
	csr.Status.Certificate, err = c.SignServing(csr.Spec.Request)
	must(t, err)
	_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	must(t, err)

	deadline = time.Now().Add(30 * time.Second)
	for {
		err := get()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the issued certificate is not served within 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(certDir, "kubelet-server-current.pem"), filepath.Join(certDir, "kubelet-server-current.pem")); err != nil {
		t.Errorf("-cert-dir does not keep the issued certificate: %v", err)
	}
}

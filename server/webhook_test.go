package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/server"
)

// reviews answers TokenReviews and SubjectAccessReviews as an apiserver
// would for a fixed set of tokens and grants, recording what it was asked.
type reviews struct {
	users  map[string]authnv1.UserInfo // by token
	grants map[string]bool             // "user verb subresource"
	asked  []authzv1.SubjectAccessReviewSpec
	err    error
}

type tokenReviews struct{ *reviews }

func (r tokenReviews) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	if r.err != nil {
		return nil, r.err
	}
	out := tr.DeepCopy()
	u, ok := r.users[tr.Spec.Token]
	out.Status = authnv1.TokenReviewStatus{Authenticated: ok, User: u}
	return out, nil
}

type accessReviews struct{ *reviews }

func (r accessReviews) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	r.asked = append(r.asked, sar.Spec)
	out := sar.DeepCopy()
	a := sar.Spec.ResourceAttributes
	out.Status.Allowed = r.grants[sar.Spec.User+" "+a.Verb+" "+a.Subresource]
	return out, nil
}

func TestWebhookAuthnAndAuthz(t *testing.T) {
	rv := &reviews{
		users:  map[string]authnv1.UserInfo{"tok-prom": {Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"}}},
		grants: map[string]bool{"system:serviceaccount:monitoring:prometheus get metrics": true},
	}
	f := newFixture(t, func(c *server.Config) {
		c.Auth = &server.Auth{Authenticator: server.WebhookAuthenticator(tokenReviews{rv}), Authorizer: server.WebhookAuthorizer(accessReviews{rv}), NodeName: "n1"}
	})
	do := func(token, path string) int {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, do("tok-prom", "/metrics"))
	require.NotEmpty(t, rv.asked)
	assert.Equal(t, authzv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "metrics", Name: "n1"},
	}, rv.asked[0], "the kubelet's attributes go to the apiserver")
	assert.Equal(t, http.StatusForbidden, do("tok-prom", "/pods"), "no grant for nodes/pods")
	assert.Equal(t, http.StatusUnauthorized, do("tok-unknown", "/metrics"))
	assert.Equal(t, http.StatusUnauthorized, do("", "/metrics"))
	rv.err = errors.New("apiserver down")
	assert.Equal(t, http.StatusUnauthorized, do("tok-prom", "/metrics"), "a failed review refuses")
}

// newCert returns a certificate for cn (organizations orgs) signed by ca,
// or a self-signed CA when ca is nil.
func newCert(t *testing.T, cn string, orgs []string, ca *tls.Certificate) tls.Certificate {
	t.Helper()
	return newCertFor(t, pkix.Name{CommonName: cn, Organization: orgs}, ca)
}

// newCertFor is newCert for any subject.
func newCertFor(t *testing.T, subject pkix.Name, ca *tls.Certificate) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	parent, signer := tmpl, any(key)
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		parent, signer = ca.Leaf, ca.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// serveTLS serves s over TLS with the serving certificate, asking for
// client certificates signed by pool's CAs, until the test ends.
func serveTLS(t *testing.T, s *server.Server, serving tls.Certificate, pool *x509.CertPool) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, l, s.Handler(), &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: pool,
			ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return l
}

func TestClientCertificateNamesTheUser(t *testing.T) {
	ca := newCert(t, "test-ca", nil, nil)
	serving := newCert(t, "n1", nil, &ca)
	client := newCert(t, "system:node:admin", []string{"system:masters"}, &ca)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)

	rv := &reviews{grants: map[string]bool{"system:node:admin get proxy": true}}
	s, err := server.New(server.Config{Pods: podList{testPod()}, Logs: &fileLogs{dir: t.TempDir()},
		Auth: &server.Auth{Authenticator: server.WebhookAuthenticator(nil), Authorizer: server.WebhookAuthorizer(accessReviews{rv}), NodeName: "n1"}})
	require.NoError(t, err)
	l := serveTLS(t, s, serving, pool)

	get := func(certs ...tls.Certificate) int {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + l.Addr().String() + "/containerLogs/default/web/nope")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusNotFound, get(client), "the certificate's user passes auth; the container is unknown")
	require.NotEmpty(t, rv.asked)
	assert.Equal(t, []string{"system:masters", "system:authenticated"}, rv.asked[0].Groups)
	assert.Equal(t, http.StatusUnauthorized, get(), "no certificate and no token")
}

// credentialID is the kubelet's credential ID of a client certificate.
func credentialID(c tls.Certificate) string {
	sum := sha256.Sum256(c.Leaf.Raw)
	return "X509SHA256=" + hex.EncodeToString(sum[:])
}

// The SubjectAccessReview carries the authenticated user as the kubelet's
// (its authenticator wrapped in the authenticated group adder): name, UID,
// groups plus system:authenticated, and Extra.
func TestWebhookSubjectAccessReviewCarriesTheUser(t *testing.T) {
	ca := newCert(t, "test-ca", nil, nil)
	serving := newCert(t, "n1", nil, &ca)
	uidOID := asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57683, 2}
	plainCert := newCert(t, "system:node:n2", []string{"system:nodes"}, &ca)
	uidCert := newCertFor(t, pkix.Name{CommonName: "alice", ExtraNames: []pkix.AttributeTypeAndValue{{Type: uidOID, Value: "alice-uid"}}}, &ca)
	twoUIDs := newCertFor(t, pkix.Name{CommonName: "mallory", ExtraNames: []pkix.AttributeTypeAndValue{
		{Type: uidOID, Value: "a"}, {Type: uidOID, Value: "b"}}}, &ca)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Leaf)

	rv := &reviews{users: map[string]authnv1.UserInfo{
		"tok-sa": {Username: "system:serviceaccount:ns:sa", UID: "sa-uid", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns"},
			Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"web-0"}, "authentication.kubernetes.io/credential-id": {"JTI=1"}}},
		"tok-bare":    {Username: "bob"},
		"tok-authn":   {Username: "carol", Groups: []string{"system:authenticated", "dev"}},
		"tok-anon":    {Username: "system:anonymous", Groups: []string{"system:unauthenticated"}},
		"tok-unauthn": {Username: "dave", Groups: []string{"system:unauthenticated"}},
	}}
	s, err := server.New(server.Config{Pods: podList{testPod()}, Logs: &fileLogs{dir: t.TempDir()},
		Auth: &server.Auth{Authenticator: server.WebhookAuthenticator(tokenReviews{rv}), Authorizer: server.WebhookAuthorizer(accessReviews{rv}), NodeName: "n1"}})
	require.NoError(t, err)
	l := serveTLS(t, s, serving, pool)

	metrics := &authzv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "metrics", Name: "n1"}
	tests := []struct {
		name  string
		certs []tls.Certificate
		token string
		code  int
		want  *authzv1.SubjectAccessReviewSpec // nil: no review asked
	}{
		{"a token's user gets system:authenticated and keeps its UID and Extra", nil, "tok-sa", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "system:serviceaccount:ns:sa", UID: "sa-uid",
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"},
				Extra:              map[string]authzv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"web-0"}, "authentication.kubernetes.io/credential-id": {"JTI=1"}},
				ResourceAttributes: metrics}},
		{"a token's user without groups gets system:authenticated", nil, "tok-bare", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "bob", Groups: []string{"system:authenticated"}, ResourceAttributes: metrics}},
		{"a user already in system:authenticated gets it once", nil, "tok-authn", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "carol", Groups: []string{"system:authenticated", "dev"}, ResourceAttributes: metrics}},
		{"the anonymous user does not get system:authenticated", nil, "tok-anon", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "system:anonymous", Groups: []string{"system:unauthenticated"}, ResourceAttributes: metrics}},
		{"a user in system:unauthenticated does not get system:authenticated", nil, "tok-unauthn", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "dave", Groups: []string{"system:unauthenticated"}, ResourceAttributes: metrics}},
		{"a client certificate's user gets system:authenticated and its credential ID", []tls.Certificate{plainCert}, "", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "system:node:n2", Groups: []string{"system:nodes", "system:authenticated"},
				Extra:              map[string]authzv1.ExtraValue{"authentication.kubernetes.io/credential-id": {credentialID(plainCert)}},
				ResourceAttributes: metrics}},
		{"a client certificate carries its user's UID", []tls.Certificate{uidCert}, "", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "alice", UID: "alice-uid", Groups: []string{"system:authenticated"},
				Extra:              map[string]authzv1.ExtraValue{"authentication.kubernetes.io/credential-id": {credentialID(uidCert)}},
				ResourceAttributes: metrics}},
		{"a client certificate with two UIDs is refused", []tls.Certificate{twoUIDs}, "", http.StatusUnauthorized, nil},
		{"a client certificate with two UIDs leaves the token to try", []tls.Certificate{twoUIDs}, "tok-bare", http.StatusForbidden,
			&authzv1.SubjectAccessReviewSpec{User: "bob", Groups: []string{"system:authenticated"}, ResourceAttributes: metrics}},
		{"a request without credentials is refused, with no review", nil, "", http.StatusUnauthorized, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rv.asked = nil
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: tt.certs, MinVersion: tls.VersionTLS12}}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequest(http.MethodGet, "https://"+l.Addr().String()+"/metrics", nil)
			require.NoError(t, err)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, tt.code, resp.StatusCode)
			if tt.want == nil {
				assert.Empty(t, rv.asked)
				return
			}
			require.Len(t, rv.asked, 1)
			assert.Equal(t, *tt.want, rv.asked[0])
		})
	}
}

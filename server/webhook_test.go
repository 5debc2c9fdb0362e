package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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
		User: "system:serviceaccount:monitoring:prometheus", Groups: []string{"system:serviceaccounts"},
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
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: orgs},
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, l, s.Handler(), &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: pool,
			ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
	}()
	defer func() { cancel(); require.NoError(t, <-done) }()

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
	assert.Equal(t, []string{"system:masters"}, rv.asked[0].Groups)
	assert.Equal(t, http.StatusUnauthorized, get(), "no certificate and no token")
}

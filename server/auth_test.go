package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/server"
)

// countingReviews answers as reviews does and counts the calls.
type countingReviews struct {
	mu      sync.Mutex
	users   map[string]string // token to user
	allowed map[string]bool   // user to allowed
	err     error
	tokens  int
	access  int
}

func (c *countingReviews) tokenReviewer() server.TokenReviewer { return countingTokens{c} }

type countingTokens struct{ *countingReviews }

func (c countingTokens) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens++
	if c.err != nil {
		return nil, c.err
	}
	out := tr.DeepCopy()
	name, ok := c.users[tr.Spec.Token]
	out.Status = authnv1.TokenReviewStatus{Authenticated: ok, User: authnv1.UserInfo{Username: name}}
	return out, nil
}

func (c *countingReviews) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.access++
	if c.err != nil {
		return nil, c.err
	}
	out := sar.DeepCopy()
	out.Status.Allowed = c.allowed[sar.Spec.User]
	return out, nil
}

func (c *countingReviews) counts() (tokens, access int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens, c.access
}

func bearer(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/pods", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// As the kubelet's token webhook cache (authentication.webhook.cacheTTL,
// 2m): a token's review, authenticated or not, is kept for the TTL on the
// injected clock; a failed review is not kept.
func TestTokenReviewsAreCachedForTheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	rv := &countingReviews{users: map[string]string{"good": "alice"}}
	a, err := server.NewAuthenticator(server.AuthnConfig{Tokens: rv.tokenReviewer(), CacheTTL: server.DefaultTokenCacheTTL, Clock: clk})
	require.NoError(t, err)

	u, ok, err := a.AuthenticateRequest(bearer("good"))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "alice", u.Name)
	_, ok, err = a.AuthenticateRequest(bearer("bad"))
	assert.False(t, ok)
	assert.EqualError(t, err, "invalid bearer token")
	clk.Step(server.DefaultTokenCacheTTL - time.Second)
	u, ok, _ = a.AuthenticateRequest(bearer("good"))
	assert.True(t, ok)
	assert.Equal(t, "alice", u.Name)
	_, ok, _ = a.AuthenticateRequest(bearer("bad"))
	assert.False(t, ok)
	tokens, _ := rv.counts()
	assert.Equal(t, 2, tokens, "within the TTL each token is reviewed once")

	clk.Step(time.Second)
	_, _, _ = a.AuthenticateRequest(bearer("good"))
	tokens, _ = rv.counts()
	assert.Equal(t, 3, tokens, "after the TTL the token is reviewed again")

	rv.err = errors.New("apiserver down")
	_, ok, err = a.AuthenticateRequest(bearer("new"))
	assert.False(t, ok)
	assert.ErrorContains(t, err, "apiserver down")
	rv.err = nil
	rv.users["new"] = "bob"
	u, ok, _ = a.AuthenticateRequest(bearer("new"))
	assert.True(t, ok, "a failed review is not kept")
	assert.Equal(t, "bob", u.Name)
}

// As the kubelet's authorization webhook cache: an allowed review is kept
// 5m, a refused one 30s, an error not at all.
func TestSubjectAccessReviewsAreCached(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	rv := &countingReviews{allowed: map[string]bool{"alice": true}}
	z, err := server.NewWebhookAuthorizer(server.AuthzConfig{Reviews: rv,
		AuthorizedTTL: server.DefaultAuthorizedCacheTTL, UnauthorizedTTL: server.DefaultUnauthorizedCacheTTL, Clock: clk})
	require.NoError(t, err)
	attrs := func(user, sub string) server.Attributes {
		return server.Attributes{User: &server.User{Name: user}, Verb: "get", Resource: "nodes", Subresource: sub, Name: "n1"}
	}
	ask := func(user, sub string) bool {
		ok, _, err := z.Authorize(context.Background(), attrs(user, sub))
		require.NoError(t, err)
		return ok
	}
	access := func() int { _, n := rv.counts(); return n }

	assert.True(t, ask("alice", "proxy"))
	assert.False(t, ask("bob", "proxy"))
	assert.True(t, ask("alice", "proxy"))
	assert.False(t, ask("bob", "proxy"))
	assert.Equal(t, 2, access())
	assert.True(t, ask("alice", "metrics"))
	assert.Equal(t, 3, access(), "another subresource is another review")

	rv.allowed["bob"] = true
	clk.Step(server.DefaultUnauthorizedCacheTTL - time.Second)
	assert.False(t, ask("bob", "proxy"), "the refusal is kept for 30s")
	clk.Step(time.Second)
	assert.True(t, ask("bob", "proxy"), "then asked again")
	assert.Equal(t, 4, access())

	rv.allowed["alice"] = false
	clk.Step(server.DefaultAuthorizedCacheTTL - 31*time.Second)
	assert.True(t, ask("alice", "proxy"), "the grant is kept for 5m")
	clk.Step(time.Second)
	assert.False(t, ask("alice", "proxy"), "then asked again")

	rv.err = errors.New("apiserver down")
	_, _, err = z.Authorize(context.Background(), attrs("carol", "proxy"))
	assert.ErrorContains(t, err, "apiserver down")
	rv.err = nil
	rv.allowed["carol"] = true
	assert.True(t, ask("carol", "proxy"), "an error is not kept")
}

// The kubelet's authenticator: client certificate (verified against
// -client-ca-file), then bearer token; anonymous only without
// credentials.
func TestAuthenticatorUnionAsTheKubelets(t *testing.T) {
	ca := newCert(t, "test-ca", nil, nil)
	other := newCert(t, "other-ca", nil, nil)
	alice := newCert(t, "alice", []string{"dev"}, &ca)
	stranger := newCert(t, "mallory", []string{"system:masters"}, &other)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	rv := &countingReviews{users: map[string]string{"tok-bob": "bob"}}

	type want struct {
		user   string // "" no user
		groups []string
		err    string // substring; "" no error
	}
	for _, tc := range []struct {
		name      string
		anonymous bool
		cert      *tls.Certificate
		token     string
		want      want
	}{
		{"a certificate the client CA signed names the user and groups", false, &alice, "", want{user: "alice", groups: []string{"dev"}}},
		{"the certificate wins over the token", false, &alice, "tok-bob", want{user: "alice", groups: []string{"dev"}}},
		{"a token names the user", false, nil, "tok-bob", want{user: "bob"}},
		{"a certificate of another CA is an error", false, &stranger, "", want{err: "verifying certificate \"mallory\""}},
		{"a certificate of another CA leaves the token to try", false, &stranger, "tok-bob", want{user: "bob"}},
		{"no credentials, anonymous off: no user, no error", false, nil, "", want{}},
		{"no credentials, anonymous on: system:anonymous", true, nil, "", want{user: server.UserAnonymous, groups: []string{server.GroupUnauthenticated}}},
		{"an invalid token is refused, not anonymous", true, nil, "tok-nobody", want{err: "invalid bearer token"}},
		{"a certificate of another CA is refused, not anonymous", true, &stranger, "", want{err: "certificate signed by unknown authority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := server.NewAuthenticator(server.AuthnConfig{ClientCAs: roots, Tokens: rv.tokenReviewer(), Anonymous: tc.anonymous})
			require.NoError(t, err)
			r := bearer(tc.token)
			if tc.cert != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert.Leaf}}
			}
			u, ok, err := a.AuthenticateRequest(r)
			if tc.want.err != "" {
				assert.ErrorContains(t, err, tc.want.err)
			} else {
				assert.NoError(t, err)
			}
			if tc.want.user == "" {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.want.user, u.Name)
			assert.Equal(t, tc.want.groups, u.Groups)
		})
	}
}

func TestNewAuthenticatorAndAuthorizerRejectBadConfig(t *testing.T) {
	_, err := server.NewAuthenticator(server.AuthnConfig{})
	assert.ErrorIs(t, err, server.ErrInvalidConfig, "no way to authenticate")
	_, err = server.NewAuthenticator(server.AuthnConfig{Anonymous: true, CacheTTL: -time.Second})
	assert.ErrorIs(t, err, server.ErrInvalidConfig, "negative TTL")
	_, err = server.NewWebhookAuthorizer(server.AuthzConfig{})
	assert.ErrorIs(t, err, server.ErrInvalidConfig, "no reviewer")
	_, err = server.NewWebhookAuthorizer(server.AuthzConfig{Reviews: &countingReviews{}, UnauthorizedTTL: -1})
	assert.ErrorIs(t, err, server.ErrInvalidConfig, "negative TTL")
}

// The kubelet's (v1.37) attributes per path: its own subresource, then
// proxy where fine-grained authorization allows both.
func TestAttributesAsTheKubelets(t *testing.T) {
	a := &server.Auth{NodeName: "n1"}
	for _, tc := range []struct {
		method, path string
		verb         string
		subs         []string
	}{
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"GET", "/healthz/syncloop", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/statusz", "get", []string{"statusz", "proxy"}},
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/metrics", "get", []string{"metrics"}},
		{"GET", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/metrics/probes", "get", []string{"metrics"}},
		{"GET", "/logs/", "get", []string{"log"}},
		{"POST", "/checkpoint/ns/pod/c", "create", []string{"checkpoint"}},
		{"GET", "/containerLogs/ns/pod/c", "get", []string{"proxy"}},
		{"POST", "/exec/ns/pod/c", "create", []string{"proxy"}},
		{"GET", "/exec/ns/pod/c", "get", []string{"proxy"}},
		{"POST", "/attach/ns/pod/c", "create", []string{"proxy"}},
		{"POST", "/portForward/ns/pod", "create", []string{"proxy"}},
		{"POST", "/run/ns/pod/c", "create", []string{"proxy"}},
		{"GET", "/spec/", "get", []string{"proxy"}},
		{"GET", "/metricsx", "get", []string{"proxy"}},
		{"GET", "/podsx", "get", []string{"proxy"}},
		{"PUT", "/x", "update", []string{"proxy"}},
		{"PATCH", "/x", "patch", []string{"proxy"}},
		{"DELETE", "/x", "delete", []string{"proxy"}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			u := &server.User{Name: "u"}
			var subs []string
			for _, at := range a.Attributes(u, httptest.NewRequest(tc.method, tc.path, nil)) {
				assert.Equal(t, server.Attributes{User: u, Verb: tc.verb, Resource: "nodes", Subresource: at.Subresource, Name: "n1", Path: tc.path}, at)
				subs = append(subs, at.Subresource)
			}
			assert.Equal(t, tc.subs, subs)
		})
	}
}

func TestAlwaysAllow(t *testing.T) {
	ok, _, err := server.AlwaysAllow{}.Authorize(context.Background(), server.Attributes{})
	assert.True(t, ok)
	assert.NoError(t, err)
}

// flaky fails its first reviews with errs, then allows.
type flaky struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (f *flaky) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	out := sar.DeepCopy()
	out.Status.Allowed = true
	return out, nil
}

func (f *flaky) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// As the kubelet's webhooks (the apiserver's DefaultAuthWebhookRetryBackoff):
// a review failing for a passing reason (internal error, timeout, too many
// requests) is tried again with back-off on the injected clock, five tries
// in all; other errors are not retried.
func TestTransientReviewErrorsAreRetried(t *testing.T) {
	internal := apierrors.NewInternalError(errors.New("etcd leader changed"))
	busy := apierrors.NewTooManyRequests("slow down", 1)
	for _, tc := range []struct {
		name    string
		errs    []error
		calls   int
		allowed bool
	}{
		{"two internal errors, then an answer", []error{internal, busy}, 3, true},
		{"five internal errors: the last is returned", []error{internal, internal, internal, internal, internal, internal}, 5, false},
		{"a refusal of the review itself is not retried", []error{apierrors.NewForbidden(authzv1.Resource("subjectaccessreviews"), "", errors.New("no"))}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
			rv := &flaky{errs: tc.errs}
			z, err := server.NewWebhookAuthorizer(server.AuthzConfig{Reviews: rv, Clock: clk})
			require.NoError(t, err)
			type result struct {
				ok  bool
				err error
			}
			done := make(chan result, 1)
			go func() {
				ok, _, err := z.Authorize(context.Background(), server.Attributes{User: &server.User{Name: "u"}, Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "n1"})
				done <- result{ok, err}
			}()
			start := clk.Now()
			var res result
		wait:
			for {
				select {
				case res = <-done:
					break wait
				default:
				}
				if clk.HasWaiters() {
					clk.Step(100 * time.Millisecond)
				}
				time.Sleep(time.Millisecond)
			}
			assert.Equal(t, tc.calls, rv.count())
			assert.Equal(t, tc.allowed, res.ok)
			if tc.allowed {
				assert.NoError(t, res.err)
			} else {
				assert.Error(t, res.err)
			}
			if tc.calls > 1 {
				// 500ms, 750ms, ... each up to 20 % longer
				least := time.Duration(0)
				for i, w := 0, 500*time.Millisecond; i < tc.calls-1; i, w = i+1, w*3/2 {
					least += w
				}
				assert.GreaterOrEqual(t, clk.Since(start), least, "the retries wait the back-off")
			}
		})
	}
}

package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// TokenReviewer creates TokenReviews; client-go's
// AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviewer creates SubjectAccessReviews; client-go's
// AuthorizationV1().SubjectAccessReviews() satisfies it.
type SubjectAccessReviewer interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// The kubelet's defaults for its webhook caches (its KubeletConfiguration's
// authentication.webhook.cacheTTL and authorization.webhook.cache*TTL).
const (
	DefaultTokenCacheTTL        = 2 * time.Minute
	DefaultAuthorizedCacheTTL   = 5 * time.Minute
	DefaultUnauthorizedCacheTTL = 30 * time.Second
)

// maxCacheEntries bounds each review cache; past it, an entry is dropped
// at random for the new one.
const maxCacheEntries = 4096

// AuthnConfig is the kubelet's authentication configuration
// (KubeletConfiguration.authentication).
type AuthnConfig struct {
	// ClientCAs verifies client certificates (--client-ca-file): serve
	// with tls.Config.ClientAuth tls.RequestClientCert, as the kubelet,
	// and a certificate these do not verify is refused with 401 (the
	// token is still tried). nil: only a certificate the TLS handshake
	// verified (ClientCAs and VerifyClientCertIfGiven in the tls.Config)
	// names a user.
	ClientCAs *x509.CertPool
	// Tokens reviews bearer tokens (--authentication-token-webhook); nil
	// accepts none.
	Tokens TokenReviewer
	// Audiences the TokenReviews ask for; empty: the apiserver's.
	Audiences []string
	// CacheTTL keeps each token's review, authenticated or not (errors
	// are not kept), for this long; 0 asks every time. The kubelet's is
	// DefaultTokenCacheTTL.
	CacheTTL time.Duration
	// Anonymous lets a request without credentials through as
	// UserAnonymous in GroupUnauthenticated (--anonymous-auth); a request
	// whose credentials fail is refused all the same.
	Anonymous bool
	// Clock times the cache and the retries. Default the real clock.
	Clock clock.Clock
}

// NewAuthenticator returns the kubelet's authenticator (the apiserver's
// delegating authenticator): a client certificate first, then a bearer
// token, the first that names a user wins; with Anonymous, a request that
// has neither is anonymous, while one whose certificate or token fails is
// refused. A bearer token the apiserver does not authenticate is an error
// ("invalid bearer token"), as in the apiserver. It fails with
// ErrInvalidConfig when c configures no way to authenticate.
func NewAuthenticator(c AuthnConfig) (Authenticator, error) {
	if c.ClientCAs == nil && c.Tokens == nil && !c.Anonymous {
		return nil, fmt.Errorf("%w: no authentication method configured (client CAs, token webhook or anonymous)", ErrInvalidConfig)
	}
	if c.CacheTTL < 0 {
		return nil, fmt.Errorf("%w: token cache TTL %s is negative", ErrInvalidConfig, c.CacheTTL)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	a := &authn{roots: c.ClientCAs, tokens: c.Tokens, audiences: c.Audiences, anonymous: c.Anonymous, invalidIsError: true, retry: retrier{c.Clock}}
	if c.Tokens != nil && c.CacheTTL > 0 {
		a.cache = newTTLCache[tokenResult](c.Clock)
		a.ttl = c.CacheTTL
	}
	return a, nil
}

// WebhookAuthenticator authenticates as the kubelet does with
// --client-ca-file and --authentication-token-webhook, without a cache and
// without anonymous requests: a client certificate the TLS handshake
// verified names the user (CN), its UID (the subject's
// 1.3.6.1.4.1.57683.2, as AllowParsingUserUIDFromCertAuth, on by default
// since v1.33), its groups (O) and, in Extra, the certificate's
// credential ID (X509SHA256=<hex>); otherwise a bearer token is reviewed by
// the apiserver (a TokenReview, for audiences if given), whose user keeps
// its UID, groups and Extra. NewAuthenticator is the kubelet's whole
// configuration, cache included.
func WebhookAuthenticator(tokens TokenReviewer, audiences ...string) Authenticator {
	return &authn{tokens: tokens, audiences: audiences}
}

type tokenResult struct {
	user *User
	ok   bool
}

type authn struct {
	roots          *x509.CertPool
	tokens         TokenReviewer
	audiences      []string
	anonymous      bool
	invalidIsError bool // a token not authenticated is an error, as the apiserver's bearer token authenticator
	cache          *ttlCache[tokenResult]
	ttl            time.Duration
	retry          retrier
}

var errInvalidToken = errors.New("invalid bearer token")

func (a *authn) AuthenticateRequest(r *http.Request) (*User, bool, error) {
	// as the apiserver's union of authenticators: the first user found
	// wins; errors count only when none is
	var errs []error
	u, err := a.certUser(r)
	if u != nil {
		return u, true, nil
	}
	if err != nil {
		errs = append(errs, err)
	}
	scheme, token, hasToken := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	hasToken = hasToken && strings.EqualFold(scheme, "bearer") && token != ""
	if hasToken && a.tokens != nil {
		u, ok, err := a.reviewToken(r.Context(), token)
		if ok {
			return u, true, nil
		}
		if err == nil && a.invalidIsError {
			err = errInvalidToken
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, false, errors.Join(errs...)
	}
	if a.anonymous {
		return &User{Name: UserAnonymous, Groups: []string{GroupUnauthenticated}}, true, nil
	}
	return nil, false, nil
}

// reviewToken asks the apiserver who token is, through the cache if any.
func (a *authn) reviewToken(ctx context.Context, token string) (*User, bool, error) {
	var key string
	if a.cache != nil {
		h := sha256.New()
		h.Write([]byte(token))
		for _, aud := range a.audiences {
			h.Write([]byte{0})
			h.Write([]byte(aud))
		}
		key = string(h.Sum(nil))
		if res, ok := a.cache.get(key); ok {
			return res.user, res.ok, nil
		}
	}
	var tr *authnv1.TokenReview
	err := a.retry.do(ctx, func() (err error) {
		tr, err = a.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{
			Token: token, Audiences: a.audiences,
		}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	if tr.Status.Error != "" {
		return nil, false, errors.New("token review: " + tr.Status.Error)
	}
	var res tokenResult
	if tr.Status.Authenticated {
		tu := tr.Status.User
		res.user, res.ok = &User{Name: tu.Username, UID: tu.UID, Groups: tu.Groups}, true
		if tu.Extra != nil {
			res.user.Extra = make(map[string][]string, len(tu.Extra))
			for k, v := range tu.Extra {
				res.user.Extra[k] = v
			}
		}
	}
	if a.cache != nil {
		a.cache.set(key, res, a.ttl)
	}
	return res.user, res.ok, nil
}

// CredentialIDKey is the Extra key of the credential that authenticated a
// user (for a client certificate, X509SHA256=<hex of its DER's SHA-256>).
const CredentialIDKey = "authentication.kubernetes.io/credential-id"

// uidOID is the subject attribute a client certificate carries its user's
// UID in.
var uidOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57683, 2}

// certUser returns the user of the request's client certificate: one the
// handshake verified, else one a.roots verifies (as the kubelet, which
// requests certificates and verifies them itself). nil without one; an
// error for a certificate the roots do not verify or whose UID attribute
// is not a single non-empty string.
func (a *authn) certUser(r *http.Request) (*User, error) {
	if r.TLS == nil {
		return nil, nil
	}
	var c *x509.Certificate
	switch {
	case len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0:
		c = r.TLS.VerifiedChains[0][0]
		if !hasClientAuth(c) {
			return nil, nil
		}
	case a.roots != nil && len(r.TLS.PeerCertificates) > 0:
		c = r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, ic := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return nil, fmt.Errorf("verifying certificate %q (serial %s) failed: %w", c.Subject.CommonName, c.SerialNumber, err)
		}
	default:
		return nil, nil
	}
	if c.Subject.CommonName == "" {
		return nil, nil
	}
	var uids []string
	for _, n := range c.Subject.Names {
		if !n.Type.Equal(uidOID) {
			continue
		}
		uid, ok := n.Value.(string)
		if !ok {
			return nil, errors.New("x509: the certificate's UID is not a string")
		}
		uids = append(uids, uid)
	}
	var uid string
	switch {
	case len(uids) > 1:
		return nil, fmt.Errorf("x509: expected 1 UID, found %d", len(uids))
	case len(uids) == 1 && uids[0] == "":
		return nil, errors.New("x509: the certificate's UID is empty")
	case len(uids) == 1:
		uid = uids[0]
	}
	sum := sha256.Sum256(c.Raw)
	return &User{
		Name: c.Subject.CommonName, UID: uid, Groups: c.Subject.Organization,
		Extra: map[string][]string{CredentialIDKey: {"X509SHA256=" + hex.EncodeToString(sum[:])}},
	}, nil
}

func hasClientAuth(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// AuthzConfig configures NewWebhookAuthorizer, as the kubelet's
// authorization.webhook.
type AuthzConfig struct {
	// Reviews answers the SubjectAccessReviews. Required.
	Reviews SubjectAccessReviewer
	// AuthorizedTTL and UnauthorizedTTL keep an allowed and a refused
	// review for that long (errors are not kept); 0 asks every time. The
	// kubelet's are DefaultAuthorizedCacheTTL and
	// DefaultUnauthorizedCacheTTL.
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// Clock times the cache and the retries. Default the real clock.
	Clock clock.Clock
}

// NewWebhookAuthorizer returns the kubelet's webhook authorizer
// (--authorization-mode=Webhook): a SubjectAccessReview of the request's
// attributes (get nodes/proxy, nodes/metrics, ... named after the node)
// for the user's name, UID, groups and Extra, its answer kept for the
// request's attributes and user as c says.
func NewWebhookAuthorizer(c AuthzConfig) (Authorizer, error) {
	if c.Reviews == nil {
		return nil, fmt.Errorf("%w: the webhook authorizer needs a SubjectAccessReviewer", ErrInvalidConfig)
	}
	if c.AuthorizedTTL < 0 || c.UnauthorizedTTL < 0 {
		return nil, fmt.Errorf("%w: authorization cache TTLs %s and %s: negative", ErrInvalidConfig, c.AuthorizedTTL, c.UnauthorizedTTL)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	w := &webhookAuthz{reviews: c.Reviews, allowTTL: c.AuthorizedTTL, denyTTL: c.UnauthorizedTTL, retry: retrier{c.Clock}}
	if c.AuthorizedTTL > 0 || c.UnauthorizedTTL > 0 {
		w.cache = newTTLCache[decision](c.Clock)
	}
	return w, nil
}

// WebhookAuthorizer is NewWebhookAuthorizer without a cache: every
// request asks.
func WebhookAuthorizer(reviews SubjectAccessReviewer) Authorizer {
	return &webhookAuthz{reviews: reviews}
}

type decision struct {
	allowed bool
	reason  string
}

type webhookAuthz struct {
	reviews           SubjectAccessReviewer
	cache             *ttlCache[decision]
	allowTTL, denyTTL time.Duration
	retry             retrier
}

func (w *webhookAuthz) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	spec := authzv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
		},
	}
	if u := a.User; u != nil {
		spec.User, spec.UID, spec.Groups = u.Name, u.UID, u.Groups
		if u.Extra != nil {
			spec.Extra = make(map[string]authzv1.ExtraValue, len(u.Extra))
			for k, v := range u.Extra {
				spec.Extra[k] = v
			}
		}
	}
	var key string
	if w.cache != nil {
		// as the apiserver's webhook: the whole review is the key
		b, err := json.Marshal(spec)
		if err != nil {
			return false, "", fmt.Errorf("subject access review: %w", err)
		}
		key = string(b)
		if d, ok := w.cache.get(key); ok {
			return d.allowed, d.reason, nil
		}
	}
	var got *authzv1.SubjectAccessReview
	err := w.retry.do(ctx, func() (err error) {
		got, err = w.reviews.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	reason := got.Status.Reason
	if e := got.Status.EvaluationError; e != "" {
		reason = strings.TrimSpace(reason + " " + e)
	}
	// no opinion is a refusal, as the kubelet's
	d := decision{allowed: got.Status.Allowed && !got.Status.Denied, reason: reason}
	if w.cache != nil {
		ttl := w.denyTTL
		if d.allowed {
			ttl = w.allowTTL
		}
		w.cache.set(key, d, ttl)
	}
	return d.allowed, d.reason, nil
}

// ttlCache keeps values for a time on a clock, at most maxCacheEntries.
type ttlCache[V any] struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	m     map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](c clock.PassiveClock) *ttlCache[V] {
	return &ttlCache[V]{clock: c, m: make(map[string]ttlEntry[V])}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !c.clock.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// set keeps v for ttl; 0 keeps nothing.
func (c *ttlCache[V]) set(key string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if _, ok := c.m[key]; !ok && len(c.m) >= maxCacheEntries {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < maxCacheEntries {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[key] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}

// The kubelet's webhook retries (the apiserver's
// DefaultAuthWebhookRetryBackoff): a review that fails for a passing
// reason is tried again after 500ms, then 1.5 times longer each time
// (jittered by up to 20 %), five tries in all.
const (
	retryInitial = 500 * time.Millisecond
	retryFactor  = 1.5
	retryJitter  = 0.2
	retrySteps   = 5
)

// retrier retries a review on the errors the apiserver's webhooks retry
// on; a zero one (no clock) tries once.
type retrier struct{ clock clock.Clock }

func (r retrier) do(ctx context.Context, f func() error) error {
	wait := retryInitial
	for try := 1; ; try++ {
		err := f()
		if err == nil || r.clock == nil || try == retrySteps || !transient(err) {
			return err
		}
		t := r.clock.NewTimer(time.Duration(float64(wait) * (1 + retryJitter*rand.Float64())))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C():
		}
		wait = time.Duration(float64(wait) * retryFactor)
	}
}

// transient says whether err is worth another try, as the apiserver's
// webhook.DefaultShouldRetry: a connection reset, an internal error, a
// timeout, too many requests, or any answer asking to retry later.
func transient(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) || apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}

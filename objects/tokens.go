package objects

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// TokenCreator requests service-account tokens in one namespace (the
// TokenRequest API); client-go's CoreV1().ServiceAccounts(ns) satisfies it.
type TokenCreator interface {
	CreateToken(ctx context.Context, serviceAccountName string, tokenRequest *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// Token refresh bounds, the kubelet token manager's.
const (
	tokenMaxTTL    = 24 * time.Hour
	tokenMaxJitter = 10 * time.Second
)

// TokensConfig configures Tokens.
type TokensConfig struct {
	// ServiceAccounts returns the service-account client of a namespace.
	// nil: every request fails with ErrNoSource.
	ServiceAccounts func(namespace string) TokenCreator
	// Clock is the time source. Default the real clock.
	Clock clock.PassiveClock
	// Jitter returns a fraction in [0,1) of the up to 10s by which a refresh
	// comes early, so tokens of many pods are not refreshed at once.
	// Default math/rand; tests pass a constant.
	Jitter func() float64
	// Log receives failed refreshes. Default logr.Discard().
	Log logr.Logger
}

// Tokens is the kubelet's service-account token manager: it requests tokens
// through the TokenRequest API and caches each until 80 % of its lifetime
// has passed, or 24 h for longer ones (less a jitter of up to 10 s). When a
// refresh fails, the cached token is served while it is still valid. Safe
// for concurrent use.
type Tokens struct {
	cfg TokensConfig
	mu  sync.Mutex
	m   map[string]*authenticationv1.TokenRequest
	// uids maps a pod to its tokens' keys, for Forget.
	uids      map[types.UID][]string
	lastClean time.Time
}

// NewTokens returns Tokens for c.
func NewTokens(c TokensConfig) *Tokens {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	if c.Log.GetSink() == nil {
		c.Log = logr.Discard()
	}
	return &Tokens{cfg: c, m: map[string]*authenticationv1.TokenRequest{}, uids: map[types.UID][]string{}}
}

// Token returns a token for service account namespace/name as tr asks
// (audiences, expirationSeconds, bound object), from the cache unless it is
// due for a refresh. The result is shared: do not modify it.
func (t *Tokens) Token(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if t.cfg.ServiceAccounts == nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", namespace, name, ErrNoSource)
	}
	k := tokenKey(namespace, name, tr)
	t.mu.Lock()
	cached := t.m[k]
	t.cleanLocked()
	t.mu.Unlock()
	if cached != nil && !t.requiresRefresh(cached) {
		return cached, nil
	}
	got, err := t.cfg.ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err == nil && (got == nil || got.Status.Token == "") {
		err = fmt.Errorf("the apiserver returned no token")
	}
	if err != nil {
		switch {
		case cached == nil:
			return nil, fmt.Errorf("failed to fetch token: %w", err)
		case t.expired(cached):
			return nil, fmt.Errorf("token for service account %s/%s expired and refresh failed: %w", namespace, name, err)
		}
		t.cfg.Log.Error(err, "couldn't refresh token, serving the cached one", "serviceAccount", namespace+"/"+name)
		return cached, nil
	}
	if got.Spec.ExpirationSeconds == nil {
		got.Spec.ExpirationSeconds = tr.Spec.ExpirationSeconds
	}
	t.mu.Lock()
	t.m[k] = got
	if ref := tr.Spec.BoundObjectRef; ref != nil && ref.UID != "" && cached == nil {
		t.uids[ref.UID] = append(t.uids[ref.UID], k)
	}
	t.mu.Unlock()
	return got, nil
}

// Forget drops the tokens bound to the pod with uid, once it is gone.
func (t *Tokens) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range t.uids[uid] {
		delete(t.m, k)
	}
	delete(t.uids, uid)
}

// Len returns how many tokens are cached.
func (t *Tokens) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// requiresRefresh is the kubelet's rule: refresh once 80 % of the token's
// lifetime has passed or it is 24 h old, each less a jitter.
func (t *Tokens) requiresRefresh(tr *authenticationv1.TokenRequest) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	now := t.cfg.Clock.Now()
	life := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	iat := exp.Add(-life)
	jitter := time.Duration(t.cfg.Jitter()*tokenMaxJitter.Seconds()) * time.Second
	if now.After(iat.Add(tokenMaxTTL - jitter)) {
		return true
	}
	return now.After(exp.Add(-time.Duration(*tr.Spec.ExpirationSeconds*20/100)*time.Second - jitter))
}

func (t *Tokens) expired(tr *authenticationv1.TokenRequest) bool {
	return t.cfg.Clock.Now().After(tr.Status.ExpirationTimestamp.Time)
}

// cleanLocked drops expired tokens, at most once a minute. t.mu is held.
func (t *Tokens) cleanLocked() {
	now := t.cfg.Clock.Now()
	if now.Sub(t.lastClean) < time.Minute {
		return
	}
	t.lastClean = now
	for k, tr := range t.m {
		if t.expired(tr) {
			delete(t.m, k)
		}
	}
}

func tokenKey(namespace, name string, tr *authenticationv1.TokenRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q/%q/%q/", namespace, name, tr.Spec.Audiences)
	if tr.Spec.ExpirationSeconds != nil {
		fmt.Fprintf(&b, "%d", *tr.Spec.ExpirationSeconds)
	}
	if r := tr.Spec.BoundObjectRef; r != nil {
		fmt.Fprintf(&b, "/%s/%s/%q/%s", r.APIVersion, r.Kind, r.Name, r.UID)
	}
	if tr.UID != "" {
		fmt.Fprintf(&b, "/%s", tr.UID)
	}
	return b.String()
}

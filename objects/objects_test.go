package objects_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestCacheReadsEachObjectOncePerTTL(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "1"}})
	c := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Services: api.Services, Clock: clk})
	for range 10 {
		cm, err := c.GetConfigMap(ctx, "ns", "cm")
		require.NoError(t, err)
		require.Equal(t, "1", cm.Data["k"])
	}
	require.Equal(t, 1, api.Requests()["get configmaps"], "served from the cache within the TTL")

	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}, Data: map[string]string{"k": "2"}})
	clk.SetTime(t0.Add(59 * time.Second))
	cm, _ := c.GetConfigMap(ctx, "ns", "cm")
	require.Equal(t, "1", cm.Data["k"], "still fresh")
	clk.SetTime(t0.Add(61 * time.Second))
	cm, _ = c.GetConfigMap(ctx, "ns", "cm")
	require.Equal(t, "2", cm.Data["k"], "read again after the TTL")
	require.Equal(t, 2, api.Requests()["get configmaps"])
}

func TestCacheDoesNotCacheFailures(t *testing.T) {
	ctx := context.Background()
	api := objectstest.New()
	c := objects.New(objects.Config{Secrets: api.Secrets})
	_, err := c.GetSecret(ctx, "ns", "s")
	require.True(t, apierrors.IsNotFound(err))
	require.Equal(t, `secrets "s" not found`, err.Error())
	api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})
	_, err = c.GetSecret(ctx, "ns", "s")
	require.NoError(t, err, "the object is seen as soon as it exists")

	api.InjectError("get", "secrets", errors.New("boom"))
	_, err = c.GetSecret(ctx, "ns", "other")
	require.ErrorContains(t, err, "boom")
}

func TestCacheWithoutClientsIsAClearError(t *testing.T) {
	c := objects.New(objects.Config{})
	_, err := c.GetConfigMap(context.Background(), "ns", "x")
	require.ErrorIs(t, err, objects.ErrNoSource)
	_, err = c.GetSecret(context.Background(), "ns", "x")
	require.ErrorIs(t, err, objects.ErrNoSource)
	svcs, err := c.ListServices(context.Background(), "ns")
	require.NoError(t, err, "no service client: no service variables")
	require.Empty(t, svcs)
}

func TestCacheServicesPerNamespace(t *testing.T) {
	api := objectstest.New()
	api.Set(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s1"}})
	api.Set(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "s2"}})
	c := objects.New(objects.Config{Services: api.Services})
	for range 3 {
		l, err := c.ListServices(context.Background(), "a")
		require.NoError(t, err)
		require.Len(t, l, 1)
		require.Equal(t, "s1", l[0].Name)
	}
	require.Equal(t, 1, api.Requests()["list services"])
}

func tokenRequest(uid string, exp int64) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"api"}, ExpirationSeconds: ptr.To(exp),
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: k8stypes.UID("uid-" + uid)},
	}}
}

func TestTokenRefreshTiming(t *testing.T) {
	for _, tc := range []struct {
		name       string
		exp        int64
		jitter     float64
		stillValid time.Duration // cached at this age
		refreshed  time.Duration // a new token at this age
	}{
		{name: "refreshed at 80% of an hour's lifetime", exp: 3600, stillValid: 2879 * time.Second, refreshed: 2881 * time.Second},
		{name: "jitter makes the refresh up to 10s earlier", exp: 3600, jitter: 0.999, stillValid: 2870 * time.Second, refreshed: 2872 * time.Second},
		{name: "a 48h token is refreshed after 24h", exp: 48 * 3600, stillValid: 24*time.Hour - time.Second, refreshed: 24*time.Hour + time.Second},
		{name: "a 10 minute token at 8 minutes", exp: 600, stillValid: 479 * time.Second, refreshed: 481 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clocktesting.NewFakePassiveClock(t0)
			api := objectstest.New()
			api.Clock = clk
			api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})
			tk := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts, Clock: clk, Jitter: func() float64 { return tc.jitter }})
			first, err := tk.Token(ctx, "ns", "default", tokenRequest("1", tc.exp))
			require.NoError(t, err)
			clk.SetTime(t0.Add(tc.stillValid))
			again, err := tk.Token(ctx, "ns", "default", tokenRequest("1", tc.exp))
			require.NoError(t, err)
			require.Equal(t, first.Status.Token, again.Status.Token, "not due yet")
			clk.SetTime(t0.Add(tc.refreshed))
			fresh, err := tk.Token(ctx, "ns", "default", tokenRequest("1", tc.exp))
			require.NoError(t, err)
			require.NotEqual(t, first.Status.Token, fresh.Status.Token, "refreshed")
			require.Equal(t, 2, api.Requests()["create serviceaccounts/token"])
		})
	}
}

func TestTokenRefreshFailureServesTheValidToken(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(t0)
	api := objectstest.New()
	api.Clock = clk
	api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})
	tk := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts, Clock: clk, Jitter: func() float64 { return 0 }})
	first, err := tk.Token(ctx, "ns", "default", tokenRequest("1", 3600))
	require.NoError(t, err)
	api.InjectError("create", "serviceaccounts/token", errors.New("apiserver down"))
	clk.SetTime(t0.Add(50 * time.Minute))
	got, err := tk.Token(ctx, "ns", "default", tokenRequest("1", 3600))
	require.NoError(t, err, "still valid: served")
	require.Equal(t, first.Status.Token, got.Status.Token)
	clk.SetTime(t0.Add(61 * time.Minute))
	_, err = tk.Token(ctx, "ns", "default", tokenRequest("1", 3600))
	require.ErrorContains(t, err, "expired and refresh failed")
}

func TestTokensAreKeptPerRequestAndForgotten(t *testing.T) {
	ctx := context.Background()
	api := objectstest.New()
	api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})
	tk := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts})
	a, err := tk.Token(ctx, "ns", "default", tokenRequest("1", 3600))
	require.NoError(t, err)
	b, err := tk.Token(ctx, "ns", "default", tokenRequest("2", 3600))
	require.NoError(t, err)
	require.NotEqual(t, a.Status.Token, b.Status.Token, "bound to different pods")
	require.Equal(t, 2, tk.Len())
	tk.Forget("uid-1")
	require.Equal(t, 1, tk.Len())

	_, err = tk.Token(ctx, "ns", "missing", tokenRequest("3", 3600))
	require.ErrorContains(t, err, `failed to fetch token: serviceaccounts "missing" not found`)
	_, err = objects.NewTokens(objects.TokensConfig{}).Token(ctx, "ns", "default", tokenRequest("1", 3600))
	require.ErrorIs(t, err, objects.ErrNoSource)
}

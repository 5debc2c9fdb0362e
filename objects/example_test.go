package objects_test

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
)

// Reads served from the cache, and a token kept until it is due for a
// refresh. With client-go, pass func(ns string) objects.ConfigMapGetter {
// return cs.CoreV1().ConfigMaps(ns) } and so on.
func Example() {
	ctx := context.Background()
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v"}})
	api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})

	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets})
	for range 3 {
		cm, _ := cache.GetConfigMap(ctx, "ns", "cfg")
		fmt.Println(cm.Data["k"])
	}
	tokens := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts})
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	a, _ := tokens.Token(ctx, "ns", "default", tr)
	b, _ := tokens.Token(ctx, "ns", "default", tr)
	fmt.Println(a.Status.Token == b.Status.Token)
	fmt.Println(api.Requests())
	// Output:
	// v
	// v
	// v
	// true
	// map[create serviceaccounts/token:1 get configmaps:1]
}

// Package objectstest is an in-memory apiserver for the objects pods
// reference (configMaps, secrets, services, service accounts and their
// tokens), whose per-namespace clients satisfy the objects package's
// interfaces, with request counts and error injection.
//
//	api := objectstest.New()
//	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v"}})
//	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Services: api.Services})
//
// Where it differs from a real apiserver: there is no Watch, no resource
// versions, no validation (a secret over 1 MiB is stored), tokens are
// opaque strings ("token-<n>") no TokenReview accepts, and CreateToken does
// not check audiences (set CreateTokenFunc to refuse some). e2e/ runs the
// same code against a real kube-apiserver.
package objectstest

// Package objectstest is an in-memory apiserver for the objects pods
// reference (configMaps, secrets, services, service accounts and their
// tokens), whose per-namespace clients satisfy the objects package's
// interfaces, with request counts and error injection.
//
//	api := objectstest.New()
//	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v"}})
//	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Services: api.Services})
//
// ConfigMaps and secrets can be watched (by namespace, optionally by
// metadata.name), with resource versions from one counter; CloseWatches
// ends every watch as an apiserver's timeout does.
//
// Where it differs from a real apiserver: no List, no bookmarks, a watch
// from a resource version does not replay what happened since (only one
// from "" sends the current state), no validation (a secret over 1 MiB is
// stored), tokens are opaque strings ("token-<n>") no TokenReview accepts,
// and CreateToken does not check audiences (set CreateTokenFunc to refuse
// some). e2e/ runs the same code against a real kube-apiserver.
package objectstest

// Package objects reads the API objects pods reference — configMaps,
// secrets, services and service-account tokens — through interfaces that
// client-go's typed clients satisfy as they are, and caches them so a node
// does not ask the apiserver for every object at every sync.
//
// Where it sits: podenv (container environments) and volume (configMap,
// secret, projected volumes) read through a Cache and Tokens; the agent's
// assembler, or any provider, builds them once per node.
//
//   - Cache serves configMaps, secrets and service lists, reading each at
//     most once per TTL (default 1m, the kubelet's cache-based managers'
//     default); failures, NotFound included, are not cached. With
//     Config.Watch and while Run runs, each configMap and secret read is
//     kept current by a watch on that one object (the kubelet's default
//     Watch strategy): no more GETs, changes seen as they happen; a watch
//     is dropped once its object goes unused for ten TTLs. A namespace's
//     service list is kept current the same way, by a watch on the
//     namespace's services from the list's resource version (listed again
//     when a watch cannot resume), as the kubelet's service informer: a
//     service created after the first list is in the next one.
//   - Tokens is the kubelet's token manager: TokenRequest, refresh at 80 %
//     of the lifetime or after 24 h, the cached token served while valid
//     when a refresh fails.
//
// Usage with client-go:
//
//	cache := objects.New(objects.Config{
//		ConfigMaps: func(ns string) objects.ConfigMapGetter { return cs.CoreV1().ConfigMaps(ns) },
//		Secrets:    func(ns string) objects.SecretGetter { return cs.CoreV1().Secrets(ns) },
//		Services:   func(ns string) objects.ServiceLister { return cs.CoreV1().Services(ns) },
//		Watch:      true,
//	})
//	go cache.Run(ctx)
//	tokens := objects.NewTokens(objects.TokensConfig{
//		ServiceAccounts: func(ns string) objects.TokenCreator { return cs.CoreV1().ServiceAccounts(ns) },
//	})
//
// objectstest has an in-memory API for tests.
package objects

// Package apiserver is the pod source for pods bound to this node in the
// apiserver (field selector spec.nodeName=<node>), through a two-method
// client that client-go's typed CoreV1().Pods("") satisfies as it is, so the
// library never imports client-go.
//
// Where it sits: apiserver -> Source -> podconfig.PodConfig channel
// (podutil.ApiserverSource) -> the sync loop.
//
// The first list (resourceVersion "", a consistent read) is sent as a SET. After it each watch event is sent as one
// incremental update (ADDED -> ADD, MODIFIED -> UPDATE, DELETED -> REMOVE;
// the mux turns an UPDATE into DELETE or RECONCILE as needed), so one pod
// change costs O(1) instead of a diff of every pod on the node. A watch that
// ends is resumed from the last resourceVersion seen (bookmarks included), so
// no event is lost or repeated; a 410 (Expired or Gone, as a Watch error or
// an ERROR event) relists and sends the list as a SET, from which the mux
// reports exactly the difference. Failed calls are retried with exponential
// back-off on the injected clock, and so is a watch that ends without an
// event, unless the one before it delivered: a loaded apiserver closes
// watchers that fall behind, sometimes before their first event. Config.Filter keeps pods out as
// virtual-kubelet's PodEventFilterFunc does.
//
// Usage:
//
//	src, err := apiserver.New(apiserver.Config{Client: clientset.CoreV1().Pods(""), NodeName: node})
//	if err != nil { ... }
//	go src.Run(ctx, cfg.Channel(ctx, podutil.ApiserverSource))
package apiserver

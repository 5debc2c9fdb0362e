// Package manifesturl is the pod source for static pods served over HTTP
// (the kubelet's --manifest-url): a v1 Pod or PodList, polled every check
// frequency with optional headers.
//
// Where it sits: manifest URL -> Source -> podconfig.PodConfig channel
// (podutil.HTTPSource) -> the sync loop. Pods are decoded, defaulted and
// validated by podconfig/staticpod.
//
// Each poll sends the body's pods as a SET, except that an unchanged body
// (good or bad) is skipped; an empty body sends an empty SET. A non-200
// answer, a transport error, a timeout, a body above the size limit, or a
// body that does not decode or holds an invalid pod is an error that leaves
// the last good set in place (as in the kubelet, one invalid pod rejects the
// whole body); the invalid body is also reported as a FailedValidation
// event on the node.
//
// Usage:
//
//	src, err := manifesturl.New(manifesturl.Config{URL: u, Header: h, NodeName: node})
//	if err != nil { ... }
//	go src.Run(ctx, cfg.Channel(ctx, podutil.HTTPSource))
package manifesturl

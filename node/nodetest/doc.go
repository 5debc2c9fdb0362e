// Package nodetest is a fake apiserver for package node: one in-memory
// store of Nodes and Leases whose clients have the method sets of
// client-go's CoreV1().Nodes() and CoordinationV1().Leases(ns). It records
// every call, injects errors per resource and verb, runs a hook before each
// call (to block like a hanging apiserver) and answers conflicts and
// missing objects as the apiserver does. Nodes() cannot patch (a client
// that only updates); PatchingNodes() can, as client-go's, applying
// strategic merge patches by the API's merge keys. Nodes can be listed and watched
// (by metadata.name), as the node controller keeps its Node current; a
// watch resumes from a resourceVersion within the last 1000 Node events
// (Compact forgets them: 410 Gone), and CloseWatches and EndWatches end
// watches as an apiserver's timeout or error does.
//
// Where it lies: no validation, admission or RBAC; Update keeps a Node's
// status and UpdateStatus its spec, but nothing else of the apiserver's
// strategies; reads are always of the latest state, whatever
// resourceVersion they ask for (no cache that lags); watches send no
// bookmarks, ignore TimeoutSeconds and take no label selector; Leases have
// no watch; one namespace of Leases. The e2e module runs package node
// against a real kube-apiserver for the rest.
package nodetest

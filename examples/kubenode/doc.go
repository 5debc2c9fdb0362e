// Command kubenode is a node agent on nodekit that joins a real cluster:
// it registers its Node, keeps the Node's status and Lease (package node),
// runs the pods the scheduler binds to it and reports their status, as the
// kubelet does.
//
// It is a module of its own because it imports client-go, which the library
// never does. It reaches the apiserver through client-go's generic typed
// client with a scheme of the five API groups it uses (client.go), not
// the generated clientset, whose scheme links every group into the binary
// and so into the agent's resident memory. From this directory:
//
//	go run . -kubeconfig ~/.kube/config -node-name nodekit-1
//	sudo go run . -kubeconfig /etc/kubernetes/kubelet.conf -node-name nodekit-1 \
//	    -cri unix:///run/containerd/containerd.sock -node-ip 10.0.0.5
//
// Without -cri the pods run on the built-in in-memory runtime, which runs
// no commands: containers run until stopped, init containers exit 0. It
// takes the standalone agent's flags too (-pod-manifest-path, -manifest-url,
// -max-pods, -sync-frequency, the DNS flags and, with -cri, the QoS cgroup
// flags -cgroups-per-qos, -enforce-node-allocatable, ..., the container log
// rotation flags -container-log-max-size, -container-log-max-files, ...,
// and the server flags
// -port, -healthz-port, -tls-cert-file, ...: it serves the kubelet's
// endpoints as the standalone agent does; both programs define these flags
// in examples/internal/nodeflags), plus the kubelet's -node-labels,
// -register-with-taints, -node-ip (one IP or a dual-stack pair),
// -pods-per-core, and -system-reserved and -kube-reserved, which come off
// the Node's allocatable with the hard eviction thresholds, as the
// kubelet's (and off the kubepods cgroup with -enforce-node-allocatable
// pods).
//
// It serves the kubelet's API as a kubelet of a kubeadm cluster, so that
// `kubectl logs` and the apiserver's nodes/proxy reach it: on -address
// 0.0.0.0 (-port 10250) over TLS, with the kubelet's authentication and
// authorization (package server's NewAuthenticator and
// NewWebhookAuthorizer):
//
//   - -client-ca-file: client certificates it verifies are users (CN) in
//     groups (O); default the kubeconfig's cluster CA, which in a kubeadm
//     cluster signs the apiserver's client certificate to the kubelets.
//   - -authentication-token-webhook (default true): bearer tokens are
//     reviewed with a TokenReview, kept
//     -authentication-token-webhook-cache-ttl (2m).
//   - -anonymous-auth (default false): a request without credentials gets
//     401; with it, it is system:anonymous.
//   - -authorization-mode Webhook (default) or AlwaysAllow: a
//     SubjectAccessReview of get (create, ...) nodes/<subresource> named
//     after the node, as the kubelet's (proxy for logs, exec, attach,
//     port-forward; pods or proxy for /pods; metrics, stats, log, healthz),
//     allowed kept -authorization-webhook-cache-authorized-ttl (5m),
//     refused -authorization-webhook-cache-unauthorized-ttl (30s); 403
//     "Forbidden (user=..., verb=..., resource=nodes, subresource(s)=[...])".
//   - -tls-cert-file and -tls-private-key-file, or else a self-signed
//     certificate for the node's name, the host name and -node-ip, made in
//     -cert-dir (default <user cache dir>/nodekit/<node name>/pki, as
//     kubelet.crt and kubelet.key) and reused while valid for them.
//   - -rotate-server-certificates: the kubelet's server TLS bootstrap
//     instead: a CertificateSigningRequest (signer
//     kubernetes.io/kubelet-serving, system:node:<name> in system:nodes,
//     the node's names and IPs) that an approver and the signer must act
//     on; TLS handshakes fail until it is issued ("no serving certificate
//     available for the kubelet"). The certificate is kept in -cert-dir as
//     kubelet-server-current.pem and asked for again at 70 to 90 % of its
//     lifetime. The credentials then need create and get on
//     certificatesigningrequests.
//
// A port already in use stops it at start, naming the flag and address. `kubectl get nodes` shows the node
// Ready within seconds; the Node's daemonEndpoints carry -port (0, no
// endpoint, when -port 0 turns the API off), and the agent's events
// (admission, probes, volumes, env, pull secrets, DNS and cgroups) go to
// the apiserver as Events from component "kubelet" on this
// host, as `kubectl describe pod` shows them. With -cri the CRI calls are
// counted in the gRPC client metrics on /metrics. SIGINT or SIGTERM stops it; its pods are left as
// they are, as when the kubelet stops, and the node controller marks the
// node NotReady once its Lease expires (40s).
//
// The credentials need what a kubelet's need: create, get and update Nodes
// and nodes/status, Leases in kube-node-lease, list and watch Pods bound to
// the node, patch pods/status, create and delete (mirror) pods, create and
// patch events, create tokenreviews and subjectaccessreviews (for its API's
// webhooks); with -cri also get configMaps and secrets, list services and create
// serviceaccounts/token, for the pods' environments and volumes. An
// apiserver that refuses the Node ends the program with its reason.
package main

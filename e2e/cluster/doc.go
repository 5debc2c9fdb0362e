// Package cluster runs a throwaway Kubernetes control plane for nodekit's
// real-cluster tests: one etcd and one kube-apiserver on loopback, with a CA,
// serving and client certificates and service-account keys generated at
// start. No kubelet, scheduler or controller-manager runs: the code under test
// plays the node.
//
// The server binaries come from FindBinaries, which runs hack/servers.sh to
// build them from the Go module proxy on first use and caches them by version.
//
//	bins, err := cluster.FindBinaries(ctx, "hack/servers.sh", os.Stderr)
//	c, err := cluster.Start(ctx, cluster.Config{Binaries: bins})
//	defer c.Stop()
//	cs := kubernetes.NewForConfigOrDie(c.RESTConfig())
//
// Every process runs in its own process group with a parent-death signal, so
// the servers die with the test binary even when it is killed; Stop kills them
// and removes the working directory.
package cluster

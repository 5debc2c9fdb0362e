// Command criwait waits until a CRI runtime lists the given images. It is
// used by hack/containerd.sh, since containerd's CRI plugin indexes images
// imported with ctr a moment after the import returns.
//
//	go run ./hack/criwait -endpoint unix:///tmp/x/containerd.sock -timeout 60s IMAGE...
package main

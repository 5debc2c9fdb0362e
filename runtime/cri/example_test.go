package cri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/cri/fakecri"
)

// A manager over the fake CRI runtime; against containerd only the
// Endpoint changes.
func ExampleNew() {
	srv, err := fakecri.NewServer(fakecri.Config{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	dir, err := os.MkdirTemp("", "nodekit-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	m, err := cri.New(ctx, cri.Config{Endpoint: srv.Endpoint(), PodLogsRoot: filepath.Join(dir, "logs"), PodsRoot: filepath.Join(dir, "pods")})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
	}
	st, _ := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	res := m.SyncPod(ctx, pod, st, nil, nil)
	fmt.Println("sync error:", res.Error())

	st, _ = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	c := st.FindContainerStatusByName("nginx")
	fmt.Println(c.Name, c.State, "restarts:", c.RestartCount)
	fmt.Println("CRI calls to start:", srv.Calls("RunPodSandbox")+srv.Calls("ImageStatus")+srv.Calls("PullImage")+srv.Calls("CreateContainer")+srv.Calls("StartContainer"))
	// Output:
	// sync error: <nil>
	// nginx running restarts: 0
	// CRI calls to start: 5
}

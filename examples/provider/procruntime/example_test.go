package procruntime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/examples/provider/procruntime"
	"github.com/nodekit/nodekit/runtime"
)

// A pod synced until its container has run; an agent (agent.New with
// Runtime: rt) does this loop for you.
func Example() {
	root, err := os.MkdirTemp("", "procruntime-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	rt, err := procruntime.New(procruntime.Config{Root: root})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", UID: "uid-hello"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{
			{Name: "hello", Image: "ignored", Command: []string{"sh", "-c", "echo hello from a process"}},
		}},
	}
	ctx := context.Background()
	for {
		st, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			panic(err)
		}
		if c := st.FindContainerStatusByName("hello"); c != nil && c.State == runtime.ContainerStateExited {
			fmt.Println("exit code", c.ExitCode)
			break
		}
		if err := rt.SyncPod(ctx, pod, st, nil, nil).Error(); err != nil {
			panic(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	out, _ := os.ReadFile(filepath.Join(root, "default_hello_uid-hello", "hello", "0.log"))
	fmt.Print(string(out))
	// Output:
	// exit code 0
	// hello from a process
}

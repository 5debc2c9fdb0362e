package cm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit/cm"
)

func ExampleManager_EnsurePod() {
	// A cgroup v2 file system imitated in a temp dir; on a node leave
	// MountPoint empty for /sys/fs/cgroup.
	mount, _ := os.MkdirTemp("", "cgroup")
	defer os.RemoveAll(mount)
	_ = os.WriteFile(filepath.Join(mount, "cgroup.controllers"), []byte("cpu memory pids"), 0o644)

	m, err := cm.New(context.Background(), cm.Config{
		MountPoint:     mount,
		Capacity:       v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
		SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
	})
	if err != nil {
		panic(err)
	}
	pod := &v1.Pod{}
	pod.UID = "0b1c"
	pod.Spec.Containers = []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")},
	}}}
	parent, err := m.EnsurePod(pod) // the sandbox's cgroup parent
	if err != nil {
		panic(err)
	}
	weight, _ := os.ReadFile(filepath.Join(mount, parent, "cpu.weight"))
	memory, _ := os.ReadFile(filepath.Join(mount, parent, "memory.max"))
	alloc := m.Allocatable()
	fmt.Println(parent)
	fmt.Println("cpu.weight", string(weight), "memory.max", string(memory))
	fmt.Println("allocatable memory", alloc.Memory())
	// Output:
	// /kubepods/burstable/pod0b1c
	// cpu.weight 10 memory.max 268435456
	// allocatable memory 7Gi
}

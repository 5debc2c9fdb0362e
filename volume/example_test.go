package volume_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/volume"
)

// A configMap volume written with the atomic writer, then updated.
func ExampleManager_SetUp() {
	root, _ := os.MkdirTemp("", "pods")
	defer os.RemoveAll(root)
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"app.conf": "port=8080"}})
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, TTL: 1})
	m, _ := volume.New(volume.Config{PodsRoot: root, Objects: cache})

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "uid-1"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "conf", VolumeSource: v1.VolumeSource{
			ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}}}},
	}
	if err := m.SetUp(context.Background(), pod); err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := m.HostPath(pod, &pod.Spec.Volumes[0])
	b, _ := os.ReadFile(filepath.Join(dir, "app.conf"))
	fmt.Println(string(b))
	link, _ := os.Readlink(filepath.Join(dir, "app.conf"))
	fmt.Println(link)

	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"app.conf": "port=9090"}})
	_ = m.SetUp(context.Background(), pod) // at the next sync
	b, _ = os.ReadFile(filepath.Join(dir, "app.conf"))
	fmt.Println(string(b))
	fmt.Println(m.TearDown(pod.UID))
	// Output:
	// port=8080
	// ..data/app.conf
	// port=9090
	// <nil>
}

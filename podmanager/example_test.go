package podmanager_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podmanager"
	"github.com/nodekit/nodekit/podutil"
)

// A static pod and its mirror find each other by full name.
func Example() {
	m := podmanager.New()
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "kube-system", UID: "static-uid",
		Annotations: map[string]string{podutil.ConfigSourceAnnotationKey: podutil.FileSource}}}
	mirror := static.DeepCopy()
	mirror.UID = "mirror-uid"
	mirror.Annotations = map[string]string{podutil.ConfigSourceAnnotationKey: podutil.ApiserverSource, podutil.ConfigMirrorAnnotationKey: "hash"}
	m.AddOrUpdate(static)
	m.AddOrUpdate(mirror)

	run, mir, wasMirror := m.PodAndMirror(mirror)
	fmt.Println(run.UID, mir.UID, wasMirror)
	_, ok := m.GetPodByUID("mirror-uid") // mirrors are not desired pods
	fmt.Println(ok, len(m.Pods()))
	// Output:
	// static-uid mirror-uid true
	// false 1
}

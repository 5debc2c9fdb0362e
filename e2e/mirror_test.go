package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podconfig/file"
	"github.com/nodekit/nodekit/podutil"
	"github.com/nodekit/nodekit/status"
)

// staticPod is a pod as the file source delivers it: the UID and hash are
// the source's, and the apiserver has never seen it.
func staticPod(name, node, hash string) *corev1.Pod {
	p := testPod(name+"-"+node, node)
	p.UID = types.UID("static-" + hash)
	p.Annotations = map[string]string{
		podutil.ConfigSourceAnnotationKey: podutil.FileSource,
		podutil.ConfigHashAnnotationKey:   hash,
	}
	return p
}

func createNode(t *testing.T, cs *kubernetes.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitMirror waits until the apiserver has a mirror pod of static other than
// not (a UID), and returns it.
func waitMirror(t *testing.T, cs *kubernetes.Clientset, static *corev1.Pod, not types.UID) *corev1.Pod {
	t.Helper()
	var mirror *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(static.Namespace).Get(ctx, static.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = "no mirror pod"
			return false, nil
		case err != nil:
			return false, err
		case got.UID == not || got.DeletionTimestamp != nil:
			last = fmt.Sprintf("only the old mirror %s (deleting: %v)", got.UID, got.DeletionTimestamp != nil)
			return false, nil
		}
		mirror = got
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the mirror pod of %s: %v; last: %s", static.Name, err, last)
	}
	return mirror
}

func TestMirrorPods(t *testing.T) {
	c := startCluster(t)
	agentCS, _ := clientset(t, c.RESTConfig(), 50, 100)
	other, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx := t.Context()
	node := createNode(t, other, "n1")
	sm := startStatusManager(t, agentCS, status.Config{NodeName: "n1", Nodes: agentCS.CoreV1().Nodes(), SyncPeriod: 500 * time.Millisecond})

	static := staticPod("web", "n1", "hash1")
	report := func(ip string) {
		var old *corev1.PodStatus
		if s, ok := sm.GetPodStatus(static.UID); ok {
			old = &s
		}
		sm.SetPodStatus(static, status.GeneratePodStatus(static, runningStatus(static, ip, time.Now()), old,
			status.GenerateOptions{HostIPs: []string{"127.0.0.1"}}))
	}
	report("10.2.0.1")

	var mirror *corev1.Pod
	t.Run("a static pod gets a mirror pod", func(t *testing.T) {
		mirror = waitMirror(t, other, static, "")
		if !podutil.IsMirrorPod(mirror) || mirror.Annotations[podutil.ConfigMirrorAnnotationKey] != "hash1" {
			t.Fatalf("mirror annotations %v, want %s=hash1", mirror.Annotations, podutil.ConfigMirrorAnnotationKey)
		}
		if mirror.UID == static.UID {
			t.Fatalf("mirror pod has the static pod's UID %s; the apiserver assigns its own", mirror.UID)
		}
		if mirror.Spec.NodeName != "n1" {
			t.Fatalf("mirror on node %q, want n1", mirror.Spec.NodeName)
		}
		if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != node.UID {
			t.Fatalf("mirror owner references %+v, want the Node n1 (%s)", refs, node.UID)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := other.CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{})
			return err == nil && checkRunning(got, "10.2.0.1") == "", err
		})
		if err != nil {
			t.Fatalf("the mirror pod never showed the static pod's running status: %v", err)
		}
		if st, ok := sm.GetPodStatus(mirror.UID); !ok || st.Phase != corev1.PodRunning {
			t.Fatalf("status by the mirror's UID: %v %q, want the static pod's Running status", ok, st.Phase)
		}
	})

	t.Run("a deleted mirror pod is recreated", func(t *testing.T) {
		if mirror == nil {
			t.Skip("no mirror pod")
		}
		if err := other.CoreV1().Pods("default").Delete(ctx, static.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The agent syncs the static pod again.
		report("10.2.0.2")
		again := waitMirror(t, other, static, mirror.UID)
		if again.Annotations[podutil.ConfigMirrorAnnotationKey] != "hash1" {
			t.Fatalf("recreated mirror annotations %v", again.Annotations)
		}
		mirror = again
	})

	t.Run("a force-deleted mirror pod is recreated by the reconcile alone", func(t *testing.T) {
		if mirror == nil {
			t.Skip("no mirror pod")
		}
		zero := int64(0)
		if err := other.CoreV1().Pods("default").Delete(ctx, static.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		// No new status: only the periodic reconcile can notice.
		mirror = waitMirror(t, other, static, mirror.UID)
	})

	t.Run("a removed static pod takes its mirror pod along", func(t *testing.T) {
		if mirror == nil {
			t.Skip("no mirror pod")
		}
		// The manifest is gone: the agent keeps no status for the static pod.
		sm.RemoveOrphanedStatuses(map[types.UID]bool{})
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := other.CoreV1().Pods("default").Get(ctx, static.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			t.Fatalf("mirror pod still there: %v", err)
		}
	})

	t.Run("a pod of the same name that is no mirror is left alone", func(t *testing.T) {
		squatter, err := other.CoreV1().Pods("default").Create(ctx, testPod("db-n1", "n1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		db := staticPod("db", "n1", "hash2")
		sm.SetPodStatus(db, status.GeneratePodStatus(db, runningStatus(db, "10.2.0.3", time.Now()), nil, status.GenerateOptions{}))
		sm.Sync(ctx)
		got, err := other.CoreV1().Pods("default").Get(ctx, "db-n1", metav1.GetOptions{})
		if err != nil || got.UID != squatter.UID || podutil.IsMirrorPod(got) || got.Status.Phase != corev1.PodPending {
			t.Fatalf("the ordinary pod db-n1 was touched: err=%v uid=%s (want %s) annotations=%v phase=%q",
				err, got.UID, squatter.UID, got.Annotations, got.Status.Phase)
		}
	})
}

// TestMirrorPodsFromManifests runs the static-pod path without the agent:
// manifest directory -> file source -> PodConfig -> (this test's glue, the
// agent's part: report each pod running, forget removed ones) -> status
// manager -> apiserver.
func TestMirrorPodsFromManifests(t *testing.T) {
	c := startCluster(t)
	agentCS, _ := clientset(t, c.RESTConfig(), 50, 100)
	other, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx := t.Context()
	createNode(t, other, "n1")
	sm := startStatusManager(t, agentCS, status.Config{NodeName: "n1", Nodes: agentCS.CoreV1().Nodes(), SyncPeriod: 500 * time.Millisecond})

	dir := t.TempDir()
	manifest := filepath.Join(dir, "web.yaml")
	write := func(image string) {
		t.Helper()
		y := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: " + image + "\n"
		if err := os.WriteFile(manifest, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("busybox:1")

	src, err := file.New(file.Config{Path: dir, NodeName: "n1", CheckFrequency: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := podconfig.NewPodConfig(podconfig.Incremental, podconfig.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = src.Run(runCtx, cfg.Channel(runCtx, podutil.FileSource))
	}()
	go func() {
		defer wg.Done()
		known := map[types.UID]bool{}
		for {
			select {
			case <-runCtx.Done():
				return
			case u := <-cfg.Updates():
				for _, p := range u.Pods {
					if u.Op == podconfig.REMOVE {
						delete(known, p.UID)
						continue
					}
					known[p.UID] = true
					sm.SetPodStatus(p, status.GeneratePodStatus(p, runningStatus(p, "10.3.0.1", time.Now()), nil,
						status.GenerateOptions{HostIPs: []string{"127.0.0.1"}}))
				}
				if u.Op == podconfig.REMOVE {
					sm.RemoveOrphanedStatuses(maps.Clone(known))
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	static := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default"}}
	mirror := waitMirror(t, other, static, "")
	hash := mirror.Annotations[podutil.ConfigMirrorAnnotationKey]
	if hash == "" || mirror.Annotations[podutil.ConfigHashAnnotationKey] != hash ||
		mirror.Annotations[podutil.ConfigSourceAnnotationKey] != podutil.FileSource {
		t.Fatalf("mirror of the manifest has annotations %v, want config.mirror = config.hash and source file", mirror.Annotations)
	}

	t.Run("an edited manifest replaces the mirror pod", func(t *testing.T) {
		write("busybox:2")
		var last string
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := other.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			last = fmt.Sprintf("image %s, mirror hash %s", got.Spec.Containers[0].Image, got.Annotations[podutil.ConfigMirrorAnnotationKey])
			return got.Spec.Containers[0].Image == "busybox:2" && got.UID != mirror.UID &&
				got.Annotations[podutil.ConfigMirrorAnnotationKey] != hash, nil
		})
		if err != nil {
			t.Fatalf("mirror not replaced: %v; last %s", err, last)
		}
	})

	t.Run("a removed manifest removes the mirror pod", func(t *testing.T) {
		if err := os.Remove(manifest); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := other.CoreV1().Pods("default").Get(ctx, "web-n1", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
		if err != nil {
			t.Fatalf("mirror pod still there after its manifest was removed: %v", err)
		}
	})
}

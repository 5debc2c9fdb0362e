package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodekit/nodekit/e2e/cluster"
)

func testPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

// The watch-interruption test relies on these two properties of the harness.
func TestHarnessRestartAndCompaction(t *testing.T) {
	c := startCluster(t)
	cs, _ := clientset(t, c.RESTConfig(), 100, 200)
	ctx := t.Context()
	pods := cs.CoreV1().Pods("default")

	before, err := pods.Create(ctx, testPod("kept", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("apiserver restart keeps the stored pods", func(t *testing.T) {
		if err := c.APIServer().Restart(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := pods.Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || got.UID != before.UID {
			t.Fatalf("after restart: %v uid=%v, want uid %s", err, got.UID, before.UID)
		}
	})

	t.Run("watch from before a compaction and restart is gone", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			if _, err := pods.Create(ctx, testPod(name, "n1"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		rev, err := c.CompactEtcd(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rev <= 0 {
			t.Fatalf("compacted at revision %d", rev)
		}
		if err := c.APIServer().Restart(ctx); err != nil {
			t.Fatal(err)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
		if err != nil {
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Fatalf("watch from %s: %v, want 410", before.ResourceVersion, err)
			}
			return
		}
		defer w.Stop()
		ev, ok := <-w.ResultChan()
		if !ok || ev.Type != watch.Error {
			t.Fatalf("watch from compacted %s: first event %v, want a 410 error", before.ResourceVersion, ev.Type)
		}
		if st, _ := ev.Object.(*metav1.Status); st == nil || st.Code != http.StatusGone {
			t.Fatalf("watch error %+v, want code 410", ev.Object)
		}
	})
}

func TestHarnessFailures(t *testing.T) {
	t.Run("missing binaries are a config error", func(t *testing.T) {
		_, err := cluster.Start(t.Context(), cluster.Config{Binaries: cluster.Binaries{Etcd: "/nonexistent/etcd", APIServer: "/nonexistent/kube-apiserver"}})
		if !errors.Is(err, cluster.ErrInvalidConfig) || !errors.Is(err, cluster.ErrNoBinaries) {
			t.Fatalf("Start: %v, want ErrInvalidConfig and ErrNoBinaries", err)
		}
	})

	t.Run("an apiserver that cannot start fails Start with its log and leaves nothing behind", func(t *testing.T) {
		if servers.err != nil {
			t.Skipf("no etcd/kube-apiserver: %v", servers.err)
		}
		dir := t.TempDir()
		_, err := cluster.Start(t.Context(), cluster.Config{Binaries: servers.bins, Dir: dir, APIServerArgs: []string{"--no-such-flag"}})
		if err == nil || !strings.Contains(err.Error(), "no-such-flag") {
			t.Fatalf("Start: %v, want an error quoting the apiserver's complaint", err)
		}
		// etcd was stopped: its data directory is no longer locked, so a
		// second etcd can open it.
		c, err := cluster.Start(t.Context(), cluster.Config{Binaries: servers.bins, Dir: dir})
		if err != nil {
			t.Fatalf("a cluster on the same directory after the failure: %v", err)
		}
		c.Stop()
	})
}

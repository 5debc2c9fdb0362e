package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/e2e/cluster"
	"github.com/nodekit/nodekit/internal/testenv"
	"github.com/nodekit/nodekit/runtime/cri"
)

// A pod as a real cluster creates it (the ServiceAccount admission plugin's
// kube-api-access volume, env and a volume from a configMap) runs under
// kubenode on containerd and reads everything it is given: its environment,
// its configMap file (updated while it runs), its namespace and a token the
// apiserver accepts. A pod whose configMap is missing waits with
// CreateContainerConfigError and starts once the configMap exists.
func TestClusterPodEnvAndVolumesOnContainerd(t *testing.T) {
	// Exclusive: kubenode kills the runtime pods it does not know, those of
	// every other test sharing containerd too.
	endpoint := testenv.ExclusiveCRIEndpoint(t)
	image := testenv.TestImage(t)
	c := startClusterWith(t, cluster.Config{ServiceAccountAdmission: true})
	cfg := c.RESTConfig()
	cs, _ := clientset(t, cfg, 50, 100)
	ctx := t.Context()
	ns := "default"

	// What the controller-manager would have made.
	must(t, create(ctx, cs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	must(t, create(ctx, cs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": string(cfg.CAData)}}))
	must(t, create(ctx, cs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Data: map[string]string{"mode": "fast"}}))

	node := "podsrc-node"
	podsRoot := t.TempDir()
	k := startKubenode(t, buildKubenode(t), "-kubeconfig", writeKubeconfig(t, cfg, cfg.Host, ""), "-node-name", node,
		"-node-ip", "127.0.0.1", "-cri", endpoint, "-pods-root", podsRoot, "-pod-logs-root", t.TempDir(),
		"-sync-frequency", "2s", "-object-cache-ttl", "10m") // updates can only come by watch
	waitNode(t, cs, node, time.Minute, readyIs(corev1.ConditionTrue, "kubelet is posting ready status"))

	sa := "/var/run/secrets/kubernetes.io/serviceaccount"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes: []corev1.Volume{{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}},
			Containers: []corev1.Container{{
				Name: "main", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Env: []corev1.EnvVar{
					{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "mode"}}},
					// No limit: the node's allocatable, as with the kubelet.
					{Name: "CPUS", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "app", MountPath: "/etc/app"}},
				// Waits for the configMap update to reach its file, then reports.
				Command: []string{"sh", "-c", `while [ "$(cat /etc/app/mode)" != slow ]; do sleep 0.2; done
printf '%s|%s|%s|%s|%s|%s' "$MODE" "$(cat /etc/app/mode)" "$(cat ` + sa + `/namespace)" "$KUBERNETES_SERVICE_HOST" "$CPUS" "$(cat ` + sa + `/token)" > /dev/termination-log`},
			}},
		},
	}
	got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { removePod(t, cs, endpoint, ns, got.Name, got.UID) })
	var access string
	for _, v := range got.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
			access = v.Name
		}
	}
	if access == "" {
		t.Fatalf("admission added no kube-api-access volume: %+v", got.Spec.Volumes)
	}
	waitPod(t, cs, ns, "reader", func(p *corev1.Pod) string { return checkRunning(p, "") })

	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	must(t, err)
	cm.Data["mode"] = "slow"
	_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)
	done := waitPod(t, cs, ns, "reader", func(p *corev1.Pod) string {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Sprintf("phase %s: the configMap update has not reached the volume", p.Status.Phase)
		}
		return ""
	})
	term := done.Status.ContainerStatuses[0].State.Terminated
	parts := strings.SplitN(term.Message, "|", 6)
	if len(parts) != 6 {
		t.Fatalf("termination message %q", term.Message)
	}
	if want := []string{"fast", "slow", ns}; parts[0] != want[0] || parts[1] != want[1] || parts[2] != want[2] {
		t.Errorf("MODE, file, namespace = %q, want %q", parts[:3], want)
	}
	if parts[3] != "10.0.0.1" {
		t.Errorf("KUBERNETES_SERVICE_HOST = %q, want the kubernetes service's 10.0.0.1", parts[3])
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	must(t, err)
	if cpus := n.Status.Allocatable[corev1.ResourceCPU]; parts[4] != strconv.FormatInt(cpus.Value(), 10) {
		t.Errorf("limits.cpu without a limit = %q, want the node's allocatable %s", parts[4], cpus.String())
	}
	tr, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: parts[5]}}, metav1.CreateOptions{})
	must(t, err)
	if !tr.Status.Authenticated || tr.Status.User.Username != "system:serviceaccount:default:default" {
		t.Errorf("the pod's token is not accepted: %+v", tr.Status)
	}
	if uid := tr.Status.User.Extra["authentication.kubernetes.io/pod-uid"]; len(uid) != 1 || uid[0] != string(got.UID) {
		t.Errorf("token bound to %v, want the pod %s", uid, got.UID)
	}

	t.Run("a missing configMap holds the pod back with the kubelet's error until it exists", func(t *testing.T) {
		late := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
			Spec: corev1.PodSpec{
				NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "main", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sleep", "3600"},
					Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "late"}, Key: "x"}}}}}},
			},
		}
		lp, err := cs.CoreV1().Pods(ns).Create(ctx, late, metav1.CreateOptions{})
		must(t, err)
		t.Cleanup(func() { removePod(t, cs, endpoint, ns, lp.Name, lp.UID) })
		waitPod(t, cs, ns, "late", func(p *corev1.Pod) string {
			if len(p.Status.ContainerStatuses) == 1 {
				if w := p.Status.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" &&
					strings.Contains(w.Message, `configmaps "late" not found`) {
					return ""
				}
			}
			return fmt.Sprintf("statuses %+v", p.Status.ContainerStatuses)
		})
		must(t, create(ctx, cs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Data: map[string]string{"x": "1"}}))
		waitPod(t, cs, ns, "late", func(p *corev1.Pod) string { return checkRunning(p, "") })
	})
	_ = k
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(ctx context.Context, cs *kubernetes.Clientset, obj any) error {
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("create: unsupported %T", obj)
	}
	return err
}

// removePod deletes the pod, waits until the node has stopped it and the
// status manager removed it, then removes its containers and sandboxes from
// the shared containerd, which the agent leaves for garbage collection.
func removePod(t *testing.T, cs *kubernetes.Clientset, endpoint, ns, name string, uid types.UID) {
	ctx := context.Background()
	_ = cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)})
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	m, err := cri.New(ctx, cri.Config{Endpoint: endpoint, PodsRoot: t.TempDir(), PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer m.Close()
	// A container the runtime is still starting (a start the agent gave up
	// on when the pod was deleted: a cancelled call does not stop
	// containerd) cannot be removed until it runs: kill and remove again.
	var rmErr error
	for try := 0; try < 20; try++ {
		st, err := m.GetPodStatus(ctx, uid, name, ns)
		if err == nil {
			rp := st.RunningPod(m.Type())
			_ = m.KillPod(ctx, nil, rp, ptr.To[int64](1))
		}
		if rmErr = m.RemovePod(ctx, uid); rmErr == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("cleanup of pod %s: %v", uid, rmErr)
}

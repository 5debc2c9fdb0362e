package volume_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/volume"
)

// clusterPod is a pod as a cluster creates it: env from 5 configMap and
// secret sources (two keys, envFrom of each kind, one secret key), 4
// configMap/secret volumes and the kube-api-access projected volume.
func clusterPod(uid string) *v1.Pod {
	ref := func(n string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: n} }
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-" + uid, Namespace: "ns", UID: types.UID(uid), Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{
			ServiceAccountName: "default",
			Containers: []v1.Container{{Name: "main",
				EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("cm1")}}, {SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref("s1")}}},
				Env: []v1.EnvVar{
					{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("cm2"), Key: "k0"}}},
					{Name: "B", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("cm1"), Key: "k1"}}},
					{Name: "C", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("s2"), Key: "k0"}}},
					{Name: "NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "URL", Value: "http://$(NAME):$(A)"},
				}}},
			Volumes: []v1.Volume{
				{Name: "c1", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("cm1")}}},
				{Name: "c2", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("cm2")}}},
				{Name: "s1", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s1"}}},
				{Name: "s2", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s2"}}},
				{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("kube-root-ca.crt"), Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
		},
	}
}

type benchNode struct {
	api    *objectstest.API
	env    *podenv.Resolver
	vols   *volume.Manager
	clock  *clocktesting.FakeClock
	tokens *objects.Tokens
}

func newBenchNode(tb testing.TB, watch bool) *benchNode {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := objectstest.New()
	api.Clock = clk
	data := map[string]string{}
	bin := map[string][]byte{}
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		data[k] = fmt.Sprintf("value-%d-%0100d", i, i)
		bin[k] = []byte(data[k])
	}
	for _, n := range []string{"cm1", "cm2"} {
		api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}, Data: data})
	}
	for _, n := range []string{"s1", "s2"} {
		api.Set(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}, Data: bin})
	}
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"}})
	api.Set(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}})
	cache := objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets, Services: api.Services, Clock: clk, Watch: watch})
	if watch {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { cache.Run(ctx); close(done) }()
		tb.Cleanup(func() { cancel(); <-done })
	}
	tokens := objects.NewTokens(objects.TokensConfig{ServiceAccounts: api.ServiceAccounts, Clock: clk, Jitter: func() float64 { return 0.5 }})
	// tmpfs mounts (secret and projected volumes) are faked: a mount(2) and
	// umount(2) per volume more on a real node.
	vols, err := volume.New(volume.Config{PodsRoot: tb.TempDir(), Objects: cache, Tokens: tokens, Clock: clk,
		Mounter: &fakeMounter{mounted: map[string]int64{}}})
	if err != nil {
		tb.Fatal(err)
	}
	return &benchNode{api: api, env: podenv.New(podenv.Config{Objects: cache, Services: cache}), vols: vols, clock: clk, tokens: tokens}
}

func (n *benchNode) build(tb testing.TB, pod *v1.Pod) {
	ctx := context.Background()
	if err := n.vols.SetUp(ctx, pod); err != nil {
		tb.Fatal(err)
	}
	if _, err := n.env.Env(ctx, pod, &pod.Spec.Containers[0], []string{"10.0.0.7"}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkPodEnvAndVolumes builds the environment and the volumes of a pod
// with 5 configMap/secret sources and the kube-api-access volume: "first"
// for a new pod (every file written), "resync" for a pod whose sources did
// not change (what every sync costs).
func BenchmarkPodEnvAndVolumes(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		n := newBenchNode(b, false)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			pod := clusterPod(fmt.Sprintf("uid-%d", i))
			n.build(b, pod)
			b.StopTimer()
			_ = n.vols.TearDown(pod.UID)
			b.StartTimer()
		}
	})
	b.Run("resync", func(b *testing.B) {
		n := newBenchNode(b, false)
		pod := clusterPod("uid-steady")
		n.build(b, pod)
		b.ReportAllocs()
		for b.Loop() {
			n.build(b, pod)
		}
	})
}

// steadyStateRequests runs pods that share their sources through an hour
// of syncs every period and returns the apiserver requests per pod; with
// watch, the cache watches the objects it read.
func steadyStateRequests(tb testing.TB, pods int, period time.Duration, watch bool) float64 {
	n := newBenchNode(tb, watch)
	ps := make([]*v1.Pod, pods)
	for i := range ps {
		ps[i] = clusterPod(fmt.Sprintf("uid-%d", i))
		n.build(tb, ps[i]) // start: env and volumes
	}
	if watch {
		// The 5 sources and the service lists of the pods' namespace and
		// the "kubernetes" service's.
		for deadline := time.Now().Add(10 * time.Second); n.api.Watches() < 7; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				tb.Fatalf("%d watches, want 7", n.api.Watches())
			}
		}
	}
	before := n.api.TotalRequests()
	for t := time.Duration(0); t < time.Hour; t += period {
		n.clock.Step(period)
		for _, p := range ps {
			if err := n.vols.SetUp(context.Background(), p); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return float64(n.api.TotalRequests()-before) / float64(pods)
}

// BenchmarkSteadyStateAPIRequests reports the apiserver requests per pod per
// hour of running pods synced every minute (the default sync period), for
// one pod alone and for 10 pods sharing their configMaps and secrets, with
// the cache's TTL and with its watches.
func BenchmarkSteadyStateAPIRequests(b *testing.B) {
	for _, watch := range []bool{false, true} {
		for _, pods := range []int{1, 10} {
			b.Run(fmt.Sprintf("watch=%v/pods=%d", watch, pods), func(b *testing.B) {
				var r float64
				for b.Loop() {
					r = steadyStateRequests(b, pods, time.Minute, watch)
				}
				b.ReportMetric(r, "requests/pod/hour")
			})
		}
	}
}

func TestSteadyStateDoesNotGetEveryObjectAtEverySync(t *testing.T) {
	// Syncs every 10s: 360 an hour. Each of the 5 objects is read once per
	// minute (the cache's TTL), the token refreshed once (at 80% of 3607s).
	got := steadyStateRequests(t, 1, 10*time.Second, false)
	if max := 5*60 + 2.0; got > max {
		t.Fatalf("%.0f requests per pod-hour at steady state, want at most %.0f", got, max)
	}
	if got < 5*59 {
		t.Fatalf("%.0f requests: the sources are not refreshed every TTL", got)
	}
	// Watched, only the token's refresh is left.
	if got := steadyStateRequests(t, 1, 10*time.Second, true); got > 2 {
		t.Fatalf("%.0f requests per pod-hour with watches, want at most 2", got)
	}
}

package procruntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/objects"
	"github.com/nodekit/nodekit/objects/objectstest"
	"github.com/nodekit/nodekit/podenv"
	"github.com/nodekit/nodekit/runtime"
)

// A provider that is not CRI-based resolves environments with the same
// podenv resolver as runtime/cri: API objects, fieldRefs and expansion.
func TestProcessGetsTheResolvedEnvironment(t *testing.T) {
	api := objectstest.New()
	api.Set(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"greeting": "hello"}})
	env := podenv.New(podenv.Config{Objects: objects.New(objects.Config{ConfigMaps: api.ConfigMaps, Secrets: api.Secrets})})
	r, err := New(Config{Root: t.TempDir(), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := filepath.Join(t.TempDir(), "out")
	c := sh("main", `echo "$GREETING $POD $MSG" > `+out)
	c.Env = []v1.EnvVar{
		{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Key: "greeting"}}},
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "MSG", Value: "$(GREETING)-$(POD)"},
	}
	pod := newPod(v1.RestartPolicyNever, nil, c)
	converge(t, r, pod, func(st *runtime.PodStatus) bool { return state(st, "main") == runtime.ContainerStateExited })
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "hello p hello-p" {
		t.Fatalf("the process saw %q", got)
	}

	t.Run("a missing configMap is a CreateContainerConfigError", func(t *testing.T) {
		c.Env[0].ValueFrom.ConfigMapKeyRef.Name = "missing"
		pod := newPod(v1.RestartPolicyNever, nil, c)
		pod.UID = "uid-missing"
		res := r.SyncPod(context.Background(), pod, nil, nil, nil)
		if runtime.Reason(res.Error()) != "CreateContainerConfigError" || !strings.Contains(res.Error().Error(), `configmaps "missing" not found`) {
			t.Fatalf("got %v", res.Error())
		}
	})
}
